"""Collection throughput vs concurrency, and the harness's own cost per step.

    .venv/bin/python benchmarks/collect.py [--latency 0.2] [--levels 1,8,32,128] [--waves 8]

Starts the scripted OpenAI-compatible server of the tests (``tests/openai_server.py``) in a
subprocess — its own interpreter, so it does not share the GIL with the harness — with
``--latency`` seconds per request, and collects SQL episodes through ``trajforge.eval.run.collect``
(the real path: async harness, real SQLite environment, grading, store shard, event log) at each
concurrency level, into a fresh store each time. Every episode is a task whose reference takes
exactly two calls (two turns), so each level does the same work per episode; a level runs
``max(8, waves * concurrency)`` episodes. Prints episodes/s per level and the speed-up over
concurrency 1.

Harness overhead per step is measured on a second server with zero latency, at concurrency 1 so
that times add up: (run wall time - model request time - tool time) / steps, where request time
is the harness's own clock around each HTTP request (``Step.gen_s``) and tool time the clock
around each tool call (``Step.tool_s``). What is left is everything else the harness does per
step: environment start and verdict, parsing, validation, message building, grading, the store
append and the log. CPU seconds of this process per step are printed too (a contended machine
inflates wall times, much less CPU times).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def start_server(tasks_path: Path, latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.openai_server", "--tasks", str(tasks_path),
                             "--latency", str(latency)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def run_level(tasks, url: str, concurrency: int, episodes: int) -> dict:
    from trajforge.eval.run import collect
    from trajforge.harness import CollectConfig
    from trajforge.policies import make_policy

    samples = -(-episodes // len(tasks))
    pool = tasks[: -(-episodes // samples)]
    with tempfile.TemporaryDirectory(prefix="trajforge-bench-") as store:
        policy = make_policy(f"openai:{url}#bench")
        t0, c0 = time.perf_counter(), time.process_time()
        trajs = collect(pool, policy, store, samples=samples, show_progress=False,
                        scale=CollectConfig(concurrency=concurrency))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    steps = sum(len(t.steps) for t in trajs)
    ok = sum(t.outcome.tier == "success" for t in trajs)
    gen = sum(s.gen_s for t in trajs for s in t.steps)
    tool = sum(s.tool_s for t in trajs for s in t.steps)
    return {"episodes": len(trajs), "ok": ok, "steps": steps, "wall": wall, "cpu": cpu, "gen": gen,
            "tool": tool}


def http_client_cpu(url: str, prompt: str, requests: int = 300) -> float:
    """CPU seconds per bare ``httpx.AsyncClient`` POST to the zero-latency server (no harness), for
    scale: the HTTP client is most of the per-step CPU."""
    import asyncio

    import httpx

    body = {"model": "bench", "messages": [{"role": "system", "content": "x" * 2000},
                                           {"role": "user", "content": prompt}]}

    async def go() -> float:
        async with httpx.AsyncClient() as client:
            await client.post(f"{url}/chat/completions", json=body)  # connect outside the clock
            c0 = time.process_time()
            for _ in range(requests):
                await client.post(f"{url}/chat/completions", json=body)
            return (time.process_time() - c0) / requests

    return asyncio.run(go())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--levels", default="1,8,32,128")
    ap.add_argument("--waves", type=int, default=8, help="episodes per level = waves * concurrency")
    ap.add_argument("--overhead-episodes", type=int, default=100)
    args = ap.parse_args()
    from trajforge.tasks import synthesize
    from trajforge.tasks.pool import write_tasks

    tasks = [t for t in synthesize("sql", 400, seed=11).tasks if len(t.reference) == 2]
    with tempfile.TemporaryDirectory() as tmp:
        tasks_path = Path(tmp) / "tasks.jsonl"
        write_tasks(tasks_path, tasks)
        slow, slow_url = start_server(tasks_path, args.latency)
        fast, fast_url = start_server(tasks_path, 0.0)
        try:
            run_level(tasks, slow_url, 4, 8)  # warm-up: imports, database files, connections
            levels = [int(x) for x in args.levels.split(",")]
            rows = [(c, run_level(tasks, slow_url, c, max(8, args.waves * c))) for c in levels]
            over = run_level(tasks, fast_url, 1, args.overhead_episodes)
            bare = http_client_cpu(fast_url, tasks[0].prompt)
        finally:
            slow.kill()
            fast.kill()

    base = rows[0][1]["episodes"] / rows[0][1]["wall"]
    print(f"\nCollection throughput, scripted server with {args.latency * 1000:.0f} ms per request, "
          f"2 turns per episode ({len(tasks)} SQL tasks)")
    print(f"{'concurrency':>11} {'episodes':>8} {'success':>7} {'wall s':>7} {'episodes/s':>10} "
          f"{'vs c=1':>7} {'ideal':>6} {'cpu s':>6} {'cpu/wall':>8}")
    for c, r in rows:
        eps = r["episodes"] / r["wall"]
        print(f"{c:>11} {r['episodes']:>8} {r['ok']:>7} {r['wall']:>7.2f} {eps:>10.2f} {eps / base:>6.1f}x "
              f"{c:>5}x {r['cpu']:>6.2f} {r['cpu'] / r['wall']:>8.2f}")
    print("(cpu s: CPU time of this process, all threads; on an idle core cpu/wall could reach ~1)")
    steps = over["steps"]
    rest = over["wall"] - over["gen"] - over["tool"]
    print(f"\nHarness overhead per step (zero-latency server, concurrency 1, {over['episodes']} episodes, "
          f"{steps} steps):")
    print(f"  wall per step          {over['wall'] / steps * 1e6:>9.0f} us")
    print(f"  model request (client) {over['gen'] / steps * 1e6:>9.0f} us   (HTTP round trip incl. server)")
    print(f"  tool calls             {over['tool'] / steps * 1e6:>9.0f} us   (SQLite, on the episode's thread)")
    print(f"  harness overhead       {rest / steps * 1e6:>9.0f} us   (wall - request - tool)")
    print(f"  process CPU per step   {over['cpu'] / steps * 1e6:>9.0f} us   (all threads of this process)")
    print(f"  of which HTTP client  ~{bare * 1e6:>9.0f} us   (CPU of one bare httpx POST, measured alone)")
    print(f"\nload average during the run: {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
