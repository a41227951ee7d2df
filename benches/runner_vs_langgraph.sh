#!/bin/bash
# uwf's runner and LangGraph on the same shape, in turns: 1,000 threads × 20 steps of a one-role
# loop, every step stored. Each round runs, one after another:
#   uwf on redb                 benches/runner_pg.sh BIN redb 256
#   uwf on PostgreSQL           benches/runner_pg.sh BIN PG_URL 256 1             (with PG_URL)
#   four uwf runners on it      benches/runner_pg.sh BIN PG_URL 256 4             (with PG_URL)
#   LangGraph, InMemorySaver    benches/langgraph_runner.py memory   (1 and 2 processes)
#   LangGraph, SqliteSaver      benches/langgraph_runner.py sqlite   (1 and 2 processes)
#   LangGraph, PostgresSaver    benches/langgraph_runner.py postgres (1 and 2 processes; with PG_URL,
#                               a fresh database each run, dropped after)
# then prints a Markdown table of the medians (steps/s) and of uwf's over LangGraph's for the
# matching store (redb : SQLite, PostgreSQL : PostgreSQL, and either : memory).
#
#   benches/runner_vs_langgraph.sh UWF_BIN [postgres://USER@HOST:PORT]
#   ROUNDS=1 benches/runner_vs_langgraph.sh ...      # 3 rounds by default
# UWF_BIN's file name must be `uwf`. LangGraph comes from benches/langgraph_env.sh's environment.
set -euo pipefail
BIN=$1; PG=${2:-}; ROUNDS=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd)
py=$("$here/langgraph_env.sh")
work=$(mktemp -d); db=""
cleanup() {
  if [ -n "$db" ]; then psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# One run: its load, its output, and its steps/s appended to $work/results as "NAME<tab>R".
measure() {
  local name=$1; shift
  echo "## $name  (load:$(uptime | sed 's/.*load average://'))"
  "$@" > "$work/out"
  cat "$work/out"
  local r
  r=$(sed -nE 's/.*: ([0-9.]+) steps\/s.*/\1/p' "$work/out" | head -1)
  [ -n "$r" ] || { echo "no steps/s from $name" >&2; exit 1; }
  printf '%s\t%s\n' "$name" "$r" >> "$work/results"
}

langgraph_pg() {
  db="lg_bench_$$"
  psql -q "$PG/postgres" -c "CREATE DATABASE $db"
  "$py" "$here/langgraph_runner.py" postgres --postgres-url "$PG/$db" "$@"
  psql -q "$PG/postgres" -c "DROP DATABASE $db WITH (FORCE)"
  db=""
}

: > "$work/results"
for round in $(seq "$ROUNDS"); do
  echo "# round $round of $ROUNDS"
  measure "uwf redb" "$here/runner_pg.sh" "$BIN" redb 256
  [ -z "$PG" ] || measure "uwf PostgreSQL" "$here/runner_pg.sh" "$BIN" "$PG" 256 1
  [ -z "$PG" ] || measure "uwf PostgreSQL, four runners" "$here/runner_pg.sh" "$BIN" "$PG" 256 4
  for saver in memory sqlite postgres; do
    for p in 1 2; do
      name="LangGraph $saver, $p process$([ "$p" = 1 ] || echo es)"
      case $saver in
        postgres) [ -z "$PG" ] || measure "$name" langgraph_pg --processes "$p" ;;
        *) measure "$name" "$py" "$here/langgraph_runner.py" "$saver" --processes "$p" ;;
      esac
    done
  done
done

echo
python3 - "$work/results" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, r = line.rstrip("\n").split("\t")
    runs.setdefault(name, []).append(float(r))
med = {name: statistics.median(rs) for name, rs in runs.items()}
n = max(len(rs) for rs in runs.values())
print(f"| configuration | steps/s (median of {n}) | runs |")
print("| --- | ---: | --- |")
for name, rs in runs.items():
    print(f"| {name} | {med[name]:.0f} | {', '.join(f'{r:.0f}' for r in rs)} |")
print()
print("| uwf | LangGraph | uwf ÷ LangGraph |")
print("| --- | --- | ---: |")
pairs = [("uwf redb", "sqlite"), ("uwf redb", "memory"), ("uwf PostgreSQL", "postgres"), ("uwf PostgreSQL", "memory"),
         ("uwf PostgreSQL, four runners", "postgres")]
for uwf, saver in pairs:
    for p in ("1 process", "2 processes"):
        lg = f"LangGraph {saver}, {p}"
        if uwf in med and lg in med:
            print(f"| {uwf.removeprefix('uwf ')} | {saver}, {p} | {med[uwf] / med[lg]:.2f}× |")
EOF
