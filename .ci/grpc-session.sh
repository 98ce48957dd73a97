#!/usr/bin/env bash
# Starts the real server binary and runs the README's grpcurl and buf curl sessions against it,
# exactly as written there, with no .proto files at hand (reflection only): grpcurl, buf curl,
# online play (timed games and a seek pairing), and accounts (a rated game, a revoked key).
# Usage: bash .ci/grpc-session.sh path/to/oanquan-server
set -euo pipefail
server=$(realpath "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT

# The server prints its address once bound; wait for that line instead of sleeping.
mkfifo "$work/out"
( cd "$work" && exec "$server" --listen 127.0.0.1:0 --in-memory >"$work/out" 2>"$work/server.log" ) &
pid=$!
# Keep the pipe open for the server's lifetime so that a later write cannot hit a closed pipe.
exec 3<"$work/out"
read -r -t 30 line <&3 || { cat "$work/server.log"; exit 1; }
export ADDR=${line#oanquan-server listening on }
echo "server at $ADDR"

session() {
  # The block between the session's markers in README.md, without the ``` fences.
  sed -n "/<!-- session:$1 -->/,/<!-- \/session:$1 -->/p" "$root/README.md" | sed '1,2d;$d' | sed '$d'
}
for name in grpcurl bufcurl online accounts; do
  script=$(session "$name")
  [ -n "$script" ] || { echo "README.md has no $name session"; exit 1; }
  echo "--- $name session"
  (cd "$work" && bash -euo pipefail -c "$script")
  echo "--- $name session passed"
done

