"""The SQL environment's realistic mistakes for self-repair demonstrations (``EnvSpec.mistakes``).

Each is a query the model could plausibly write on the way to the reference's first ``run_sql``,
and each only reads (the database is read-only anyway):

- ``wrong_table``: a singular table name (``customer``): ``no such table``, with the tables listed;
- ``wrong_column``: a near-miss column (``city_name``, ``cost``): ``no such column``, with the
  table's columns listed;
- in a world that renames a table or column (``envs/sql/worlds.py``), those two use the original
  world's name instead (``customers`` where the world says ``clients``, ``city`` for ``town``):
  the name a model that memorised one world writes, refused like any other;
- ``misplaced_column``: a joined table's column written on the tables without the join
  (``FROM orders o WHERE city = 'Lyon'``): ``no such column``, with the table that has it and
  the join that reaches it; the fix adds the join. Held-out questions fail this way more than
  by spelling: the column is right, the table is not;
- ``collapsed_join``: a query of two or more joins written on one table, every join dropped
  and the filters unqualified (``SELECT COUNT(*) FROM products WHERE category = 'Toys' AND city =
  'Graz'``): ``no such column``, with the table that has the column and the whole join path to
  it. The embedded model's commonest natural error on held-out questions (stops 48–49: 15 of 16
  erring episodes of the best recipe's seed 2 start so), which dropping one join does not show;
- ``wrong_entity``: the question's value in another spelling (lower case): it runs and finds
  nothing, or counts zero;
- ``nearest_template``: another template's query with this task's entities (what a model that
  memorised the training queries writes): it runs, and answers another question;
- ``intermediate``: the matching rows instead of the answer (``SELECT * ... LIMIT 5``): it runs,
  and is not yet the number or name asked for;
- ``premature_answer``: the first failing query above (``collapsed_join``, else ``misplaced_column``, else
  ``wrong_column``, else ``wrong_table``), then a number submitted at once: the measured
  ``guessed_answer`` failure, the commonest of the embedded model after an error (stop 44). The
  environment refuses the submission (``SqlEnv.refuse_unsupported``), so the episode shows the
  error, the refusal, and the fix after both.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from trajforge.envs.mistakes import first_call, nearest_template, with_args
from trajforge.envs.sql.env import REFUSE_UNSUPPORTED
from trajforge.envs.sql.worlds import COLUMN_NAMES, TABLE_NAMES, retail_world
from trajforge.envs.sqldb import SQL_LITERAL
from trajforge.schema import Mistake, Task, ToolCall

QUERY_TOOLS = ("run_sql",)
TABLE_SLIPS = {"customers": "customer", "products": "product", "order_items": "order_item"}
"""Plural tables a model writes in the singular (``orders`` → ``order`` is a keyword, a different
error)."""
GUESS = "6"
"""The number a ``premature_answer`` submits (what the embedded model submitted most after an
error); the refusal does not depend on it."""
COLUMN_SLIPS = {"city": "city_name", "category": "category_name", "price": "cost", "stock": "in_stock",
                "quantity": "qty", "tier": "level", "signup_year": "year"}
"""Columns and the near-miss names models give them."""


@functools.lru_cache(maxsize=64)
def world_slips(world: int) -> tuple[dict[str, str], dict[str, str]]:
    """(table slips, column slips) in ``world``'s names, each name → the wrong one: a renamed
    name's slip is its world-0 name, the others keep ``TABLE_SLIPS`` / ``COLUMN_SLIPS`` (world 0:
    exactly those). A slip that is a real name of the world is left out: it would not fail.
    Cached per world (every task's mistakes ask): callers read the dicts, never change them."""
    w = retail_world(world)
    tables = {w.tables[t]: t for t in (*TABLE_SLIPS, *TABLE_NAMES) if t in w.tables}
    tables |= {t: wrong for t, wrong in TABLE_SLIPS.items() if t not in w.tables}
    columns = {w.columns[c]: c for c in (*COLUMN_SLIPS, *COLUMN_NAMES) if c in w.columns}
    columns |= {c: wrong for c, wrong in COLUMN_SLIPS.items() if c not in w.columns}
    kept = ({*TABLE_NAMES, "order_items"} - set(w.tables)) | (set(COLUMN_NAMES) - set(w.columns))
    real = kept | set(w.tables.values()) | set(w.columns.values())
    return ({k: v for k, v in tables.items() if v not in real},
            {k: v for k, v in columns.items() if v not in real})


def _word(name: str) -> re.Pattern:
    return re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w)|(?<=\.){re.escape(name)}(?!\w)")


