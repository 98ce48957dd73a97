#!/usr/bin/env bash
# Crash test of the SQLite store: play many games against the real server binary, SIGKILL it at a
# random moment, restart it on the same database and check that every acknowledged move is
# there, that every game replays to its stored position and that watch streams resume without
# gaps (see crates/oanquan-server/examples/crash_driver.rs). Three rounds, then a final check.
#
# Usage: bash .ci/crash-test.sh path/to/oanquan-server
set -euo pipefail

server=$(realpath "$1")
cd "$(dirname "$0")/.."
rounds=${CRASH_ROUNDS:-3}

cargo build --quiet --locked -p oanquan-server --example crash_driver
driver=target/debug/examples/crash_driver

work=$(mktemp -d)
pid=
cleanup() {
  if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
db=$work/oanquan.db
journal=$work/journal.json

# Starts the server on $db; sets $pid and $addr.
start_server() {
  : >"$work/stdout"
  RUST_LOG=${RUST_LOG:-warn} "$server" --listen 127.0.0.1:0 --database "$db" \
    >"$work/stdout" 2>>"$work/server.log" &
  pid=$!
  for _ in $(seq 100); do
    if line=$(grep -m1 '^oanquan-server listening on ' "$work/stdout"); then
      addr=${line#oanquan-server listening on }
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "crash-test: the server did not start; its log:" >&2
  cat "$work/server.log" >&2
  exit 1
}

for round in $(seq "$rounds"); do
  start_server
  rm -f "$work/ready"
  "$driver" --addr "$addr" --journal "$journal" --ready-file "$work/ready" &
  driver_pid=$!
  # The kill must fall in the load, not in the verification of earlier rounds' games, which
  # takes longer each round and longer still on a busy machine.
  for _ in $(seq 1200); do
    if [[ -e $work/ready ]] || ! kill -0 "$driver_pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if [[ ! -e $work/ready ]]; then
    kill -KILL "$driver_pid" 2>/dev/null || true
    wait "$driver_pid" || true
    echo "crash-test: round $round: the driver failed or timed out verifying; server log:" >&2
    tail -n 50 "$work/server.log" >&2
    exit 1
  fi
  # A random moment between 1 and 4 seconds into the load.
  sleep "$((1 + RANDOM % 3)).$((RANDOM % 10))"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
  echo "crash-test: round $round: server killed with SIGKILL"
  if ! wait "$driver_pid"; then
    echo "crash-test: round $round failed; server log:" >&2
    tail -n 50 "$work/server.log" >&2
    exit 1
  fi
done

# Final check after the last kill, then one move per unfinished game with the old tokens.
start_server
if ! "$driver" --addr "$addr" --journal "$journal" --verify-only; then
  echo "crash-test: final verification failed; server log:" >&2
  tail -n 50 "$work/server.log" >&2
  exit 1
fi
kill -TERM "$pid"
wait "$pid"
pid=
echo "crash-test: ok"
