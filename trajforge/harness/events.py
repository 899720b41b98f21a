"""Structured collection log: one JSON line per model request, tool call and episode boundary.

A collection writing store shard ``shard-3`` logs to ``STORE/logs/shard-3.jsonl`` (a folder of its
own, so store readers that glob ``STORE/*.jsonl`` never mistake it for trajectories). Every line
has ``t`` (unix time), ``run`` (one id per collection run) and ``ev``:

    run_start     executor, concurrency, todo
    episode_start key
    request_start key, turn, attempt
    request       key, turn, attempt, latency_s, status ("ok" or a fault kind), retry (bool)
    tool_start    key, turn, name
    tool          key, turn, name, latency_s, status ("ok", "error", "fault", "timeout")
    episode_end   key, end, wall_s, faults
    run_end       done

Lines are flushed as written (not fsynced: the log is for visibility, the store is the record),
so after a crash the log still says what was in flight: ``interrupted_runs`` lists, for each run
that never wrote ``run_end``, the episodes, model requests and tool calls it started and never
ended.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterator, NamedTuple


class EventLog:
    """Append-only JSONL event writer (``EventLog(None)`` writes nothing)."""

    def __init__(self, path: str | Path | None, run: str | None = None):
        self.run = run or f"{int(time.time())}-{os.getpid()}"
        self._f = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._f = open(path, "a", encoding="utf-8")

    def write(self, ev: str, **fields: Any) -> None:
        if self._f is None:
            return
        line = json.dumps({"t": round(time.time(), 4), "run": self.run, "ev": ev, **fields})
        self._f.write(line + "\n")
        self._f.flush()

    def close(self) -> None:
        if self._f is not None and not self._f.closed:
            self._f.close()


def log_path(store_dir: str | Path, shard: str) -> Path:
    return Path(store_dir) / "logs" / f"{shard}.jsonl"


def read_events(store_dir: str | Path) -> Iterator[dict[str, Any]]:
    """Every readable event of every log in a store (a torn last line is skipped)."""
    for path in sorted((Path(store_dir) / "logs").glob("*.jsonl")):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue


class Interrupted(NamedTuple):
    """A run that stopped without finishing, and what it had in flight."""

    run: str
    started: float
    """Unix time of its first event."""
    episodes: list[str]
    """Keys of episodes started and never ended."""
    requests: int
    """Model requests started and never answered."""
    tool_calls: int
    """Tool calls started and never returned."""


def interrupted_runs(store_dir: str | Path) -> list[Interrupted]:
    """Runs in a store's logs that have no ``run_end``, oldest first."""
    runs: dict[str, dict[str, Any]] = {}
    for e in read_events(store_dir):
        r = runs.setdefault(e.get("run", "?"), {"started": e.get("t", 0.0), "episodes": set(),
                                                "request": set(), "tool": set(), "ended": False})
        ev, key = e.get("ev"), e.get("key")
        if ev == "run_end":
            r["ended"] = True
        elif ev == "episode_start":
            r["episodes"].add(key)
        elif ev == "episode_end":
            r["episodes"].discard(key)
        elif ev in ("request_start", "tool_start"):
            r[ev[:-6]].add(key)
        elif ev in ("request", "tool"):
            r[ev].discard(key)  # an episode runs one request or tool call at a time
    return sorted((Interrupted(run, r["started"], sorted(r["episodes"]),
                               len(r["request"] & r["episodes"]), len(r["tool"] & r["episodes"]))
                   for run, r in runs.items() if not r["ended"]), key=lambda i: i.started)