def _swap_first(query: str, slips: dict[str, str]) -> tuple[str, str, str] | None:
    """(new query, right name, wrong name) for the first slip whose name the query uses, outside
    quoted strings."""
    parts = SQL_LITERAL.split(query)
    for right, wrong in slips.items():
        pattern = _word(right)
        for i in range(0, len(parts), 2):
            if pattern.search(parts[i]):
                parts = list(parts)
                parts[i] = pattern.sub(wrong, parts[i], count=1)
                return "".join(parts), right, wrong
    return None


_JOIN = re.compile(r"\s+JOIN\s+(\w+)\s+(?:AS\s+)?(\w+)\s+ON\s+\w+\.\w+\s*=\s*\w+\.\w+", re.I)


def _drop_join(query: str) -> tuple[str, str, str, str] | None:
    """(query without one of its joins, the column, its table, the JOIN clause) where the dropped
    table's alias is used only by its ON clause and one filter ``alias.column``, which loses its
    alias: the query a model writes when it knows the column but not where it lives. None when
    no join is that simple."""
    for m in _JOIN.finditer(query):
        table, alias = m.group(1), m.group(2)
        rest = query[:m.start()] + query[m.end():]
        uses = re.findall(rf"(?<![\w.]){re.escape(alias)}\.(\w+)", rest)
        if len(uses) != 1:
            continue
        column = uses[0]
        filtered = re.search(rf"\bWHERE\b.*(?<![\w.]){re.escape(alias)}\.{column}\b", rest, re.I | re.S)
        if filtered is None:
            continue
        new = re.sub(rf"(?<![\w.]){re.escape(alias)}\.{column}\b", column, rest, count=1)
        return new, column, table, m.group(0).strip()
    return None


_TABLE_REF = re.compile(r"\b(?:FROM|JOIN)\s+(\w+)(?:\s+(?:AS\s+)?(?!(?:ON|JOIN|WHERE)\b)(\w+))?", re.I)
_QUALIFIED = re.compile(r"(?<![\w.])(\w+)\.(\w+)")
_ONE_QUERY = re.compile(r"\s*SELECT\s+(?P<select>.+?)\s+FROM\s+(?P<source>.+?)\s+WHERE\s+(?P<where>.+?)"
                        r"(?:\s+(?:GROUP\s+BY|ORDER\s+BY|LIMIT)\b.*)?$", re.I | re.S)


def _unqualified(text: str, aliases: dict[str, str]) -> str:
    """``text`` with every ``alias.column`` of ``aliases`` written ``column``, outside string literals."""
    parts = SQL_LITERAL.split(text)
    return "".join(p if i % 2 else _QUALIFIED.sub(lambda m: m[2] if m[1] in aliases else m[0], p)
                   for i, p in enumerate(parts))


def _qualifiers(text: str, aliases: dict[str, str]) -> list[tuple[str, str]]:
    """The ``(alias, column)`` pairs ``text`` uses, in order, outside string literals."""
    parts = SQL_LITERAL.split(text)
    return [(a, c) for p in parts[::2] for a, c in _QUALIFIED.findall(p) if a in aliases]


def _collapse_joins(query: str) -> tuple[str, str, str, list[str]] | None:
    """(the query on one table with all its joins dropped, a column it filters on that lives in
    another table, that table, the query's tables in order), for a query of two or more joins
    and no subquery. The one table is the last filter's (``p.category`` → ``products``) when the
    filters use several tables, else the FROM table; the measure becomes ``COUNT(*)`` unless it
    reads only that table. None when every filter is on that table (the collapsed query would not
    fail) or the query is not that simple."""
    m = _ONE_QUERY.match(query)
    if m is None or len(re.findall(r"\bJOIN\b", m["source"], re.I)) < 2 or "SELECT" in m["where"].upper():
        return None
    refs = _TABLE_REF.findall(f"FROM {m['source']}")
    aliases = {(alias or table): table for table, alias in refs}
    used = _qualifiers(m["where"], aliases)
    distinct = list(dict.fromkeys(a for a, _ in used))
    if not distinct:
        return None
    first = refs[0][1] or refs[0][0]
    base = distinct[-1] if len(distinct) > 1 else first
    missing = next(((a, c) for a, c in used if a != base), None)
    if missing is None:
        return None
    measure = m["select"] if {a for a, _ in _qualifiers(m["select"], aliases)} <= {base} else "COUNT(*)"
    new = f"SELECT {_unqualified(measure, aliases)} FROM {aliases[base]} WHERE {_unqualified(m['where'], aliases)}"
    return new, missing[1], aliases[missing[0]], [table for table, _ in refs]


