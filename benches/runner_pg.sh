#!/bin/bash
# `uwf run --until-idle` over 1,000 threads × 20 steps (the shape of benches/runner.rs: one role,
# the in-process scripted agent), threads started beforehand (untimed), on a PostgreSQL server
# or on a redb file; prints the wall time, steps/s, the server's transactions a step and the
# CPU of the server and of each runner.
#
#   benches/runner_pg.sh BIN postgres://USER@HOST:PORT JOBS RUNNERS   # a fresh database each run
#   benches/runner_pg.sh BIN redb JOBS                                 # a fresh file
#
# With UWF_BENCH_MAX_ROUNDS=N (1 to 19) the script never says done and each thread starts with
# that round limit: every thread fails at it after N steps (a runner's failures, written in its
# commits); the server's transactions a step then count the failures' too.
set -euo pipefail
BIN=$1; WHERE=$2; J=${3:-256}; R=${4:-1}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp "$(dirname "$0")/count.yaml" "$work/count.yaml"
MAXR=${UWF_BENCH_MAX_ROUNDS:-}
case "$MAXR" in ''|[1-9]|1[0-9]) ;; *) echo "UWF_BENCH_MAX_ROUNDS: 1 to 19 (the script has 20 replies)" >&2; exit 2;; esac
{ echo "worker:"; for i in $(seq 0 19); do s=continue; [ "$i" = 19 ] && [ -z "$MAXR" ] && s=done; printf '  - $status: %s\n    note: step %s\n' $s $i; done; } > "$work/script.yaml"
line='{"prompt":"go","cwd":"/tmp"'${MAXR:+,\"maxRounds\":$MAXR}'}'
for _ in $(seq 1000); do echo "$line"; done > "$work/batch.jsonl"
export UWF_HOME="$work/home"; mkdir -p "$UWF_HOME"
# (a server process may end between the listing and the read: it is left out)
server_cpu() { local t=0 c; for p in $(pgrep -u postgres postgres || true); do c=$(awk '{print $14+$15+$16+$17}' "/proc/$p/stat" 2>/dev/null) || continue; t=$((t + ${c:-0})); done; echo $t; }
xacts() { [ "$WHERE" = redb ] && echo 0 || psql -At "$UWF_STORE" -c "select xact_commit from pg_stat_database where datname=current_database()"; }
if [ "$WHERE" != redb ]; then
  db="uwf_bench_$$"
  psql -q "$WHERE/postgres" -c "CREATE DATABASE $db"
  export UWF_STORE="$WHERE/$db"
  trap 'psql -q "$WHERE/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"; rm -rf "$work"' EXIT
fi
"$BIN" workflow put "$work/count.yaml" >/dev/null
"$BIN" thread start count --batch "$work/batch.jsonl" -q >/dev/null
x0=$(xacts); c0=$(server_cpu); s=$(date +%s.%N)
pids=()
for r in $(seq "$R"); do
  /usr/bin/time -f "runner $r: %U s user, %S s sys, %M KB" -o "$work/time-$r" \
    "$BIN" run --until-idle -j "$J" --agent "$BIN agent scripted --script $work/script.yaml" >"$work/out-$r" 2>"$work/err-$r" &
  pids+=($!)
done
# A failed thread is a line on stderr (with a round limit, every thread's): the other lines are
# shown, and a runner that failed ends the bench.
shown() { cat "$work"/err-* | grep -v ' reached its round limit of ' >&2 || true; }
for p in "${pids[@]}"; do wait "$p" || { shown; echo "a runner failed" >&2; exit 1; }; done
e=$(date +%s.%N); c1=$(server_cpu); x1=$(xacts)
steps=0; for r in $(seq "$R"); do steps=$((steps + $(python3 -c "import json,sys; print(json.loads(open('$work/out-$r').read().splitlines()[-1])['steps'])"))); done
python3 -c "t=$e-$s; n=$steps; print(f'{n} steps in {t:.2f} s: {n/t:.0f} steps/s; server: {($x1-$x0)/n:.2f} transactions and {($c1-$c0)*10/n:.3f} ms CPU a step')"
cat "$work"/time-*
shown
