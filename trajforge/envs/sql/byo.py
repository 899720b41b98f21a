"""Bring your own SQLite databases and questions: every row whose gold SQL runs becomes a task.

    trajforge synth --env sql --db shop.sqlite --questions q.jsonl --split train --out shop.jsonl
    trajforge synth --env sql --questions dev.json --db-dir database/ --split dev --out dev.jsonl
    trajforge synth --env sql-exec --questions dev.json --db-dir database/ --split dev --out dev.jsonl

The file (``questions.py``: JSONL lines or a Spider/BIRD JSON array) says, per row, the question,
its gold SQL, its database and its split. For every row the gold SQL runs through a real
``SqlEnv`` on its file (read-only, in the SQL worker, under the deadline an agent gets) and the
task's reference plan is what an agent would do: ``list_tables``, ``describe_table`` for each table
the query reads, ``run_sql(gold)``, then the final call. The plan is held to the contract in
``tasks/verify.py`` (expected value read off the execution, replay accepted); the tier comes from
the query's structure. Each task records its database by absolute path and content hash
(``Task.db``, ``Task.db_sha256``), so a pool may span many databases and a file changed since is
refused by name (``dbfile.py``).

What the agent submits:

* ``--env sql`` (auto): where the gold result is one value, or one short column, an ``sql`` task
  (``submit_answer``, compared as a number, a name or a list); any other result — several
  columns, more rows than an agent is shown, NULL or empty — an ``sql-exec`` task
  (``submit_query``, scored by execution accuracy, ``compare.py``);
* ``--env sql-exec``: execution accuracy for every row (how text-to-SQL sets are scored).

``compare="set"`` makes execution-accuracy tasks compare rows as a set (BIRD) instead of a
multiset (Spider). Rows that cannot be read, whose SQL fails, is not read-only, runs past the
deadline or returns more than ``MAX_RESULT_ROWS`` rows are not dropped silently: each is a
``Rejection`` naming its source and why.

Duplicates are the data here (paraphrases of one question; different questions with one gold
query), so none is dropped by default: the report lists the groups of rows sharing a question or a
gold query, and which cross splits (``SynthReport.duplicates``, ``tasks.dedup.leakage``).
``dedup="exact"`` drops repeated questions, ``"near"`` also repeated gold queries and reworded
questions; the copy kept is one outside the train split where there is one.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from trajforge.envs.base import ToolError
from trajforge.envs.sql.compare import COMPARES
from trajforge.envs.sql.dbfile import db_digest
from trajforge.envs.sql.env import SqlEnv
from trajforge.envs.sql.execution import MAX_RESULT_ROWS
from trajforge.envs.sql.hints import tables_read  # also a name of this module (its __all__)
from trajforge.envs.sql.questions import (BadRow, Question, QuestionsError, Row, database_of,
                                          read_questions, with_splits)
from trajforge.envs.sql.results import read_result  # noqa: F401 - a 0.1 name of this module
from trajforge.envs.sql.tiering import sql_tier
from trajforge.envs.sqlguard import ResultSet
from trajforge.envs.sqlworker import CELL_CHARS
from trajforge.schema import Task, ToolCall
from trajforge.tasks.dedup import DEFAULT_THRESHOLD, Deduper, DuplicateGroup, duplicate_groups, normalize_prompt
from trajforge.tasks.pool import Rejection, SynthReport
from trajforge.tasks.splits import ROLES, SplitRoles
from trajforge.tasks.verify import PlanRejected, verified

Dedup = Literal["exact", "near"]
EXEC_ENV = "sql-exec"


def load_questions(path: str | Path) -> tuple[list[Row], list[Rejection]]:
    """Every readable row of a questions file, and a ``bad_line`` Rejection for every other."""
    good, bad = read_questions(path)
    return good, [_bad(b) for b in bad]


def _bad(row: BadRow) -> Rejection:
    return Rejection(reason="bad_line", detail=row.detail, source=row.source)


# ---- one row → one task ---------------------------------------------------------------------

_LIST_SEPARATORS = re.compile(r",|;|\n|&|\band\b", re.I)


def answer_text(rows: list[list[str]]) -> str:
    """What the expert submits for a one-value or one-column result (see ``SqlEnv.expected_outcome``)."""
    if len(rows) == 1:
        return rows[0][0]
    items = [r[0] for r in rows]
    # Items that contain a list separator would split apart; a JSON list keeps them whole.
    if any(_LIST_SEPARATORS.search(i) for i in items):
        return json.dumps(items)
    return ", ".join(items)


def fits_one_answer(result: ResultSet, shown_rows: int) -> bool:
    """Whether a gold result is an ``sql`` answer: one value, or one column of at most
    ``shown_rows`` short values, none NULL (anything else is scored by execution)."""
    if not result.complete or not result.rows or len(result.columns) != 1 or len(result.rows) > shown_rows:
        return False
    return all(v is not None and not isinstance(v, bytes) and len(str(v)) <= CELL_CHARS
               for (v,) in result.rows)


def _shown(value: object) -> str:
    """A value as ``run_sql`` shows it (floats rounded to 6 places), unescaped: what the expert
    reads off the result and submits."""
    return repr(round(value, 6)) if isinstance(value, float) and math.isfinite(value) else str(value)


def _explore(probe: Task, sql: str) -> tuple[list[ToolCall], ResultSet, int]:
    """Look at the schema as an agent would and run the gold query in full; (schema calls, the
    whole result, the rows an agent is shown). PlanRejected when the query fails or is too large."""
    env = SqlEnv()
    try:
        env.reset(probe)
        calls = [ToolCall(name="list_tables")]
        calls += [ToolCall(name="describe_table", arguments={"table": t}) for t in tables_read(sql, env.tables)]
        try:
            result = env.full_result(sql, MAX_RESULT_ROWS)
        except ToolError as e:  # the message an agent would see
            raise PlanRejected(e.kind, str(e)) from None
        if not result.complete:
            raise PlanRejected("result_too_large", f"the gold query returns more than {MAX_RESULT_ROWS} "
                               "rows (or more data than a result may hold)")
        return calls, result, env.max_rows
    finally:
        env.close()


def task_id(db: Path, q: Question, occurrence: int = 0, scored: str | None = None) -> str:
    """Stable id: the database's name, the question (and evidence), the gold SQL; the how-many-th
    identical row this is (so repeated rows stay distinct tasks); how an execution task compares."""
    key = [db.name, q.question, q.sql, *([q.evidence] if q.evidence else []),
           *([occurrence] if occurrence else []), *([scored] if scored else [])]
    return f"byo-{hashlib.sha1(json.dumps(key).encode()).hexdigest()[:10]}"


def question_task(db: Path, q: Question, env: str = "sql", compare: str = "multiset",
                  occurrence: int = 0) -> Task:
    """The verified Task for one row (``env`` ``sql``: auto, ``sql-exec``: execution accuracy);
    PlanRejected with the reason otherwise."""
    if compare not in COMPARES:
        raise ValueError(f"compare must be one of {', '.join(COMPARES)}, not {compare!r}")
    # A row read through questions_to_tasks always has its split; a Question built in code
    # without one goes where training data goes.
    probe = Task(id=task_id(db, q, occurrence), env="sql", prompt=q.prompt, tier=sql_tier([q.sql]),
                 split=q.split or ROLES.train, template="byo", reference=(), expected=None, db=str(db),
                 db_sha256=db_digest(db))
    calls, result, shown = _explore(probe, q.sql)
    query = ToolCall(name="run_sql", arguments={"query": q.sql})
    if env == "sql" and fits_one_answer(result, shown):
        answer = answer_text([[_shown(v)] for (v,) in result.rows])
        try:
            return verified(probe, [*calls, query, ToolCall(name="submit_answer", arguments={"answer": answer})])[0]
        except PlanRejected:
            pass  # e.g. values longer than run_sql shows whole: the whole result is the answer then
    scored = probe.model_copy(update={"env": EXEC_ENV, "expected": {"compare": compare},
                                      "id": task_id(db, q, occurrence, "set" if compare == "set" else "exec")})
    return verified(scored, [*calls, query, ToolCall(name="submit_query", arguments={"query": q.sql})])[0]


# ---- a whole file ---------------------------------------------------------------------------

def questions_to_tasks(db: str | Path | None, questions: str | Path, *, db_dir: str | Path | None = None,
                       split: str | None = None, env: str = "sql", compare: str = "multiset",
                       dedup: Dedup | None = None, similarity: float = DEFAULT_THRESHOLD,
                       roles: SplitRoles = ROLES) -> SynthReport:
    """A verified task for every usable row; every other row reported with its reason; duplicate
    groups reported (and dropped only under ``dedup``). See the module docstring."""
    questions = Path(questions)
    db = Path(db).resolve() if db is not None else None
    dir_ = Path(db_dir).resolve() if db_dir is not None else None
    if db is not None and not db.is_file():
        raise FileNotFoundError(f"database file {db} does not exist")
    if dir_ is not None and not dir_.is_dir():
        raise FileNotFoundError(f"database folder {dir_} does not exist")
    if not questions.is_file():
        raise FileNotFoundError(f"questions file {questions} does not exist")
    good, bad = read_questions(questions)
    good = with_splits(questions, good, split)
    order = {b.source: b.index for b in bad} | {r.source: r.index for r in good}
    rejected = [_bad(b) for b in bad]
    made: list[tuple[Row, Path, Task]] = []
    repeats: Counter[tuple] = Counter()
    for row in good:
        q = row.question
        try:
            path = database_of(row, questions, db, dir_)
        except FileNotFoundError as e:
            rejected.append(Rejection(reason="no_database", detail=str(e), source=row.source))
            continue
        # Keyed as task_id is (by the database's name): rows on two files of one name stay two tasks.
        key = (path.name, q.question, q.sql, q.evidence)
        try:
            task = question_task(path, q, env, compare, occurrence=repeats[key])
        except PlanRejected as e:
            rejected.append(Rejection(reason=e.reason, detail=e.detail, source=row.source, tier=sql_tier([q.sql])))
            continue
        finally:
            repeats[key] += 1
        made.append((row, path, task))
    groups = duplicates(made)
    if dedup is not None:
        made, dropped = drop_duplicates(made, dedup, similarity, roles)
        rejected += dropped
    rejected.sort(key=lambda r: order.get(r.source, -1))
    return SynthReport(tasks=[t for _, _, t in made], dropped=dict(Counter(r.reason for r in rejected)),
                       rejected=rejected, duplicates=groups)


# ---- duplicates -------------------------------------------------------------------------------

_SQL_QUOTED = re.compile(r"'(?:[^']|'')*'")


def normalize_sql(sql: str) -> str:
    """A gold query as grouping compares it: whitespace collapsed, a trailing ``;`` dropped, and
    case folded outside string literals (``'Lyon'`` and ``'lyon'`` stay different queries)."""
    parts, last = [], 0
    for m in _SQL_QUOTED.finditer(sql):
        parts += [sql[last:m.start()].casefold(), m.group()]
        last = m.end()
    parts.append(sql[last:].casefold())
    return " ".join("".join(parts).split()).rstrip(";").rstrip()


def duplicates(made: Iterable[tuple[Row, Path, Task]]) -> list[DuplicateGroup]:
    """Rows (on one database) with the same question, and rows with the same gold query."""
    made = list(made)
    same_question = duplicate_groups("question", (
        ((path, normalize_prompt(t.prompt)), normalize_prompt(t.prompt), r.source, t.split) for r, path, t in made))
    same_gold = duplicate_groups("gold_query", (
        ((path, normalize_sql(r.question.sql)), normalize_sql(r.question.sql), r.source, t.split)
        for r, path, t in made))
    return same_question + same_gold


def drop_duplicates(made: list[tuple[Row, Path, Task]], dedup: Dedup, similarity: float = DEFAULT_THRESHOLD,
                    roles: SplitRoles = ROLES) -> tuple[list[tuple[Row, Path, Task]], list[Rejection]]:
    """Keep one row per repeated question (``exact``; ``near``: also per gold query and per
    reworded question); rows outside the train split are looked at first, so the copy dropped is
    a training one where there is one. Returns (kept rows in file order, rejections)."""
    if dedup not in ("exact", "near"):
        raise ValueError(f"dedup must be exact or near, not {dedup!r}")
    questions: dict[tuple, str] = {}
    golds: dict[tuple, str] = {}
    near: dict[Path, Deduper] = {}
    kept, dropped = [], []
    for row, path, task in sorted(made, key=lambda m: m[2].split == roles.train):
        first = f"{row.source} ({task.split})"
        text_key, gold_key = (path, normalize_prompt(task.prompt)), (path, normalize_sql(row.question.sql))
        hit: tuple[str, str] | None = None
        if text_key in questions:
            hit = "duplicate", f"same question as {questions[text_key]}"
        elif dedup == "near" and gold_key in golds:
            hit = "duplicate", f"same gold query as {golds[gold_key]}"
        elif dedup == "near":
            hit = near.setdefault(path, Deduper(similarity)).check_prompt(task.prompt)
        if hit is not None:
            dropped.append(Rejection(reason=hit[0], detail=hit[1], source=row.source, tier=task.tier))
            continue
        questions[text_key] = first
        golds.setdefault(gold_key, first)
        # The Deduper names a similar earlier task by id: give it the row's source instead.
        near.setdefault(path, Deduper(similarity)).add(task.model_copy(update={"id": first}))
        kept.append((row, path, task))
    kept.sort(key=lambda m: m[0].index)
    return kept, dropped


__all__ = ["Dedup", "PlanRejected", "Question", "QuestionsError", "SqlEnv", "answer_text", "drop_duplicates",
           "duplicates", "fits_one_answer", "load_questions", "normalize_prompt", "normalize_sql", "question_task",
           "questions_to_tasks", "sql_tier", "tables_read", "task_id", "verified"]
