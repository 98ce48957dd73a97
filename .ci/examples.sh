#!/usr/bin/env bash
# Runs the example clients (examples/python, examples/typescript) against the real server:
#
#   bash .ci/examples.sh [path/to/oanquan-server]
#
# Without an argument it takes $OANQUAN_SERVER_BIN, else target/release/oanquan-server or
# target/debug/oanquan-server, whichever was built last (release on a tie) -- the same rule as
# the examples' own test setups -- and its first line says which binary it runs.
#
# Installs what they need (a venv with examples/python/requirements.txt; `npm ci` in
# examples/typescript), starts the server once on a free loopback port, runs both example
# test suites against it (each generates its stubs from proto/ first), and stops the server
# on exit whatever happens. Both suites always run; exits non-zero if either fails.
set -euo pipefail

step() { printf '\n=== examples: %s (%ss)\n' "$*" "$SECONDS"; }
die() { printf 'examples.sh: %s\n' "$*" >&2; exit 1; }

[[ $# -le 1 ]] || die "usage: bash .ci/examples.sh [path/to/oanquan-server]"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [[ $# -eq 1 ]]; then
  BIN=$1 WHY="given on the command line"
elif [[ -n ${OANQUAN_SERVER_BIN:-} ]]; then
  BIN=$OANQUAN_SERVER_BIN WHY="from OANQUAN_SERVER_BIN"
else
  release=$ROOT/target/release/oanquan-server debug=$ROOT/target/debug/oanquan-server
  if [[ -f $release && -x $release ]] && ! [[ -f $debug && -x $debug && $debug -nt $release ]]; then
    BIN=$release
  elif [[ -f $debug && -x $debug ]]; then
    BIN=$debug
  else
    die "no oanquan-server in target/release or target/debug: build one with" \
      "\`cargo build --release -p oanquan-server\`, or pass its path"
  fi
  if [[ -f $release && -x $release && -f $debug && -x $debug ]]; then
    WHY="the one built last of target/release and target/debug"
  else
    WHY="the only one built"
  fi
fi
[[ -f $BIN && -x $BIN ]] || die "server binary '$BIN' ($WHY) not found or not executable"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
echo "examples: oanquan-server ${BIN#"$ROOT"/} ($WHY)"
cd "$ROOT"

# Limits (seconds), generous for 2 cores and a cold package cache.
INSTALL_TIMEOUT=${EXAMPLES_INSTALL_TIMEOUT:-900}
SUITE_TIMEOUT=${EXAMPLES_SUITE_TIMEOUT:-300}
START_TIMEOUT=20

WORK=$(mktemp -d "${TMPDIR:-/tmp}/oanquan-examples.XXXXXX")
SERVER_PID=""

stop_server() {
  [[ -n $SERVER_PID ]] || return 0
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

server_log_tail() {
  if [[ -s $WORK/server.err ]]; then
    echo "--- last lines of the server's stderr:"
    tail -n 40 "$WORK/server.err"
    echo "---"
  fi
}

on_exit() {
  local status=$?
  stop_server
  if [[ $status -ne 0 ]]; then server_log_tail; fi
  rm -rf "$WORK"
  exit "$status"
}
trap on_exit EXIT
trap 'echo "examples.sh: interrupted" >&2; exit 130' INT TERM

# Starts the server with the given extra args; sets ADDR, or returns 1.
start_server() {
  : >"$WORK/server.out"
  : >"$WORK/server.err"
  "$BIN" --listen 127.0.0.1:0 "$@" >"$WORK/server.out" 2>"$WORK/server.err" &
  SERVER_PID=$!
  local deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    ADDR=$(sed -n 's/^oanquan-server listening on //p' "$WORK/server.out" | head -n 1)
    [[ -n $ADDR ]] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  stop_server
  return 1
}

step "tools"
command -v python3 >/dev/null || die "python3 not found"
command -v node >/dev/null || die "node not found"
command -v npm >/dev/null || die "npm not found"
echo "python3 $(python3 -c 'import sys; print(sys.version.split()[0])'), node $(node --version), npm $(npm --version)"
node -e 'const [major, minor] = process.versions.node.split(".").map(Number);
  process.exit(major > 20 || (major === 20 && minor >= 11) ? 0 : 1)' ||
  die "Node.js 20.11 or newer is needed, found $(node --version)"

step "install: Python (examples/python/.venv)"
VENV=$ROOT/examples/python/.venv
[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
timeout "$INSTALL_TIMEOUT" "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
  -r examples/python/requirements.txt
"$VENV/bin/python" -m pip freeze --disable-pip-version-check | tr '\n' ' '
echo

step "install: TypeScript (npm ci in examples/typescript)"
(cd examples/typescript && timeout "$INSTALL_TIMEOUT" npm ci --no-audit --no-fund)

step "start $BIN"
if ! start_server --in-memory; then
  if grep -q -- "--in-memory" "$WORK/server.err" 2>/dev/null; then
    echo "the server does not accept --in-memory; starting it without"
    start_server || die "the server did not print its listening line within ${START_TIMEOUT}s"
  else
    die "the server did not print its listening line within ${START_TIMEOUT}s"
  fi
fi
echo "server pid $SERVER_PID listening on $ADDR"
export OANQUAN_SERVER_ADDR=$ADDR

declare -A RESULT
run_suite() {
  local name=$1
  shift
  step "$name"
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "the server is no longer running"
    RESULT[$name]="FAILED (server not running)"
    return
  fi
  local status=0
  timeout --kill-after=10 "$SUITE_TIMEOUT" "$@" || status=$?
  if [[ $status -eq 0 ]]; then
    RESULT[$name]=ok
  elif [[ $status -eq 124 || $status -eq 137 ]]; then
    RESULT[$name]="FAILED (timed out after ${SUITE_TIMEOUT}s)"
  else
    RESULT[$name]="FAILED (exit $status)"
  fi
}

cd "$ROOT/examples/python"
run_suite "Python example (pytest)" "$VENV/bin/python" -m pytest -p no:cacheprovider
cd "$ROOT/examples/typescript"
run_suite "TypeScript example (node --test)" npm test --silent
cd "$ROOT"

step "summary"
failed=0
for name in "Python example (pytest)" "TypeScript example (node --test)"; do
  printf '  %-36s %s\n' "$name" "${RESULT[$name]}"
  [[ ${RESULT[$name]} == ok ]] || failed=1
done
((failed == 0)) || exit 1  # the EXIT trap prints the server's log
echo "examples: both clients played full games and followed their events"
