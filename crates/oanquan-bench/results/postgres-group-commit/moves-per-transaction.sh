#!/usr/bin/env bash
# Moves per write transaction during an `oanquan-bench ... --database` run (BENCHMARKS.md,
# "Issue 20"): every 0.5 s, for each bench schema (oq_bench_*), the moves stored and the distinct
# transactions that wrote them (a row's xmin). The last line per schema is the run's figure,
# sampled just before the bench drops the schema. Stop it with kill when the bench ends.
url=${OANQUAN_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}
while true; do
  for s in $(psql -Atq -d "$url" -c "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'oq_bench_%'" 2>/dev/null); do
    r=$(psql -Atq -d "$url" -c "SELECT count(*), count(DISTINCT xmin::text) FROM $s.moves" 2>/dev/null)
    [ -n "$r" ] && echo "$(date +%T) $s moves|transactions $r"
  done
  sleep 0.5
done
