#!/usr/bin/env bash
# Every 0.5 s: for each oq_bench_* schema, moves stored and distinct writing transactions (xmin) of the moves table.
url=postgres://postgres@127.0.0.1:5432/test
while true; do
  for s in $(psql -Atq -d $url -c "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'oq_bench_%'" 2>/dev/null); do
    r=$(psql -Atq -d $url -c "SELECT count(*), count(DISTINCT xmin::text) FROM $s.moves" 2>/dev/null)
    [ -n "$r" ] && echo "$(date +%T) $s $r"
  done
  sleep 0.5
done
