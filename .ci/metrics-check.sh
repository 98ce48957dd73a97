#!/usr/bin/env bash
# Starts the real server binary with --metrics-listen, plays a short scripted game with grpcurl
# (create, join, two moves, a refused move, a resignation), scrapes /metrics with curl and
# parses it with the Python prometheus_client's OpenMetrics parser (the strict one, for the
# format the server sends), then checks the counts it played; and /ready and /live answer 200.
# Usage: bash .ci/metrics-check.sh path/to/oanquan-server
set -euo pipefail
server=$(realpath "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT

mkfifo "$work/out"
( cd "$work" && exec "$server" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --in-memory \
    --node-name ci-node >"$work/out" 2>"$work/server.log" ) &
pid=$!
exec 3<"$work/out"
read -r -t 30 line <&3 || { cat "$work/server.log"; exit 1; }
ADDR=${line#oanquan-server listening on }
read -r -t 30 line <&3 || { cat "$work/server.log"; exit 1; }
METRICS=${line#oanquan-server metrics listening on }
echo "server at $ADDR, metrics at $METRICS"

call() { grpcurl -plaintext "$@"; }
CREATED=$(call -H "x-request-id: ci-create-1" \
  -d '{"rules": {"preset": "standard"}, "seat": "PLAYER_FIRST", "display_name": "Lan"}' \
  "$ADDR" oanquan.v1.GameService/CreateGame)
GAME=$(jq -r .game.id <<<"$CREATED"); LAN=$(jq -r .playerToken <<<"$CREATED")
MINH=$(call -d "{\"game_id\": \"$GAME\", \"display_name\": \"Minh\"}" \
  "$ADDR" oanquan.v1.GameService/JoinGame | jq -r .playerToken)
call -H "authorization: Bearer $LAN" \
  -d "{\"game_id\": \"$GAME\", \"move\": {\"square\": 1, \"direction\": \"DIRECTION_RIGHT\"}, \"expected_ply\": 0}" \
  "$ADDR" oanquan.v1.GameService/PlayMove >/dev/null
call -H "authorization: Bearer $MINH" \
  -d "{\"game_id\": \"$GAME\", \"move\": {\"square\": 8, \"direction\": \"DIRECTION_LEFT\"}, \"expected_ply\": 1}" \
  "$ADDR" oanquan.v1.GameService/PlayMove >/dev/null
# Out of turn: FAILED_PRECONDITION. -v shows the response metadata: the request id comes back.
if call -v -H "authorization: Bearer $MINH" -H "x-request-id: ci-refused-1" \
  -d "{\"game_id\": \"$GAME\", \"move\": {\"square\": 8, \"direction\": \"DIRECTION_LEFT\"}}" \
  "$ADDR" oanquan.v1.GameService/PlayMove >"$work/refused.txt" 2>&1; then
  echo "an out-of-turn move was played"; exit 1
fi
grep -qi "x-request-id: ci-refused-1" "$work/refused.txt" \
  || { echo "the refusal does not carry the request id:"; cat "$work/refused.txt"; exit 1; }
call -H "authorization: Bearer $LAN" -d "{\"game_id\": \"$GAME\"}" \
  "$ADDR" oanquan.v1.GameService/Resign >/dev/null

for probe in ready live; do
  body=$(curl -fsS "http://$METRICS/$probe") || { echo "/$probe did not answer 200"; exit 1; }
  [ "$body" = "$probe" ] || { echo "/$probe said: $body"; exit 1; }
done
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$METRICS/nothing")
[ "$code" = 404 ] || { echo "/nothing answered $code, not 404"; exit 1; }

curl -fsS "http://$METRICS/metrics" -o "$work/metrics.txt"
python3 - "$work/metrics.txt" <<'PY'
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families

text = open(sys.argv[1]).read()
samples = {}
families = {}
for family in text_string_to_metric_families(text):
    families[family.name] = family.type
    for s in family.samples:
        samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

def value(name, **labels):
    return sum(v for (n, ls), v in samples.items()
               if n == name and all(dict(ls).get(k) == w for k, w in labels.items()))

def rpc(method, code):
    return value("oanquan_rpcs_total", service="oanquan.v1.GameService", method=method, code=code)

checks = {
    "build info": value("oanquan_build_info", node="ci-node") == 1,
    "moves": value("oanquan_moves_total") == 2,
    "games created": value("oanquan_games_created_total") == 1,
    "games resigned": value("oanquan_games_finished_total", reason="resignation") == 1,
    "CreateGame OK": rpc("CreateGame", "OK") == 1,
    "PlayMove OK": rpc("PlayMove", "OK") == 2,
    "PlayMove FAILED_PRECONDITION": rpc("PlayMove", "FAILED_PRECONDITION") == 1,
    "PlayMove latency count": value("oanquan_rpc_duration_seconds_count", method="PlayMove") == 3,
    "commit histogram": families.get("oanquan_store_commit_duration_seconds") == "histogram",
    "moves is a counter": families.get("oanquan_moves") == "counter",
    "ready": value("oanquan_ready") == 1,
    "connections by state": families.get("oanquan_connections_open") == "gauge"
        and {dict(ls).get("state") for (n, ls) in samples if n == "oanquan_connections_open"}
        == {"handshake", "serving", "draining"},
    "batch size histogram": families.get("oanquan_store_commit_batch_size") == "histogram",
}
failed = [name for name, ok in checks.items() if not ok]
print(f"metrics: {len(families)} families, {len(samples)} samples parsed")
if failed:
    print("metrics check failed:", ", ".join(failed))
    sys.exit(1)
print("metrics check passed")
PY
