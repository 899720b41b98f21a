"""Model-written SQL, run in a worker process whose time and memory are bounded per query.

    db = GuardedDb(path)                                   # read-only; db.schema describes it
    text, cells = db.query("SELECT ...", timeout_s=2.0, max_rows=50, max_chars=4000)
    result = db.rows("SELECT ...", timeout_s=2.0, max_rows=10_000)  # typed values, for comparing
    db.close()                                             # the worker goes back to a pool

Why a process, and not limits inside the harness:

* **Time.** SQLite's progress handler interrupts a statement between VM instructions, but one
  instruction can run for a long time: ``printf('%.*c', 2000000000, 'x')`` takes ~30 s inside a
  single function call, as can ``replace``/``instr`` on megabyte strings. The host waits for the
  answer until the deadline plus ``GRACE_S``, then SIGKILLs the worker: the deadline holds for any
  statement (the next query gets a fresh worker with the database reopened).
* **Memory.** SQLite's heap limit (``sqlite3_hard_heap_limit64``) is process-wide: in the harness
  it would be shared by every episode running concurrently, so one hostile query would make
  another episode's honest query fail (and that failure would be graded as its model's error);
  and it would not bound the Python objects a result becomes — ``SELECT x, x, ..., x`` over a 1 MB
  blob, 2,000 columns wide, is 2 GB of ``bytes`` in the caller while every single value respects
  ``SQLITE_LIMIT_LENGTH``. The worker runs under its own RLIMIT_AS (``MEMORY_MB``), which bounds
  both, per query, for this query only; a worker that hits it is replaced.
* **Isolation.** A crash inside SQLite takes down the worker, not the collection.

Workers are pooled (``POOL_MAX`` idle ones), so an episode costs no process start; each starts in
a few tens of milliseconds (``sqlworker.py`` is stdlib-only). Every statement — the model's, and
the environment's own follow-ups such as the runner-up check of a top-1 plan — carries a
deadline; nothing runs on a connection without one.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import sqlite3
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any, NamedTuple

from trajforge.envs.base import InfraError

MEMORY_MB = 256
"""Address space of a worker (RLIMIT_AS): what one query may use, SQLite and Python together."""
GRACE_S = 0.5
"""How long past the deadline the host waits for the worker before killing it."""
OPEN_S = 60.0
"""Time to start a worker and open a database (counting a large user database's rows)."""
POOL_MAX = 8
"""Idle workers kept for the next episode."""
MAX_SQL_CHARS = 20_000
"""Longer SQL text is refused before it is sent (SQLite's own limit is 20,000 bytes)."""
_MAX_REPLY_BYTES = 16 * 1024 * 1024
ROWS_MAX_BYTES = 8 * 1024 * 1024
"""Most value bytes a ``rows`` reply carries (well under what the host reads from a worker)."""
_WORKER = str(Path(__file__).with_name("sqlworker.py"))


class ResultSet(NamedTuple):
    """A query's whole result as values (``GuardedDb.rows``): ints, floats, text, None, bytes."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    complete: bool
    """False when the result was cut at the row or byte cap (``rows`` is then only its start)."""


class QueryFailed(sqlite3.OperationalError):
    """A statement failed: SQLite's message, or ``interrupted`` (time), ``out of memory``."""


class WorkerLost(InfraError, RuntimeError):
    """The worker could not be started or stopped answering outside any query (infrastructure:
    an ``InfraError``, so a tool that meets it ends as ``env_fault``, never as the model's error)."""

    kind = "sql_worker"


class _Worker:
    """One worker process and the line protocol to it."""

    def __init__(self, memory_mb: int):
        self.memory_mb = memory_mb
        self.received = False
        self.proc = subprocess.Popen(
            [sys.executable or "python3", "-I", "-S", _WORKER, str(memory_mb)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            close_fds=True, start_new_session=True)  # a Ctrl-C meant for the harness is not ours

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask(self, request: dict[str, Any], wait_s: float) -> dict[str, Any] | None:
        """Send one request and read its reply; None (after killing the worker) when it died,
        said something unreadable or did not answer within ``wait_s``. ``self.received`` says
        whether the worker had read the request (its ``+``) before that."""
        assert self.proc.stdin and self.proc.stdout
        self.received = False
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:  # it died since
            self.kill()
            return None
        fd = self.proc.stdout.fileno()
        # poll, not select: select cannot wait on descriptors past 1024, which a process running
        # many episodes at once (each with its worker's pipes) soon has.
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        buf = bytearray()
        deadline = time.monotonic() + wait_s
        while not buf.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or len(buf) > _MAX_REPLY_BYTES:
                self.kill()
                return None
            if poller.poll(remaining * 1000):
                data = os.read(fd, 1 << 20)
                if not data:
                    self.kill()
                    return None
                buf += data
                self.received = self.received or buf.startswith(b"+")
        try:
            reply = json.loads(buf[1:] if buf.startswith(b"+") else buf)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self.kill()
            return None
        if reply.get("fatal"):
            self.kill()  # it exits by itself; reap it
        return reply

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


class GuardedDb:
    """A read-only SQLite database whose queries run in a worker process (see module docstring).

    Raises the ``sqlite3`` exception a statement raised in the worker, ``QueryFailed`` (an
    ``OperationalError``) when the guard stopped it (time, memory, length), and ``WorkerLost`` only
    when no worker can be started or one dies outside a query.
    """

    def __init__(self, path: str | Path, memory_mb: int = MEMORY_MB):
        self.path = str(path)
        self.memory_mb = memory_mb
        self._slot: list[_Worker | None] = [None]
        # A GuardedDb dropped without close() must not leave its worker running.
        self._finalizer = weakref.finalize(self, _discard, self._slot)
        self.schema: dict[str, str] = self._connect()

    def query(self, sql: str, timeout_s: float, max_rows: int, max_chars: int, offset: int = 0
              ) -> tuple[str, list[list[str]]]:
        """Run one statement within ``timeout_s``; the rendered text and the cells shown (from
        row ``offset`` on: a later page of a long result)."""
        reply = self._statement({"op": "query", "sql": sql, "max_rows": max_rows,
                                 "max_chars": max_chars, "offset": offset}, timeout_s)
        return str(reply["text"]), [[str(c) for c in row] for row in reply["cells"]]

    def rows(self, sql: str, timeout_s: float, max_rows: int, max_bytes: int = ROWS_MAX_BYTES
             ) -> ResultSet:
        """Run one statement within ``timeout_s``; its values, up to ``max_rows`` rows and
        ``max_bytes`` of values (``complete`` says whether that was all of it)."""
        reply = self._statement({"op": "rows", "sql": sql, "max_rows": max_rows,
                                 "max_bytes": min(max_bytes, ROWS_MAX_BYTES)}, timeout_s)
        rows = [tuple(bytes.fromhex(c["blob"]) if isinstance(c, dict) else c for c in row)
                for row in reply["rows"]]
        return ResultSet([str(c) for c in reply["columns"]], rows, bool(reply["complete"]))

    def _statement(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one statement request under a deadline ``timeout_s`` from now; the worker's
        successful reply, or the exception the statement (or the guard) raised."""
        if len(request["sql"]) > MAX_SQL_CHARS:
            raise QueryFailed("query string is too large")
        for _ in range(2):  # a second time only when the worker was gone before the statement
            worker = self._slot[0]
            if worker is None or not worker.alive():
                self._reconnect()
                worker = self._slot[0]
            assert worker is not None
            deadline = time.monotonic() + timeout_s
            reply = worker.ask({**request, "deadline": deadline}, timeout_s + GRACE_S)
            if reply is not None or worker.received:
                break
            self._slot[0] = None
        if reply is None or reply.get("fatal"):
            self._slot[0] = None  # the next query starts a fresh worker
            if reply is None and time.monotonic() >= deadline:
                raise QueryFailed("interrupted")  # killed at the deadline
            raise QueryFailed(f"out of memory (the query needed more than {self.memory_mb} MB)")
        if not reply.get("ok"):
            raise _error(reply)
        return reply

    @property
    def worker_pid(self) -> int | None:
        """The pid of the worker process running this database's queries, if one is running."""
        worker = self._slot[0]
        return worker.proc.pid if worker is not None and worker.alive() else None

    def close(self) -> None:
        """Close the database and hand the worker back to the pool."""
        worker, self._slot[0] = self._slot[0], None
        self._finalizer.detach()
        if worker is not None and worker.alive():
            reply = worker.ask({"op": "close"}, OPEN_S)
            if reply is not None and reply.get("ok"):
                _give(worker)
            else:
                worker.kill()

    def _reconnect(self) -> None:
        """A fresh worker on the database that opened before: failing now is infrastructure (the
        file went away or became unreadable mid-episode), whatever SQLite says."""
        try:
            self._connect()
        except (sqlite3.Error, sqlite3.Warning) as e:
            raise WorkerLost(f"the SQL worker could not reopen {self.path}: {e}") from None

    def _connect(self) -> dict[str, str]:
        """Take a worker and open the database in it; its schema."""
        worker = _take(self.memory_mb)
        reply = worker.ask({"op": "open", "path": self.path}, OPEN_S)
        if reply is None:
            raise WorkerLost(f"the SQL worker process did not open {self.path} within {OPEN_S:g} s")
        if not reply.get("ok"):
            _give(worker)
            raise _error(reply)
        self._slot[0] = worker
        return dict(reply["schema"])


def _error(reply: dict[str, Any]) -> Exception:
    """The worker's failure as the sqlite3 exception it was there (``DatabaseError`` for a file
    that is not a database...), so callers see what an in-process connection would raise."""
    cls = getattr(sqlite3, str(reply.get("kind")), None)
    message = str(reply.get("error", "the statement failed"))
    if isinstance(cls, type) and issubclass(cls, (sqlite3.Error, sqlite3.Warning)):
        return cls(message)
    return QueryFailed(message)


# ---- the pool -----------------------------------------------------------------------------------

_pool: list[_Worker] = []
_pool_lock = threading.Lock()
_pool_pid = os.getpid()


def _take(memory_mb: int) -> _Worker:
    global _pool_pid
    with _pool_lock:
        if os.getpid() != _pool_pid:  # a forked child: those pipes are the parent's workers
            _pool.clear()
            _pool_pid = os.getpid()
        while _pool:
            worker = _pool.pop()
            if worker.memory_mb == memory_mb and worker.alive():
                return worker
            worker.kill()
    try:
        return _Worker(memory_mb)
    except OSError as e:
        raise WorkerLost(f"cannot start the SQL worker process: {e}") from None


def _give(worker: _Worker) -> None:
    with _pool_lock:
        if os.getpid() == _pool_pid and len(_pool) < POOL_MAX and worker.alive():
            _pool.append(worker)
            return
    worker.kill()


def _discard(slot: list[_Worker | None]) -> None:
    worker, slot[0] = slot[0], None
    if worker is not None:
        worker.kill()


@atexit.register
def _drain() -> None:
    with _pool_lock:
        workers, _pool[:] = list(_pool), []
    for worker in workers:
        worker.kill()
