"""LangGraph on the shape of benches/runner_pg.sh: many threads of a one-node loop, every step checkpointed.

A StateGraph with one node, "worker", that returns a status and a note ("step N") and loops back to
itself until STEPS steps are done, then ends. THREADS threads (distinct thread_ids) each run to
completion on one checkpointer; the time of the running alone (not the imports, the graph's compile
or the saver's setup) is printed as runner_pg.sh prints it:

    N steps in T s: R steps/s; <how it ran>

    python benches/langgraph_runner.py memory
    python benches/langgraph_runner.py sqlite [--sqlite-path FILE]      # a fresh file (a temporary one by default)
    python benches/langgraph_runner.py postgres --postgres-url URL      # a fresh database: .setup() is called on it
    options: --threads 1000 --steps 20 --processes 1 [--method sync|async] [--concurrency K]
             [--postgres-conn conn|pool|pipeline] [--durability sync|async]

With --processes P the threads are split over P processes started together (as runner_pg.sh's
RUNNERS): each builds its graph and opens its saver, they all wait at a barrier, and the time runs
from the first start to the last finish. They share the SQLite file or the PostgreSQL database; with
`memory` each has its own InMemorySaver (there is nothing to share). After the run each process reads
back every one of its threads: its final state must say STEPS steps, done, "step STEPS-1", and its
history must hold a checkpoint for each step; anything else fails the run.

Durability is LangGraph's `durability="sync"` by default: a step's checkpoint is written before the
next step starts, the guarantee uwf's runner gives (a step is committed before its thread moves on).
`--durability async` (LangGraph's default) writes it while the next step runs.

How many threads run at once in a process, and how (the fastest found for each saver). Figures are
steps/s at 50 threads × 20 steps, one process, medians of rounds run in turns on a 2-core machine
that others were using: "quiet" is 3 rounds at load 2-3, "loaded" 5 rounds at load 3-7. They
moved with the machine's fsync latency far more than with the choice, so only their order counts.

- memory: `await graph.abatch(...)` with max_concurrency 64. The work is all Python under the GIL,
  so only the cost of switching between threads differs, and asyncio's was the lower: quiet, abatch 2,295
  (×64) and 2,144 (×16) against `graph.batch`'s 1,442 (×16) and 1,349 (×64); loaded, 2,068 (abatch
  ×64) against 1,758 (batch ×16).
- sqlite: `SqliteSaver` with `graph.batch(...)`, max_concurrency 16. The saver holds one lock over
  its one connection for every call and each write commits (an fsync in WAL mode): the pool's
  threads can overlap one thread's Python with another's fsync (the GIL is let go in it). Quiet: batch
  849 (×4), 801 (×16), 737 (×64); loaded: 519 (×16), 452 (×4), 436 (×2), 245 (×1); ×16 for being
  near the top in both.
  `AsyncSqliteSaver` with abatch was slower, 480-492 quiet and 304 loaded: aiosqlite hands every
  call to its own thread and back, which likely costs more than it overlaps.
- postgres: `AsyncPostgresSaver.from_conn_string(url)` (one connection) with `await
  graph.abatch(...)`, max_concurrency 16. Both savers hold a lock over every database call, so an
  `AsyncConnectionPool` (or `ConnectionPool`) makes no call concurrent with another and only adds
  its check-out; what is left to win is overlapping one thread's Python with another's round trip and
  commit, and asyncio did it best. Quiet: async, one connection 684 (×16), 658
  (×4); async pipeline 657; async pool 585; sync `PostgresSaver`: one connection 612 (×4), 554
  (×16), pipeline 573, pool 531. Loaded: async one connection 362 (×16), 329 (×64), 304 (×4);
  async pool 286; sync one connection 272 (×4).

`--method`, `--concurrency` and `--postgres-conn` choose otherwise, to measure the alternatives.
"""

import argparse
import asyncio
import multiprocessing
import os
import queue
import sqlite3
import sys
import tempfile
import time
from contextlib import asynccontextmanager, contextmanager
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

# The fastest way found for each saver (see above): (method, concurrency, postgres connection).
DEFAULTS = {
    "memory": ("async", 64, None),
    "sqlite": ("sync", 16, None),
    "postgres": ("async", 16, "conn"),
}


