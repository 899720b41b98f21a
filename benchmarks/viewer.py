"""Time the viewer's JSON API on a 10,000-episode store (target: every filter under 200 ms).

    .venv/bin/python benchmarks/viewer.py [--episodes 10000] [--reps 30]

Writes a realistic store (synthetic_runs.py), starts the real viewer server on 127.0.0.1, and
times HTTP requests over one keep-alive connection, as the page makes them: several filters
(including a substring search and a deep page), the facets, and opening an episode. Prints the
median and p95 per request against the target, and the startup (snapshot) time, which is also
what the first request after the store changes pays. The server runs in this process, so the
median CPU time per request (client and server together) is printed too: on a machine shared
with other jobs it is what the latency would be on an idle one.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

from synthetic_runs import write_store

TARGET_MS = 200.0
REQUESTS = [
    ("all, page 1", "/api/episodes", {}),
    ("policy=tuned", "/api/episodes", {"policy": "tuned"}),
    ("failed + hard", "/api/episodes", {"outcome_tier": "failed", "tier": "hard"}),
    ("unknown_tool + travel", "/api/episodes", {"fail_reason": "unknown_tool", "env": "travel"}),
    ("task id substring", "/api/episodes", {"task_id": "price"}),
    ("base, page 60", "/api/episodes", {"policy": "base", "page": 60}),
    ("recovered, 200/page", "/api/episodes", {"outcome_tier": "recovered", "per_page": 200}),
    ("facets", "/api/facets", {}),
]


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, round(0.95 * len(xs)) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()

    from trajforge.eval.catalog import Catalog
    from trajforge.eval.viewer import ViewerServer

    tmp = tempfile.TemporaryDirectory(prefix="trajforge-bench-viewer-")
    root = Path(tmp.name) / "store"
    shard = write_store(root, args.episodes)
    t0 = time.perf_counter()
    catalog = Catalog(root)
    startup = time.perf_counter() - t0
    server = ViewerServer(catalog, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=60)

    def get(path: str, params: dict) -> tuple[float, float, dict]:
        t0, c0 = time.perf_counter(), time.process_time()
        conn.request("GET", path + ("?" + urlencode(params) if params else ""))
        resp = conn.getresponse()
        body = json.loads(resp.read())
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert resp.status == 200, body
        return elapsed, cpu, body

    first = get("/api/episodes", {})[2]["rows"][0]
    requests = REQUESTS + [("open an episode", "/api/episode",
                            {"task_id": first["task_id"], "policy": first["policy"], "sample": first["sample"]})]
    print(f"{args.episodes} episodes ({shard.stat().st_size / 1e6:.1f} MB JSONL); viewer startup "
          f"(DuckDB table + line index) {startup:.2f} s")
    print(f"{'request':<24}{'matches':>9}{'median ms':>11}{'p95 ms':>9}{'p95 / target':>14}{'CPU ms':>9}")
    worst = 0.0
    for name, path, params in requests:
        get(path, params)  # warm
        times, cpus, body = [], [], {}
        for _ in range(args.reps):
            elapsed, cpu, body = get(path, params)
            times.append(elapsed * 1000)
            cpus.append(cpu * 1000)
        worst = max(worst, p95(times))
        matches = body.get("total", "")
        print(f"{name:<24}{matches!s:>9}{statistics.median(times):>11.1f}{p95(times):>9.1f}"
              f"{p95(times) / TARGET_MS:>13.2f}×{statistics.median(cpus):>9.1f}")
    print(f"worst p95 {worst:.1f} ms against the {TARGET_MS:.0f} ms target ({worst / TARGET_MS:.2f}×)")
    conn.close()
    server.shutdown()
    server.server_close()
    tmp.cleanup()


if __name__ == "__main__":
    main()
