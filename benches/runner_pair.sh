#!/usr/bin/env bash
# Times `uwf run --until-idle -j 256` (in-process scripted agent, threads of 20 steps) for two
# uwf binaries over copies of one store, in turns, so the machine's drift hits both alike.
#
#   benches/runner_pair.sh BEFORE/uwf AFTER/uwf [THREADS] [ROUNDS]
#
# `PAIR_BEFORE_ENV` / `PAIR_AFTER_ENV` (`NAME=value …`) add variables to one side's runs: the
# same binary with traces off and on, say (`PAIR_AFTER_ENV=OTEL_EXPORTER_OTLP_ENDPOINT=…`).
#
# Each binary must be named `uwf` (the runner runs `uwf agent …` agents in process only then).
# The store is made once, by the first binary (both must read its format).
set -euo pipefail
before=$1 after=$2 n=${3:-1000} rounds=${4:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$(dirname "$0")/count.yaml" "$work/count.yaml"
{
  echo "worker:"
  for i in $(seq 1 20); do
    s=continue; [ "$i" = 20 ] && s=done
    printf '  - $status: %s\n    note: step %s\n' "$s" "$i"
  done
} > "$work/count.script.yaml"
UWF_HOME="$work/base" "$before" workflow put "$work/count.yaml" -q >/dev/null
for i in $(seq 1 "$n"); do
  UWF_HOME="$work/base" "$before" thread start count -p "task $i" -q >/dev/null
done
for r in $(seq 1 "$rounds"); do
  for which in before after; do
    bin=${!which}
    if [ "$which" = before ]; then extra=${PAIR_BEFORE_ENV:-}; else extra=${PAIR_AFTER_ENV:-}; fi
    rm -rf "$work/run"; cp -a "$work/base" "$work/run"
    s=$(date +%s%N)
    # shellcheck disable=SC2086 # NAME=value words, split on purpose.
    env $extra UWF_HOME="$work/run" "$bin" run --until-idle -j 256 \
      --agent "$bin agent scripted --script $work/count.script.yaml" >/dev/null 2>&1
    e=$(date +%s%N)
    ms=$(( (e - s) / 1000000 ))
    echo "round $r $which: ${ms} ms, $(( n * 20 * 1000 / ms )) steps/s"
  done
done