def sql_mistakes(task: Task, pool: Sequence[Task]) -> list[Mistake]:
    """The mistakes above that fit ``task`` (the first ``run_sql`` of its reference)."""
    at = first_call(task, QUERY_TOOLS)
    if at is None:
        return []
    call = task.reference[at]
    query = str(call.arguments.get("query", ""))
    out: list[Mistake] = []
    table_slips, column_slips = world_slips(task.world)
    swapped = _swap_first(query, table_slips)
    if swapped:
        new, right, wrong = swapped
        out.append(Mistake(kind="wrong_table", at=at, calls=(with_args(call, query=new),),
                           recovery=f"There is no table {wrong}; the error lists the tables, and it is {right}."))
    swapped = _swap_first(query, column_slips)
    if swapped:
        new, right, wrong = swapped
        out.append(Mistake(kind="wrong_column", at=at, calls=(with_args(call, query=new),),
                           recovery=f"There is no column {wrong}; the error lists the columns, and it is {right}."))
    collapsed = _collapse_joins(query)
    if collapsed:
        new, column, table, tables = collapsed
        # The fix's sentence names the tables in the order its FROM and JOINs take them: the
        # query then follows the sentence, not the failing query before it.
        listed = f"{', '.join(tables[:-1])} and {tables[-1]}"
        out.append(Mistake(kind="collapsed_join", at=at, calls=(with_args(call, query=new),),
                           recovery=f"{column} is a column of {table}, which my query did not join; "
                                    f"I'll join {listed}."))
    dropped = _drop_join(query)
    if dropped:
        new, column, table, clause = dropped
        out.append(Mistake(kind="misplaced_column", at=at, calls=(with_args(call, query=new),),
                           recovery=f"{column} is a column of {table}, which my query did not join; "
                                    f"I'll add {clause}."))
    made = {m.kind: m for m in out}
    failing = next((made[k] for k in ("collapsed_join", "misplaced_column", "wrong_column", "wrong_table")
                    if k in made), None)
    if failing is not None and REFUSE_UNSUPPORTED:  # taken, the number would end the episode
        out.append(Mistake(kind="premature_answer", at=at,
                           calls=(*failing.calls, ToolCall(name="submit_answer", arguments={"answer": GUESS})),
                           recovery=f"No query has succeeded yet, so nothing supports {GUESS}. {failing.recovery}"))
    for value in task.entities.values():
        if isinstance(value, str) and f"'{value}'" in query and value.lower() != value:
            out.append(Mistake(kind="wrong_entity", at=at,
                               calls=(with_args(call, query=query.replace(f"'{value}'", f"'{value.lower()}'")),),
                               recovery=f"That matched nothing useful: the data writes it '{value}', "
                                        "exactly as the question does."))
            break
    near = nearest_template(task, pool, QUERY_TOOLS,
                            "That query answers a different question; I'll write the one this question needs.")
    if near is not None:
        out.append(near)
    star = re.sub(r"^\s*SELECT\s+(?!\*\s)(.+?)\s+FROM\s", "SELECT * FROM ", query, count=1, flags=re.I | re.S)
    if star != query:
        star = re.sub(r"\s+ORDER BY\s.*$|\s+LIMIT\s+\d+\s*$", "", star, flags=re.I | re.S)
        star = re.sub(r"\s+GROUP BY\s.*$", "", star, flags=re.I | re.S)
        out.append(Mistake(kind="intermediate", at=at, calls=(with_args(call, query=f"{star} LIMIT 5"),),
                           recovery="Those are some matching rows, not the answer the question asks for; "
                                    "I'll compute it."))
    return out
