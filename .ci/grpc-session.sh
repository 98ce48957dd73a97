#!/usr/bin/env bash
# Starts the real server binary and runs the README's grpcurl and buf curl sessions against it,
# exactly as written there, with no .proto files at hand (reflection only); then the online
# session below (timed games and a seek pairing).
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
for name in grpcurl bufcurl; do
  script=$(session "$name")
  [ -n "$script" ] || { echo "README.md has no $name session"; exit 1; }
  echo "--- $name session"
  (cd "$work" && bash -euo pipefail -c "$script")
  echo "--- $name session passed"
done

# Online play: a timed game's clocks, and two seekers paired. Written like the README's
# sessions (copy-pasteable into a terminal) and run the same way.
read -r -d '' online <<'SESSION' || true  # read ends at the end of input: status 1
ADDR=${ADDR:-localhost:50051}
bufcurl() { buf curl --protocol grpc --http2-prior-knowledge "$@"; }

# A timed game, 1+0 (a minute each, no increment): the game comes back with its time control
# and the clocks, both players' full minute; none runs until someone joins.
CREATED=$(grpcurl -plaintext -d '{"time_control": {"real_time": {"initial": "60s", "increment": "0s"}}, "display_name": "Lan"}' \
  "$ADDR" oanquan.v1.GameService/CreateGame)
jq -e '.game.timeControl.realTime.initial == "60s" and .game.clocks.firstRemaining == "60s"
  and .game.clocks.secondRemaining == "60s" and (.game.clocks | has("measuredAt"))' <<<"$CREATED"
# The same with buf curl, 3+2: three minutes each, two seconds added after each move.
bufcurl -d '{"time_control": {"real_time": {"initial": "180s", "increment": "2s"}}, "display_name": "Lan"}' \
  "http://$ADDR/oanquan.v1.GameService/CreateGame" \
  | jq -e '.game.timeControl.realTime.increment == "2s" and .game.clocks.secondRemaining == "180s"'

# Two seekers want the same game (standard rules, 3+2). Lan's seek waits in the background...
SEEK='{"rules": {"preset": "standard"}, "time_control": {"real_time": {"initial": "180s", "increment": "2s"}}'
# (-max-time: a seek waits as long as its caller does; never wait forever.)
grpcurl -plaintext -max-time 20 -d "$SEEK, \"display_name\": \"Lan\"}" "$ADDR" oanquan.v1.GameService/Seek > seek-lan.json &
SEEKING=$!
# ...and shows in ListSeeks (and in the lobby stream) while it does.
for _ in $(seq 50); do
  grpcurl -plaintext "$ADDR" oanquan.v1.GameService/ListSeeks | jq -e '(.seeks // []) | any(.displayName == "Lan")' >/dev/null && break
  sleep 0.1
done
# Minh's seek pairs with it at once; both streams end with `paired`: the same game, the other
# seat, and each seeker's own token.
grpcurl -plaintext -d "$SEEK, \"display_name\": \"Minh\"}" "$ADDR" oanquan.v1.GameService/Seek > seek-minh.json
wait $SEEKING
jq -s -e 'map(keys[0]) == ["waiting", "paired"]' seek-lan.json
jq -s -e 'map(keys[0]) == ["paired"]' seek-minh.json
jq -n -e --slurpfile lan seek-lan.json --slurpfile minh seek-minh.json '$lan[-1].paired as $l | $minh[-1].paired as $m
  | $l.game.id == $m.game.id and $l.seat != $m.seat and $l.playerToken != $m.playerToken
    and $l.game.status == "GAME_STATUS_ACTIVE" and ($l.game | has("clocks"))'
grpcurl -plaintext "$ADDR" oanquan.v1.GameService/ListSeeks | jq -e '(.seeks // []) | length == 0'
SESSION
echo "--- online session"
(cd "$work" && bash -euo pipefail -c "$online")
echo "--- online session passed"
