"""SQL errors that teach: each failure's kind, and what would have worked, in a few hundred characters.

    error = sql_error("no such column: nme", query, schema)   # ToolError(kind="no_such_column"),
                                                              # naming the query's tables' columns

A model that reads ``no such column: nme`` and nothing else guesses again; one that reads the
columns of the tables it named can fix the query in one turn. So each kind that names something
missing says what is there instead — the columns of the tables the query mentions (all tables when
it mentions none), the tables with the closest one first — and an empty result says it is empty and
why that usually happens. Every hint is bounded (``MAX_HINT_CHARS``): a user database with a
hundred wide tables must not fill the context.

The kinds are fail reasons (``trajforge.grade.outcome.FAIL_REASONS``): ``syntax_error``,
``no_such_table``, ``no_such_column``, ``no_such_function``, ``ambiguous_column``, ``read_only``,
``query_limit``, and ``sql_error`` for any other message SQLite gives.
"""

from __future__ import annotations

import difflib
import re

from trajforge.envs.base import InfraError, ToolError
from trajforge.parse.limits import short

MAX_HINT_CHARS = 800
"""Longest hint appended to an error message."""
EMPTY_NOTE = ("no row matched. If one should have, the value may be spelled or cased differently "
              "in the data (look with SELECT DISTINCT or LIKE), or another table may hold it.")
"""Said after an empty result (``(0 rows)``) or one whose every value is NULL."""

# (kind, what SQLite's message contains), first match wins.
_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("no_such_table", ("no such table",)),
    ("no_such_column", ("no such column",)),
    ("no_such_function", ("no such function", "wrong number of arguments to function")),
    ("ambiguous_column", ("ambiguous column name",)),
    ("read_only", ("not authorized", "readonly", "read-only")),
    ("query_limit", ("interrupted", "out of memory", "too big", "string is too large",
                     "time limit", "memory limit", "byte limit")),
    ("syntax_error", ("syntax error", "incomplete input", "unrecognized token", "null character",
                      "surrogates not allowed", "can't encode", "cannot hold")),
)
"""Needles for SQLite's own messages and for ``SqlEnv._explain``'s rewordings of them."""
_SELECT = re.compile(r"\s*(\(\s*)*(select|with|values)\b", re.I)
_WRITES = re.compile(r"\s*\(*\s*(insert|update|delete|replace|upsert|create|drop|alter|attach|detach|"
                     r"pragma|vacuum|reindex|analyze|begin|commit|end|rollback|savepoint|release)\b",
                     re.I)


def sql_error(message: str, query: str, schema: dict[str, str]) -> ToolError | InfraError:
    """The error the model sees for a failed statement (``message``: what the tool said), with its
    kind and, where something was missing, what exists instead; an ``InfraError`` when the database
    file itself failed (never the query's doing)."""
    if database_broken(message):
        return InfraError(f"the database failed: {message}", kind="sql_database")
    kind = error_kind(message)
    if kind == "read_only" and not _SELECT.match(_uncommented(query)) and not _WRITES.match(
            _uncommented(query)):
        # Refused before SQLite saw it, and not a write either: text that is not a query at all.
        return ToolError(f"not a SELECT query: {short(query.strip() or query, 40)}; run_sql takes "
                         "one SELECT (or WITH ... SELECT) statement", kind="syntax_error")
    hint = what_exists(kind, message, query, schema)
    return ToolError(f"{message}; {hint}" if hint else message, kind=kind)


def _uncommented(sql: str) -> str:
    return re.sub(r"--[^\n]*|/\*.*?(\*/|$)", " ", sql, flags=re.S)


_BROKEN_DATABASE = ("disk i/o error", "database disk image is malformed", "file is not a database",
                    "unable to open database file")
"""What SQLite says when the database file itself failed mid-episode (it opened at reset): never
the model's query, so an infrastructure fault."""


def database_broken(message: str) -> bool:
    lowered = message.lower()
    return any(m in lowered for m in _BROKEN_DATABASE)


def error_kind(message: str) -> str:
    """The fail-reason kind of a SQLite error message (``sql_error`` when none fits)."""
    lowered = message.lower()
    return next((kind for kind, needles in _KINDS if any(n in lowered for n in needles)),
                "sql_error")


def tables_read(sql: str, tables: list[str]) -> list[str]:
    """The database tables a query mentions, in order of first mention (string literals skipped;
    ``tables`` in lower case)."""
    text = re.sub(r"'(?:[^']|'')*'", "''", sql).casefold()
    found = []
    for m in re.finditer(r'"((?:[^"]|"")+)"|`([^`]+)`|\[([^\]]+)\]|([\w$]+)', text):
        name = next(g for g in m.groups() if g is not None).replace('""', '"')
        if name in tables and name not in found:
            found.append(name)
    return found


def what_exists(kind: str, message: str, query: str, schema: dict[str, str]) -> str:
    """What would have worked for SQLite's error ``message`` of ``kind`` on ``query`` ("" when the
    kind names nothing missing). ``schema`` maps each lower-case table name to its description,
    ``orders(id INTEGER, customer_id INTEGER -> customers.id, ...); 300 rows``."""
    if kind == "no_such_column":
        named = tables_read(query, list(schema))
        shown = [_columns(schema[t]) for t in named] or [_columns(d) for d in schema.values()]
        which = "the query's tables" if named else "the tables"
        missing = re.search(r"no such column:\s*(?:[\w$]+\.)?([\w$]+)", message)
        aliases = query_aliases(query, named)
        where = where_it_is(missing.group(1), named, schema, aliases) if missing and named else ""
        # Where the column is comes first: it is the fix, and it must survive the bound.
        return _bounded((f"{where}; " if where else "") + f"columns of {which}: " + "; ".join(shown))
    if kind == "no_such_table":
        missing = re.search(r"no such table:\s*(?:\w+\.)?(\S+)", message)
        return _bounded(tables_hint(missing.group(1) if missing else "", list(schema)))
    if kind == "ambiguous_column":
        return "qualify the column with its table name or alias (orders.id, o.id)"
    return ""


