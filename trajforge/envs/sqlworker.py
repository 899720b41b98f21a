"""The SQL environment's worker process: SQLite runs here, under hard limits, never in the harness.

``sqlguard.py`` starts it as ``python -I -S sqlworker.py MEMORY_MB`` and talks to it over pipes,
one JSON object per line each way (each reply preceded by ``+``, written as soon as the request
is read)::

    {"op": "open", "path": P}                  -> {"ok": true, "schema": {table: description}}
    {"op": "query", "sql": Q, "deadline": T,   -> {"ok": true, "text": ..., "cells": [[...]]}
     "max_rows": N, "max_chars": C, "offset": K?}
    {"op": "rows", "sql": Q, "deadline": T,    -> {"ok": true, "columns": [...], "rows": [[...]],
     "max_rows": N, "max_bytes": B}                "complete": bool}
    {"op": "close"}                            -> {"ok": true}
    any failure                                -> {"ok": false, "error": MESSAGE,
                                                   "kind": sqlite3 class name, "fatal": bool}

What holds here: the database opened read-only; an authorizer allow-listing reads (ATTACH,
PRAGMA, writes and ``load_extension`` are refused while the statement is prepared); a progress
handler that interrupts the statement at ``deadline`` (an absolute ``time.monotonic()``, the same
clock as the host's); ``SQLITE_LIMIT_LENGTH`` on any single value; the rendered result capped in
rows, characters and per-cell length (``query``: what a model is shown); ``rows`` gives the
values themselves, typed (a blob as ``{"blob": HEX}``), up to a row and byte cap, for comparing
whole results (execution accuracy). The process itself runs under RLIMIT_AS (``MEMORY_MB``), so
SQLite's heap *and* the Python objects a result row becomes are bounded (a 2,000-column row of
1 MB blobs is a ``MemoryError`` here, not 2 GB in the harness); temp files under RLIMIT_FSIZE.
A ``MemoryError`` is reported as fatal and the worker exits, so the next query gets a fresh one.

Standard library only: it starts in a few tens of milliseconds (trajforge's imports would pull
pydantic), and the host runs it by path.
"""

from __future__ import annotations

import json
import math
import resource
import signal
import sqlite3
import sys
import time
from typing import Any
from urllib.parse import quote

# Authorizer allow-list: SELECT, reading columns, calling functions and recursive CTEs. Anything
# else (ATTACH, PRAGMA, transactions, every write, schema changes) is denied while the statement
# is prepared, so it never runs. VACUUM INTO starts with an ATTACH and is refused too.
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                              sqlite3.SQLITE_RECURSIVE})
# Functions that touch the filesystem or process in some SQLite builds.
_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"})

MAX_VALUE_BYTES = 1_000_000
"""SQLITE_LIMIT_LENGTH: no string or blob may grow past this (``zeroblob(10**8)`` fails fast)."""
CELL_CHARS = 200
"""A rendered cell longer than this is cut, so one huge value can't fill the model's context."""
COUNT_LIMIT = 10_000
"""Rows past the shown ones are only counted, and only up to this many."""
_PROGRESS_OPS = 1000
"""The deadline is checked every this many SQLite VM instructions."""


def open_readonly(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, isolation_level=None)
    if hasattr(conn, "enable_load_extension"):  # absent when Python is built without it
        conn.enable_load_extension(False)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 20_000)
    return conn


def authorize(action: int, arg1: Any, arg2: Any, dbname: Any, source: Any) -> int:
    if action not in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def describe_all(conn: sqlite3.Connection) -> dict[str, str]:
    """``{table: "orders(id INTEGER, customer_id INTEGER -> customers.id, ...); 300 rows"}``."""
    out: dict[str, str] = {}
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY rowid")]
    for table in tables:
        name = quote_ident(table)  # user databases may name tables "order items" or "select"
        refs = {r[3]: f"{r[2]}.{r[4]}" for r in conn.execute(f"PRAGMA foreign_key_list({name})")}
        cols = []
        for _, col, ctype, *_ in conn.execute(f"PRAGMA table_info({name})"):
            cols.append(f"{col} {ctype}" + (f" -> {refs[col]}" if col in refs else ""))
        n = conn.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0]
        out[table.lower()] = f"{table}({', '.join(cols)}); {n} rows"
    return out


def quote_ident(name: str) -> str:
    """A SQLite identifier, double-quoted so any table name is safe in a statement."""
    return '"' + name.replace('"', '""') + '"'


# ---- result rendering -----------------------------------------------------------------------

