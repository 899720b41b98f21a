"""Structured collection log: one JSON line per model request, tool call and episode boundary.

A collection writing store shard ``shard-3`` logs to ``STORE/logs/shard-3.jsonl`` (a folder of its
own, so store readers that glob ``STORE/*.jsonl`` never mistake it for trajectories). Every line
has ``t`` (unix time), ``run`` (one id per collection run) and ``ev``:

    run_start     executor, concurrency, todo
    episode_start key
    request_start key, turn, attempt
    request       key, turn, attempt, latency_s, status ("ok", a fault kind, or
                  "context_exceeded": the model's failure), retry (bool)
    tool_start    key, turn, name
    tool          key, turn, name, latency_s, status ("ok", "error", "fault", "timeout")
    episode_end   key, end, wall_s, faults
    run_end       done

Lines reach the file within ~50 ms (not fsynced: the log is for visibility, the store is the
record), so after a crash the log still says what was in flight: ``interrupted_runs`` lists, for each run
that never wrote ``run_end``, the episodes, model requests and tool calls it started and never
ended.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, BinaryIO, Iterator, NamedTuple


class LineSink:
    """Appends lines to an open binary file from a background thread, in batches.

    The caller only queues bytes (a deque append: no lock, no thread wake-up), so the event loop
    never waits on the disk; the thread writes what queued up every ``interval_s``, flushes, and
    with ``fsync`` makes it durable (group commit: one fsync per batch, not per line). Lines still
    queued when the process is killed are lost, which a resumed collection absorbs by rerunning
    those episodes. A write error is raised by the next ``put`` and by ``close``.
    """

    def __init__(self, f: BinaryIO, fsync: bool, interval_s: float):
        self.f, self.fsync, self.interval_s = f, fsync, interval_s
        self._queue: deque[bytes] = deque()
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="trajforge-sink")
        self._thread.start()

    def put(self, data: bytes) -> None:
        if self.error is not None:
            raise self.error
        self._queue.append(data)

    def _drain(self) -> None:
        batch = []
        while self._queue:
            batch.append(self._queue.popleft())
        if batch:
            self.f.write(b"".join(batch))
            self.f.flush()
            if self.fsync:
                os.fsync(self.f.fileno())

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._drain()
            except OSError as e:  # disk full, I/O error: surfaced to the writer
                self.error = e
                return

    def close(self) -> None:
        """Write everything queued, stop the thread; raise a write error if one happened."""
        self._stop.set()
        self._thread.join()
        if self.error is None:
            self._drain()
        if self.error is not None:
            raise self.error


class EventLog:
    """Append-only JSONL event writer (``EventLog(None)`` writes nothing); lines reach the file
    within ~50 ms through a ``LineSink``, so logging costs the event loop about a microsecond."""

    def __init__(self, path: str | Path | None, run: str | None = None):
        self.run = run or f"{int(time.time())}-{os.getpid()}"
        self._sink: LineSink | None = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._sink = LineSink(open(path, "ab"), fsync=False, interval_s=0.05)

    def write(self, ev: str, **fields: Any) -> None:
        if self._sink is None:
            return
        line = json.dumps({"t": round(time.time(), 4), "run": self.run, "ev": ev, **fields})
        self._sink.put(line.encode() + b"\n")

    def close(self) -> None:
        if self._sink is not None:
            sink, self._sink = self._sink, None
            try:
                sink.close()
            finally:
                sink.f.close()


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
    """Runs in a store's logs that have no ``run_end`` and started after the last run that has
    one (older ones were already resumed), oldest first."""
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
    finished = max((r["started"] for r in runs.values() if r["ended"]), default=float("-inf"))
    return sorted((Interrupted(run, r["started"], sorted(r["episodes"]),
                               len(r["request"] & r["episodes"]), len(r["tool"] & r["episodes"]))
                   for run, r in runs.items() if not r["ended"] and r["started"] > finished),
                  key=lambda i: i.started)