class State(TypedDict):
    step: int
    status: str
    note: str


def build_graph(steps):
    def worker(state: State) -> dict:
        done = state["step"] + 1
        return {"step": done, "status": "done" if done >= steps else "continue", "note": f"step {done - 1}"}

    def route(state: State) -> str:
        return END if state["status"] == "done" else "worker"

    graph = StateGraph(State)
    graph.add_node("worker", worker)
    graph.add_edge(START, "worker")
    graph.add_conditional_edges("worker", route, ["worker", END])
    return graph


# Savers. Each is opened by a process for its own use; postgres' connections are those LangGraph's
# documentation asks for (autocommit, no prepared statements, rows as dicts).

def pg_kwargs():
    from psycopg.rows import dict_row

    return {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


@contextmanager
def open_saver(args):
    if args.saver == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
    elif args.saver == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(args.sqlite_path, check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
    elif args.postgres_conn == "pool":
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg_pool import ConnectionPool

        with ConnectionPool(args.postgres_url, min_size=1, max_size=args.concurrency, kwargs=pg_kwargs()) as pool:
            yield PostgresSaver(pool)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(args.postgres_url, pipeline=args.postgres_conn == "pipeline") as saver:
            yield saver


@asynccontextmanager
async def aopen_saver(args):
    if args.saver == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
    elif args.saver == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(args.sqlite_path) as saver:
            yield saver
    elif args.postgres_conn == "pool":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg_pool import AsyncConnectionPool

        async with AsyncConnectionPool(args.postgres_url, min_size=1, max_size=args.concurrency, kwargs=pg_kwargs()) as pool:
            yield AsyncPostgresSaver(pool)
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        pipeline = args.postgres_conn == "pipeline"
        async with AsyncPostgresSaver.from_conn_string(args.postgres_url, pipeline=pipeline) as saver:
            yield saver


def setup_store(args):
    """The saver's tables, made once before any process starts (untimed)."""
    if args.saver == "memory":
        return
    # A pipeline cannot create the indexes (CREATE INDEX CONCURRENTLY): a plain connection does.
    with open_saver(argparse.Namespace(**{**vars(args), "postgres_conn": "conn"})) as saver:
        saver.setup()


# One process's part: open the saver, compile, wait for the others, run its threads, report the
# times, wait for the others to finish, then read its threads back.

def thread_config(args, thread_id):
    return {"configurable": {"thread_id": thread_id}, "max_concurrency": args.concurrency}


def check(args, thread_id, snapshot, history_len):
    want = {"step": args.steps, "status": "done", "note": f"step {args.steps - 1}"}
    if snapshot.values != want or snapshot.next:
        return f"{thread_id}: final state {snapshot.values}, next {snapshot.next}"
    # One checkpoint for the input, one for START's step, then one for each step of the worker.
    if history_len != args.steps + 2:
        return f"{thread_id}: {history_len} checkpoints, not {args.steps + 2}"
    return None


def run_sync(args, ids, start, finish):
    with open_saver(args) as saver:
        graph = build_graph(args.steps).compile(checkpointer=saver)
        configs = [thread_config(args, t) for t in ids]
        inputs = [{"step": 0, "status": "continue", "note": ""}] * len(ids)
        start.wait()
        t0 = time.monotonic()
        graph.batch(inputs, configs, durability=args.durability)
        t1 = time.monotonic()
        finish.wait()
        failures = []
        for t, config in zip(ids, configs):
            history_len = sum(1 for _ in graph.get_state_history(config))
            failures.append(check(args, t, graph.get_state(config), history_len))
    return t0, t1, [f for f in failures if f]


async def run_async(args, ids, start, finish):
    async with aopen_saver(args) as saver:
        graph = build_graph(args.steps).compile(checkpointer=saver)
        configs = [thread_config(args, t) for t in ids]
        inputs = [{"step": 0, "status": "continue", "note": ""}] * len(ids)
        start.wait()
        t0 = time.monotonic()
        await graph.abatch(inputs, configs, durability=args.durability)
        t1 = time.monotonic()
        finish.wait()
        failures = []
        for t, config in zip(ids, configs):
            history_len = 0
            async for _ in graph.aget_state_history(config):
                history_len += 1
            failures.append(check(args, t, await graph.aget_state(config), history_len))
    return t0, t1, [f for f in failures if f]


def run_part(args, ids, start, finish, results):
    try:
        if args.method == "sync":
            results.put(run_sync(args, ids, start, finish))
        else:
            results.put(asyncio.run(run_async(args, ids, start, finish)))
    except BaseException as e:
        # The others must not wait for this one at a barrier.
        start.abort()
        finish.abort()
        results.put(f"{type(e).__name__}: {e}")
        raise


def collect(results, procs, barriers, count):
    """The processes' results; if one dies without giving its own, the others are stopped."""
    outcomes = []
    while len(outcomes) < count:
        try:
            outcomes.append(results.get(timeout=1))
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                for barrier in barriers:
                    barrier.abort()
                for p in procs:
                    p.terminate()
                errors = [o for o in outcomes if isinstance(o, str)]
                sys.exit(f"langgraph_runner: {errors[0] if errors else f'a process exited with {dead[0].exitcode}'}")
    return outcomes


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("saver", choices=["memory", "sqlite", "postgres"])
    p.add_argument("--threads", type=int, default=1000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--method", choices=["sync", "async"], help="graph.batch on threads, or graph.abatch on asyncio")
    p.add_argument("--concurrency", type=int, help="max_concurrency: threads run at once in a process")
    p.add_argument("--postgres-conn", choices=["conn", "pool", "pipeline"])
    p.add_argument("--postgres-url", default=os.environ.get("LANGGRAPH_BENCH_PG"))
    p.add_argument("--sqlite-path", help="a fresh file; by default a temporary one, removed after")
    p.add_argument("--durability", choices=["sync", "async"], default="sync")
    args = p.parse_args()
    method, concurrency, pg_conn = DEFAULTS[args.saver]
    args.method = args.method or method
    args.concurrency = args.concurrency or concurrency
    args.postgres_conn = args.postgres_conn or pg_conn
    if args.saver == "postgres" and not args.postgres_url:
        p.error("postgres needs --postgres-url (a fresh database)")
    if args.threads < args.processes or args.steps < 1:
        p.error("need at least one thread a process and one step")

    with tempfile.TemporaryDirectory(prefix="langgraph-bench-") as tmp:
        if args.saver == "sqlite" and not args.sqlite_path:
            args.sqlite_path = os.path.join(tmp, "checkpoints.sqlite")
        setup_store(args)

        ids = [f"thread-{i}" for i in range(args.threads)]
        parts = [ids[i :: args.processes] for i in range(args.processes)]
        ctx = multiprocessing.get_context("spawn")
        start, finish, results = ctx.Barrier(args.processes), ctx.Barrier(args.processes), ctx.Queue()
        if args.processes == 1:
            run_part(args, parts[0], start, finish, results)
            procs = []
        else:
            procs = [ctx.Process(target=run_part, args=(args, part, start, finish, results)) for part in parts]
            for proc in procs:
                proc.start()
        outcomes = collect(results, procs, [start, finish], len(parts))
        for proc in procs:
            proc.join()

    errors = [o for o in outcomes if isinstance(o, str)]
    if errors:
        sys.exit(f"langgraph_runner: a process failed: {errors[0]}")
    failures = [f for _, _, fs in outcomes for f in fs]
    if failures:
        sys.exit(f"langgraph_runner: {len(failures)} threads wrong, the first: {failures[0]}")
    t = max(t1 for _, t1, _ in outcomes) - min(t0 for t0, _, _ in outcomes)
    n = args.threads * args.steps
    how = f"{args.method} ×{args.concurrency}" + (f", {args.postgres_conn}" if args.saver == "postgres" else "")
    print(
        f"{n} steps in {t:.2f} s: {n / t:.0f} steps/s; LangGraph {langgraph_version()} {args.saver} "
        f"({how}, durability {args.durability}), {args.processes} process{'es' if args.processes > 1 else ''}"
    )


def langgraph_version():
    from importlib.metadata import version

    return version("langgraph")


if __name__ == "__main__":
    main()
