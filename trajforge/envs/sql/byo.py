"""Bring your own SQLite database and questions: each gold query executed, its result the answer.

    trajforge synth --env sql --db shop.sqlite --questions questions.jsonl --out tasks.jsonl

``questions.jsonl`` holds one ``{"question": ..., "sql": ..., "split": "train"|"test"|"heldout"}``
per line (``split`` defaults to ``train``). For every line the gold SQL runs through a real
``SqlEnv`` on the file (read-only connection, the same authorizer and deadline an agent gets), and
the task's reference plan is what an agent would do: ``list_tables``, ``describe_table`` for each
table the query reads, ``run_sql(gold)``, ``submit_answer(result)``. The plan is then held to the
contract in ``tasks/verify.py`` (expected value read off the execution, replay accepted). The tier
comes from the query's structure (``tasks/tiering.py``).

A usable result is one value (one row, one column) or one column of rows (a list answer). Lines
that are not valid JSON, whose SQL fails or is not read-only, or whose result is empty, NULL,
multi-column or cut at the row cap are not dropped silently: each is a ``Rejection`` naming its
``file:line`` and why.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from trajforge.envs.sql.env import SqlEnv
from trajforge.envs.sql.results import read_result
from trajforge.schema import Split, Task, ToolCall
from trajforge.tasks.dedup import normalize_prompt
from trajforge.tasks.pool import Rejection, SynthReport
from trajforge.envs.sql.tiering import sql_tier
from trajforge.tasks.verify import PlanRejected, verified


class Question(BaseModel):
    """One line of a questions file."""

    model_config = ConfigDict(extra="forbid")

    question: str
    """What the user asks, shown verbatim to the model."""
    sql: str
    """Gold SQL whose result is the answer."""
    split: Split = "train"
    """Which split the task goes to."""


def load_questions(path: Path) -> tuple[list[tuple[int, Question]], list[Rejection]]:
    """``(line number, Question)`` for every good line, and a Rejection for every bad one."""
    good, bad = [], []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path.name}:{lineno}"
            try:
                q = Question.model_validate_json(line)
            except ValidationError as e:
                problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'line'}: {err['msg']}"
                                     for err in e.errors())
                bad.append(Rejection(reason="bad_line", detail=problems, source=where))
                continue
            if not q.question.strip() or not q.sql.strip():
                bad.append(Rejection(reason="bad_line", detail="empty question or sql",
                                     source=where))
                continue
            good.append((lineno, q))
    return good, bad


_LIST_SEPARATORS = re.compile(r",|;|\n|&|\band\b", re.I)


def answer_text(rows: list[list[str]]) -> str:
    """What the expert submits for a usable result (see ``SqlEnv.expected_outcome``)."""
    if len(rows) == 1:
        return rows[0][0]
    items = [r[0] for r in rows]
    # Items that contain a list separator would split apart; a JSON list keeps them whole.
    if any(_LIST_SEPARATORS.search(i) for i in items):
        return json.dumps(items)
    return ", ".join(items)


def tables_read(sql: str, tables: list[str]) -> list[str]:
    """The database tables a query mentions, in order of first mention."""
    text = re.sub(r"'(?:[^']|'')*'", "''", sql).casefold()
    found = []
    for m in re.finditer(r'"((?:[^"]|"")+)"|`([^`]+)`|\[([^\]]+)\]|([\w$]+)', text):
        name = next(g for g in m.groups() if g is not None).replace('""', '"')
        if name in tables and name not in found:
            found.append(name)
    return found


def _gold_result(probe: Task, sql: str) -> tuple[list[ToolCall], list[list[str]]]:
    """Explore the schema and run the gold query as an agent would; (calls, result rows)."""
    env = SqlEnv()
    try:
        env.reset(probe)
        listed = env.execute(ToolCall(name="list_tables"))
        tables = [t.strip().casefold() for t in listed.content.split(",")]
        calls = [ToolCall(name="list_tables")]
        for table in tables_read(sql, tables):
            calls.append(ToolCall(name="describe_table", arguments={"table": table}))
        query = ToolCall(name="run_sql", arguments={"query": sql})
        result = env.execute(query)
        if not result.ok:
            raise PlanRejected("sql_error", result.content.removeprefix("Error: "))
        last = env.last_result
        if last is None or not last.complete:
            raise PlanRejected("too_many_rows", f"the result has more rows than the {env.max_rows}"
                               " an agent is shown; the answer must fit in one result")
        rows = read_result(result.content)
    finally:
        env.close()
    if not rows or all(c == "NULL" for r in rows for c in r):
        raise PlanRejected("empty_result", "the query returned no rows or only NULL")
    if len(rows[0]) > 1:
        raise PlanRejected("multi_column", f"the query returns {len(rows[0])} columns; select only "
                           "the answer (one value, or one column for a list)")
    return [*calls, query], rows


def question_task(db: Path, q: Question) -> Task:
    """The verified Task for one question; PlanRejected with the reason otherwise."""
    key = json.dumps([db.name, q.question, q.sql])
    probe = Task(id=f"byo-{hashlib.sha1(key.encode()).hexdigest()[:10]}", env="sql",
                 prompt=q.question.strip(), tier=sql_tier([q.sql]), split=q.split, template="byo",
                 reference=(), expected=None, db=str(db))
    calls, rows = _gold_result(probe, q.sql)
    submit = ToolCall(name="submit_answer", arguments={"answer": answer_text(rows)})
    task, _ = verified(probe, [*calls, submit])
    return task


def questions_to_tasks(db: str | Path, questions: str | Path) -> SynthReport:
    """Verified tasks for every usable question; every other line reported with its reason."""
    db, questions = Path(db).resolve(), Path(questions)
    if not db.is_file():
        raise FileNotFoundError(f"database file {db} does not exist")
    if not questions.is_file():
        raise FileNotFoundError(f"questions file {questions} does not exist")
    good, rejected = load_questions(questions)
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for lineno, q in good:
        where = f"{questions.name}:{lineno}"
        text = normalize_prompt(q.question)
        if text in seen:
            rejected.append(Rejection(reason="duplicate", source=where,
                                      detail=f"same question as line {seen[text]}"))
            continue
        seen[text] = lineno
        try:
            tasks.append(question_task(db, q))
        except PlanRejected as e:
            rejected.append(Rejection(reason=e.reason, detail=e.detail, source=where,
                                      tier=sql_tier([q.sql])))
    rejected.sort(key=lambda r: int(r.source.rsplit(":", 1)[1]))
    return SynthReport(tasks=tasks, dropped=dict(Counter(r.reason for r in rejected)),
                       rejected=rejected)


__all__ = ["Question", "answer_text", "load_questions", "question_task", "questions_to_tasks",
           "tables_read"]
