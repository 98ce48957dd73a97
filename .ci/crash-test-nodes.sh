#!/usr/bin/env bash
# Crash test of several nodes on one PostgreSQL database: three server binaries on a fresh
# schema of $OANQUAN_TEST_POSTGRES_URL, the crash driver playing games (a quarter of them against
# the computer, another quarter timed games at 2+0 that the player to move abandons after a few moves)
# spread over all three and watching each on another node; one node, picked at random, is
# killed with SIGKILL at a random moment under load and restarted; the driver waits for each
# abandoned timed game to end by its clock (flags due while the killed node, in round 1 the
# leader that runs the timekeeper, is dead fall once another node leads), the one who stopped
# losing, within 3 s of the deadline; the next round verifies against a node that survived that
# every acknowledged move is there, every game replays to its stored position, watch streams
# resume without gaps, every game's log has one MovePlayed per move and at most one GameOver
# (exactly one, after the last move, for a finished game), and computer games go on (see
# crates/oanquan-server/examples/crash_driver.rs). A few rounds, then a final check. The schema
# is dropped at the end.
#
# Usage: bash .ci/crash-test-nodes.sh path/to/oanquan-server
set -euo pipefail

server=$(realpath "$1")
cd "$(dirname "$0")/.."
rounds=${CRASH_ROUNDS:-3}
nodes=3
url=${OANQUAN_TEST_POSTGRES_URL:?crash-test-nodes: set OANQUAN_TEST_POSTGRES_URL}

cargo build --quiet --locked -p oanquan-server --example crash_driver
driver=target/debug/examples/crash_driver

work=$(mktemp -d)
schema=oq_crash_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
pids=()
addrs=()
cleanup() {
  for pid in "${pids[@]}"; do
    if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
  done
  psql -q -d "$url" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
psql -q -v ON_ERROR_STOP=1 -d "$url" -c "CREATE SCHEMA $schema" >/dev/null
# The nodes' tests pass the schema the same way: the session's search_path, in the URL.
if [[ $url == *\?* ]]; then sep='&'; else sep='?'; fi
database="$url${sep}options=-csearch_path%3D$schema"

# Starts node $1 on the schema; sets ${pids[$1]} and ${addrs[$1]}.
start_node() {
  local n=$1 line
  : >"$work/stdout.$n"
  OANQUAN_DATABASE_URL=$database RUST_LOG=${RUST_LOG:-warn} \
    "$server" --listen 127.0.0.1:0 --computer-move-time 10ms --shutdown-drain-timeout 2s \
    --first-move-time 3s \
    >"$work/stdout.$n" 2>>"$work/server.$n.log" &
  pids[n]=$!
  for _ in $(seq 100); do
    if line=$(grep -m1 '^oanquan-server listening on ' "$work/stdout.$n"); then
      addrs[n]=${line#oanquan-server listening on }
      return 0
    fi
    if ! kill -0 "${pids[n]}" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "crash-test-nodes: node $n did not start; its log:" >&2
  cat "$work/server.$n.log" >&2
  exit 1
}

logs() {
  for n in $(seq 0 $((nodes - 1))); do
    echo "--- node $n:" >&2
    tail -n 30 "$work/server.$n.log" >&2
  done
}

# The driver's --addr list, starting from node $1 (which verifies the journal).
addr_args() {
  local first=$1 n
  for i in $(seq 0 $((nodes - 1))); do
    n=$(((first + i) % nodes))
    printf -- '--addr\n%s\n' "${addrs[n]}"
  done
}

for n in $(seq 0 $((nodes - 1))); do start_node "$n"; done
survivor=0
for round in $(seq "$rounds"); do
  rm -f "$work/ready"
  mapfile -t addr_list < <(addr_args "$survivor")
  "$driver" "${addr_list[@]}" --computer-every 4 --timed-every 3 --max-seconds 20 \
    --journal "$work/journal.json" --ready-file "$work/ready" &
  driver_pid=$!
  for _ in $(seq 1200); do
    if [[ -e $work/ready ]] || ! kill -0 "$driver_pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if [[ ! -e $work/ready ]]; then
    kill -KILL "$driver_pid" 2>/dev/null || true
    wait "$driver_pid" || true
    echo "crash-test-nodes: round $round: the driver failed or timed out verifying" >&2
    logs
    exit 1
  fi
  # At a random moment between 1 and 4 seconds into the load, a random node; in the first
  # round node 0, which started first and so holds the lease that runs the computer's turns
  # and the timekeeper: the computer games must go on from another node, and the flags due
  # before that node takes over must fall then. That kill comes 3 to 4 seconds in, once the
  # first abandoned timed games' flags (2 s clocks) are falling steadily.
  if ((round == 1)); then
    sleep "3.$((RANDOM % 10))"
  else
    sleep "$((1 + RANDOM % 3)).$((RANDOM % 10))"
  fi
  victim=$((round == 1 ? 0 : RANDOM % nodes))
  kill -KILL "${pids[victim]}"
  wait "${pids[victim]}" 2>/dev/null || true
  pids[victim]=
  echo "crash-test-nodes: round $round: node $victim killed with SIGKILL"
  if ! wait "$driver_pid"; then
    echo "crash-test-nodes: round $round failed" >&2
    logs
    exit 1
  fi
  start_node "$victim"
  survivor=$(((victim + 1) % nodes))
done

# Final check against a survivor of the last kill, then one move per unfinished game (each
# computer game first waiting for its computer) with the old tokens.
mapfile -t addr_list < <(addr_args "$survivor")
if ! "$driver" "${addr_list[@]}" --journal "$work/journal.json" --verify-only; then
  echo "crash-test-nodes: final verification failed" >&2
  logs
  exit 1
fi
for n in $(seq 0 $((nodes - 1))); do
  kill -TERM "${pids[n]}"
  wait "${pids[n]}"
  pids[n]=
done
echo "crash-test-nodes: ok"
