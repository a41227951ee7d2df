#!/bin/bash
# A Python virtual environment with LangGraph and its SQLite and PostgreSQL checkpointers, pinned,
# for benches/langgraph_runner.py; made once in a cache folder and reused while its pins match.
# Prints the path of the environment's python.
#
#   benches/langgraph_env.sh            # ${UWF_BENCH_CACHE:-$HOME/.cache/uwf-bench}/langgraph-venv
#   LANGGRAPH_VENV=DIR benches/langgraph_env.sh
set -euo pipefail
venv=${LANGGRAPH_VENV:-${UWF_BENCH_CACHE:-$HOME/.cache/uwf-bench}/langgraph-venv}
pins=(
  langgraph==1.2.24
  langgraph-checkpoint-sqlite==3.1.2
  langgraph-checkpoint-postgres==3.2.0
  "psycopg[binary]==3.3.9"
  psycopg-pool==3.3.3
)
stamp="$venv/.uwf-bench-pins"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${pins[*]}" ]; then
  mkdir -p "$(dirname "$venv")"
  python3 -m venv --clear "$venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}" >&2
  echo "${pins[*]}" > "$stamp"
fi
echo "$venv/bin/python"