def format_cell(value: Any) -> str:
    """One value as the model sees it (escaped, cut to CELL_CHARS)."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"<blob {len(value)} bytes>"
    if isinstance(value, float):
        # Round away float noise (1234.5600000000002) but keep enough digits for averages.
        return repr(round(value, 6)) if math.isfinite(value) else repr(value)
    text = str(value)
    if len(text) > CELL_CHARS:
        text = f"{text[:CELL_CHARS]}...(+{len(text) - CELL_CHARS} chars)"
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "\\n").replace("\r", "\\r")


def render_rows(columns: list[str], rows: Any, max_rows: int, max_chars: int, offset: int = 0
                ) -> tuple[str, list[list[str]]]:
    """Render a cursor's rows, from row ``offset`` on (the rows before it are only counted);
    returns (text, cells of the rows shown)."""
    lines = ["|".join(format_cell(c) for c in columns)]
    shown: list[list[str]] = []
    size = len(lines[0])
    total = 0
    full = False  # once a cap is hit, later rows are only counted
    it = iter(rows)
    for row in it:
        total += 1
        if not full and total > offset:
            cells = [format_cell(v) for v in row]
            line = "|".join(cells)
            if len(shown) >= max_rows or size + len(line) + 1 > max_chars:
                full = True
            else:
                shown.append(cells)
                lines.append(line)
                size += len(line) + 1
        if total >= COUNT_LIMIT:
            # Don't scan a million-row result just to count it.
            if next(it, None) is not None:
                lines.append(_footer(len(shown), f"{COUNT_LIMIT}+", offset))
                return "\n".join(lines), shown
            break
    if offset or len(shown) < total:
        lines.append(_footer(len(shown), str(total), offset))
    else:
        lines.append(f"({total} row{'' if total == 1 else 's'})")
    return "\n".join(lines), shown


def _footer(shown: int, total: str, offset: int) -> str:
    """The last line of a result that is not shown whole: a first page, or a later one."""
    if not offset:
        return f"... (truncated: {shown} of {total} rows shown)"
    if not shown:
        return f"... (no rows past row {offset}; the result has {total} rows)"
    return f"... (rows {offset + 1}-{offset + shown} of {total} shown)"


def json_cell(value: Any) -> Any:
    """One value as JSON keeps it: numbers, text and NULL as they are, a blob as ``{"blob": HEX}``."""
    if isinstance(value, bytes):
        return {"blob": value.hex()}
    return value


def cell_bytes(value: Any) -> int:
    """Roughly what one value costs in a ``rows`` reply."""
    if isinstance(value, str):
        return len(value) + 3
    if isinstance(value, dict):
        return 2 * len(value["blob"]) + 12
    return 8


TEMP_FILE_MB = 256
"""RLIMIT_FSIZE: a sort or DISTINCT spilling to a temp file stops there (SQLite gets EFBIG)."""


class Session:
    """The worker's one connection and the deadline of the statement running on it."""

    def __init__(self) -> None:
        self.conn: sqlite3.Connection | None = None
        self.deadline = math.inf

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "open":
            self.close()
            conn = open_readonly(str(request["path"]))
            # Read the schema before the authorizer goes in: it needs PRAGMA, queries don't get it.
            schema = describe_all(conn)
            conn.set_authorizer(authorize)
            conn.set_progress_handler(self._check_deadline, _PROGRESS_OPS)
            self.conn = conn
            return {"ok": True, "schema": schema}
        if op == "query":
            return self.query(str(request["sql"]), float(request["deadline"]),
                              int(request["max_rows"]), int(request["max_chars"]),
                              int(request.get("offset", 0)))
        if op == "rows":
            return self.rows(str(request["sql"]), float(request["deadline"]),
                             int(request["max_rows"]), int(request["max_bytes"]))
        if op == "close":
            self.close()
            return {"ok": True}
        return {"ok": False, "error": f"unknown request {op!r}"}

    def query(self, sql: str, deadline: float, max_rows: int, max_chars: int, offset: int = 0
              ) -> dict[str, Any]:
        def shown(columns: list[str], cursor: sqlite3.Cursor) -> dict[str, Any]:
            text, cells = render_rows(columns, cursor, max_rows, max_chars, max(0, offset))
            return {"ok": True, "text": text, "cells": cells}

        return self._run(sql, deadline, shown)

    def rows(self, sql: str, deadline: float, max_rows: int, max_bytes: int) -> dict[str, Any]:
        """The result's values, typed; ``complete`` is False when it has more than ``max_rows``
        rows or ``max_bytes`` of values (reading stops there)."""
        def values(columns: list[str], cursor: sqlite3.Cursor) -> dict[str, Any]:
            out: list[list[Any]] = []
            size = 0
            for row in cursor:
                cells = [json_cell(v) for v in row]
                size += sum(cell_bytes(c) for c in cells)
                if len(out) >= max_rows or size > max_bytes:
                    return {"ok": True, "columns": columns, "rows": out, "complete": False}
                out.append(cells)
            return {"ok": True, "columns": columns, "rows": out, "complete": True}

        return self._run(sql, deadline, values)

    def _run(self, sql: str, deadline: float, read: Any) -> dict[str, Any]:
        """Execute ``sql`` under ``deadline`` and let ``read(columns, cursor)`` make the reply."""
        if self.conn is None:
            return {"ok": False, "error": "no database is open"}
        self.deadline = deadline
        try:
            cursor = self.conn.execute(sql)
            try:
                return read([d[0] for d in cursor.description or ()], cursor)
            finally:
                cursor.close()
        finally:
            self.deadline = math.inf

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _check_deadline(self) -> int:
        # A non-zero return makes SQLite abort the statement with "interrupted".
        return int(time.monotonic() > self.deadline)


def _answer(session: Session, line: bytes) -> dict[str, Any]:
    try:
        return session.handle(json.loads(line))
    except MemoryError:
        return {"ok": False, "error": "out of memory", "fatal": True}
    except (sqlite3.Error, sqlite3.Warning) as e:
        return {"ok": False, "error": str(e), "kind": type(e).__name__}
    except Exception as e:  # noqa: BLE001 - e.g. a lone surrogate in the SQL text: the model's
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def main(argv: list[str]) -> None:
    memory = int(argv[1]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (TEMP_FILE_MB * 1024 * 1024,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-big temp file is an error, not a kill
    session = Session()
    for line in sys.stdin.buffer:
        # "+" first: the host then knows the request arrived, so a worker found dead without it
        # died before the statement (and is replaced quietly), not because of it.
        sys.stdout.buffer.write(b"+")
        sys.stdout.buffer.flush()
        reply = _answer(session, line)
        try:
            data = json.dumps(reply).encode() + b"\n"
        except MemoryError:
            data = b'{"ok": false, "error": "out of memory", "fatal": true}\n'
            reply = {"fatal": True}
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        if reply.get("fatal"):
            return


if __name__ == "__main__":
    main(sys.argv)
