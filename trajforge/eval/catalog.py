"""Filter, page and open the episodes of one store: what the viewer's JSON API answers from.

    cat = Catalog("runs/demo/eval_store")
    cat.page({"policy": "tuned", "fail_reason": "wrong_answer"}, page=1, per_page=50)
    cat.episode("sql-product_price-6dec6ae2", "tuned", 0)

The flat columns come from ``store/query.py``'s ``episodes`` view, copied once into an in-memory
DuckDB table, so a filter is a query over a few thousand small rows (milliseconds), not a re-read
of the JSONL. A whole trajectory is read back by seeking to its line, from a byte-offset index
built in the same pass. Both are rebuilt when a shard's size or mtime changes (a collection still
appending, ``trajforge grade`` rewriting), looked for at most every ``recheck_s`` seconds: by
default 1 s, or three times the last rebuild if longer, so a large store that is still growing
costs the viewer at most about a quarter of its time in rebuilds. An episode whose line no longer
holds it (the store was rewritten in between) makes the catalog look at once.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
from pydantic import ValidationError

from trajforge.schema import Trajectory
from trajforge.store import TrajectoryStore
from trajforge.store.query import connect, unreadable

FILTERS = ("outcome_tier", "fail_reason", "env", "tier", "policy", "split")
"""Columns filtered by exact value; ``task_id`` is matched as a substring."""
ROW_COLUMNS = ("task_id", "policy", "sample", "env", "tier", "split", "outcome_tier", "fail_reason",
               "turns", "n_errors", "n_repairs", "reward_total", "wall_s")
MAX_PER_PAGE = 500
MAX_EPISODE_BYTES = 16 * 1024 * 1024
"""Largest record ``episode`` reads back (a page cannot show more; ``trajforge query`` can)."""

Key = tuple[str, str, int]

# Lines written by TrajectoryStore start with these three fields, in this order (the model's field
# order); reading them from the line's head skips parsing the whole episode, which was most of the
# start-up time at 10,000 episodes. Any other line is parsed in full.
_HEAD = re.compile(rb'\{"task_id":\s*("(?:[^"\\]|\\.)*"),\s*"sample":\s*(\d+),\s*"policy":\s*("(?:[^"\\]|\\.)*")')


def _key(line: bytes) -> Key:
    m = _HEAD.match(line)
    if m:
        return json.loads(m.group(1)), json.loads(m.group(3)), int(m.group(2))
    d = json.loads(line)
    return d["task_id"], d["policy"], int(d.get("sample", 0))


def _holds(line: bytes, key: Key) -> bool:
    """Whether ``line`` is the record of ``key`` (not a torn piece or another episode's line)."""
    try:
        return _key(line) == key
    except (ValueError, KeyError, TypeError, RecursionError):
        return False


class UnreadableEpisode(ValueError):
    """An episode the index knows whose record cannot be shown."""


class Snapshot:
    """The filterable table and the line index of one version of the store."""

    def __init__(self, root: Path):
        shards = TrajectoryStore(root).shards()
        if not shards:
            raise ValueError(f"no *.jsonl shards in {root}")
        started = time.perf_counter()
        self.signature = _signature(shards)
        self.con = connect(root)
        self.con.execute("CREATE TABLE ep AS SELECT * FROM episodes")
        # Reading the JSONL is worth all cores; the per-request queries over a few thousand rows
        # are not: there thread hand-offs cost more than the scan (several ms on 2 busy cores).
        self.con.execute("SET threads = 1")
        self.offsets: dict[Key, tuple[Path, int]] = {}
        for shard in shards:
            self._index(shard)
        self.facets = {col: self._counts(col) for col in FILTERS}
        self.unreadable = unreadable(self.con)
        """Lines the table skipped, per shard (torn, invalid UTF-8, ...)."""
        self.total = self.con.execute("SELECT count(*) FROM ep").fetchone()[0]
        self.build_s = time.perf_counter() - started

    def _index(self, shard: Path) -> None:
        with open(shard, "rb") as f:
            offset = 0
            for line in f:
                if line.strip():
                    try:
                        self.offsets[_key(line)] = (shard, offset)
                    except (ValueError, KeyError, TypeError, RecursionError):
                        pass  # a torn (or too deeply nested) line: the episodes view skips it too
                offset += len(line)

    def _counts(self, col: str) -> list[tuple[str, int]]:
        rows = self.con.execute(f'SELECT "{col}", count(*) FROM ep WHERE "{col}" IS NOT NULL '
                                f'GROUP BY 1 ORDER BY 1').fetchall()
        return [(v, n) for v, n in rows]


def _signature(shards: list[Path]) -> tuple[tuple[str, int, int], ...]:
    out = []
    for p in shards:
        st = p.stat()
        out.append((str(p), st.st_size, st.st_mtime_ns))
    return tuple(out)


def _where(filters: dict[str, str]) -> tuple[str, list[Any]]:
    clauses, params = [], []
    for col, value in filters.items():
        if value in ("", None):
            continue
        if col == "task_id":
            clauses.append("contains(task_id, ?)")
        elif col in FILTERS:
            clauses.append(f'"{col}" = ?')
        else:
            raise ValueError(f"unknown filter {col!r}; filters are task_id, {', '.join(FILTERS)}")
        params.append(value)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


class Catalog:
    """Thread-safe episode catalog of one store (a directory of shards or one ``.jsonl`` file)."""

    def __init__(self, root: str | Path, recheck_s: float | None = None):
        self.root = Path(root)
        self.recheck_s = recheck_s
        self._lock = threading.Lock()
        self._snap = Snapshot(self.root)
        self._checked = time.monotonic()

    def snapshot(self, recheck: bool = False) -> Snapshot:
        """The current snapshot, rebuilt first when the shards changed since it was taken (looked
        for at most every ``recheck_s`` seconds, or now with ``recheck``)."""
        with self._lock:
            now = time.monotonic()
            every = self.recheck_s if self.recheck_s is not None else max(1.0, 3 * self._snap.build_s)
            if recheck or now - self._checked >= every:
                self._checked = now
                shards = TrajectoryStore(self.root).shards()
                if shards and _signature(shards) != self._snap.signature:
                    self._snap = Snapshot(self.root)
            return self._snap

    def close(self) -> None:
        """Release the DuckDB connection (the catalog is unusable afterwards)."""
        with self._lock:
            self._snap.con.close()

    def _rows(self, snap: Snapshot, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        cur = snap.con.cursor()  # one cursor per call: DuckDB connections are not shared across threads
        try:
            res = cur.execute(sql, params)
            names = [d[0] for d in res.description]
            return [dict(zip(names, row)) for row in res.fetchall()]
        except duckdb.Error as e:
            raise ValueError(f"query failed: {e}") from e
        finally:
            cur.close()

    def facets(self) -> dict[str, Any]:
        snap = self.snapshot()
        return {"store": str(self.root), "total": snap.total, "unreadable": snap.unreadable,
                "columns": {col: [{"value": v, "n": n} for v, n in counts] for col, counts in snap.facets.items()}}

    def page(self, filters: dict[str, str], page: int = 1, per_page: int = 50) -> dict[str, Any]:
        """One page of the episodes matching ``filters`` (ordered by task, policy, sample)."""
        if page < 1:
            raise ValueError(f"page must be >= 1, got {page}")
        if not 1 <= per_page <= MAX_PER_PAGE:
            raise ValueError(f"per_page must be between 1 and {MAX_PER_PAGE}, got {per_page}")
        where, params = _where(filters)
        snap = self.snapshot()
        [count] = self._rows(snap, f"SELECT count(*) AS n FROM ep{where}", params)
        cols = ", ".join(f'"{c}"' for c in ROW_COLUMNS)
        rows = self._rows(snap, f"SELECT {cols} FROM ep{where} ORDER BY task_id, policy, sample LIMIT ? OFFSET ?",
                          params + [per_page, (page - 1) * per_page])
        return {"total": count["n"], "page": page, "per_page": per_page, "rows": rows}

    def episode(self, task_id: str, policy: str, sample: int = 0) -> Trajectory | None:
        """The whole trajectory, read from its line; None when the store has no such episode.

        Raises ``UnreadableEpisode`` for a line over ``MAX_EPISODE_BYTES`` or one that is not a
        valid trajectory (too deeply nested, a wrong field)."""
        key = (task_id, policy, sample)
        line = self._line(self.snapshot(), key)
        if line is not None and not _holds(line, key):
            # The store was rewritten (``trajforge grade``) since the snapshot: its offsets point into
            # other records now. Look again at once rather than show another episode or a torn piece.
            line = self._line(self.snapshot(recheck=True), key)
        if line is None:
            return None
        if len(line) > MAX_EPISODE_BYTES:
            raise UnreadableEpisode(f"the episode's record is over {MAX_EPISODE_BYTES // 2**20} MiB, too "
                                    f"large to show; read it with trajforge query or export")
        try:
            return Trajectory.model_validate_json(line)
        except ValidationError as e:
            first = e.errors(include_url=False)[0]
            field = ".".join(map(str, first["loc"]))
            what = f"{field}: {first['msg']}" if field else first["msg"]
            raise UnreadableEpisode(f"the episode's record cannot be read ({what})") from None

    def _line(self, snap: Snapshot, key: Key) -> bytes | None:
        """The line at ``key``'s offset in ``snap`` (empty when its shard is gone); None when unknown."""
        loc = snap.offsets.get(key)
        if loc is None:
            return None
        path, offset = loc
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                return f.readline(MAX_EPISODE_BYTES + 1)
        except FileNotFoundError:  # a rewrite folded this shard into the first
            return b""

    def siblings(self, task_id: str) -> list[dict[str, Any]]:
        """Every episode of one task (all policies and samples): the candidates to put side by side."""
        return self._rows(self.snapshot(), "SELECT policy, sample, outcome_tier, fail_reason FROM ep "
                          "WHERE task_id = ? ORDER BY policy, sample", [task_id])