def foreign_keys(schema: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(table, column, referenced table, referenced column) for each ``col TYPE -> table.col`` of
    the schema's descriptions (names in lower case)."""
    out = []
    for table, description in schema.items():
        for col, ref, ref_col in re.findall(r"([\w$]+) [^,()]*?-> ([\w$]+)\.([\w$]+)", _columns(description)):
            out.append((table, col.casefold(), ref.casefold(), ref_col.casefold()))
    return out


def join_path(start: list[str], goal: str, schema: dict[str, str], max_hops: int = 3,
              aliases: dict[str, str] | None = None) -> list[str] | None:
    """The ``JOIN t ON a.x = t.y`` clauses that reach ``goal`` from the tables ``start`` by foreign
    keys, fewest first (None when none within ``max_hops``). A start table the query gave an alias
    (``aliases``: table → alias) is written by its alias, so the clauses paste into that query
    as they are (``FROM orders o`` + ``JOIN customers ON o.customer_id = customers.id``)."""
    named = {t: (aliases or {}).get(t, t) for t in start}
    edges: dict[str, list[tuple[str, str]]] = {}
    for table, col, ref, ref_col in foreign_keys(schema):
        left, right = named.get(table, table), named.get(ref, ref)
        edges.setdefault(table, []).append((ref, f"{left}.{col} = {right}.{ref_col}"))
        edges.setdefault(ref, []).append((table, f"{right}.{ref_col} = {left}.{col}"))
    paths = {t: [] for t in start}
    frontier = list(start)
    for _ in range(max_hops):
        nxt = []
        for table in frontier:
            for other, on in edges.get(table, []):
                if other not in paths:
                    paths[other] = paths[table] + [f"JOIN {other} ON {on}"]
                    nxt.append(other)
        if goal in paths:
            return paths[goal]
        frontier = nxt
    return None


_NOT_ALIASES = frozenset(
    "where join on using inner left right full outer cross natural group order limit having union "
    "except intersect window as select from and or not".split())
"""Words that may follow a table name and are not its alias."""


def query_aliases(sql: str, tables: list[str]) -> dict[str, str]:
    """{table: alias} for the tables ``sql`` names once, with an alias (``FROM orders o``,
    ``JOIN customers AS c``); ``tables`` in lower case. A table named twice (a self-join) keeps its
    name: which alias a hint should use is not knowable."""
    text = re.sub(r"'(?:[^']|'')*'", "''", sql)
    seen: dict[str, list[str | None]] = {}
    for m in re.finditer(r"\b(?:from|join)\s+([\w$]+)(?:\s+(?:as\s+)?([\w$]+))?", text, re.I):
        table, alias = m.group(1).casefold(), m.group(2)
        if table in tables:
            ok = alias is not None and alias.casefold() not in _NOT_ALIASES
            seen.setdefault(table, []).append(alias if ok else None)
    return {t: a[0] for t, a in seen.items() if len(a) == 1 and a[0] is not None}


def where_it_is(column: str, named: list[str], schema: dict[str, str],
                aliases: dict[str, str] | None = None) -> str:
    """``city is a column of customers (JOIN customers ON o.customer_id = customers.id)``:
    the other tables that have ``column`` and how the query's tables reach them, by the query's
    aliases where it gave some ("" when none has it). The error a model makes most with a schema
    it half knows is the right column on the wrong table; naming the join turns that error into a
    one-turn fix."""
    wanted = column.casefold()
    found = []
    for table, description in schema.items():
        if table in named:
            continue
        if wanted in _column_names(description):
            path = join_path(named, table, schema, aliases=aliases)
            found.append(f"{table} ({' '.join(path)})" if path else table)
    if not found:
        return ""
    return f"{column} is a column of {' and of '.join(found)}, not of {', '.join(named)}"


def tables_hint(wanted: str, tables: list[str]) -> str:
    """``did you mean 'orders'? tables: ...`` (the closest table first, when one is close)."""
    close = closest(wanted, tables)
    guess = f"did you mean {close!r}? " if close else ""
    return _bounded(f"{guess}tables: {', '.join(tables)}")


def closest(wanted: str, names: list[str]) -> str | None:
    """The name most like ``wanted`` (case-insensitive), if any is close."""
    by_key = {n.casefold(): n for n in names}
    # Names are short: a model-written megabyte is cut before difflib compares it.
    hit = difflib.get_close_matches(wanted[:100].casefold(), list(by_key), n=1, cutoff=0.6)
    return by_key[hit[0]] if hit else None


def _columns(description: str) -> str:
    """``orders(id INTEGER, ...)`` of a table description (its row count dropped)."""
    return description.rsplit(";", 1)[0]


def _column_names(description: str) -> set[str]:
    """The lower-case column names of a table description ``t(a INTEGER, b TEXT -> u.id); n rows``."""
    inner = _columns(description).partition("(")[2].rstrip(")")
    return {c.split()[0].casefold() for c in inner.split(", ") if c.strip()}


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_HINT_CHARS else text[:MAX_HINT_CHARS] + " ..."
