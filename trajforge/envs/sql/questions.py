"""Reading a user's questions file: JSONL lines or a Spider/BIRD-style JSON array, every row kept.

Two layouts, told apart by the first character of the file (``[``: a JSON array):

* JSONL, one object per line: ``{"question": ..., "sql": ..., "split"?: ..., "db"?: ...}``;
* a JSON array of objects, as Spider and BIRD ship them: the gold SQL under ``query`` (Spider;
  its parsed ``sql`` object is ignored) or ``SQL`` (BIRD), the database under ``db_id``, BIRD's
  ``evidence`` (shown to the agent with the question), and any other fields ignored.

A row's database: its ``db`` path (relative paths resolve against the questions file's folder),
else its ``db_id`` as ``DB_DIR/<db_id>/<db_id>.sqlite`` (``--db-dir``), else the one ``--db``. A
row's split: its own ``split`` field, else the ``--split`` given for the file; a file with rows
that have neither is refused (``QuestionsError``), since guessing would put a benchmark's dev
questions into training. Split labels are kept as given (``dev``, ``validation``, ...).

Rows that cannot be read are returned as ``(source, what is wrong)``, never dropped silently; a
row's source is ``file:line`` (JSONL) or ``file[index]`` (JSON, as the array indexes it).
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from trajforge.schema import Split

MAX_FILE_BYTES = 512 * 1024 * 1024
"""A questions file larger than this is refused before it is read (BIRD's train set is ~10 MB)."""
SQL_KEYS = ("sql", "query", "SQL")
"""Where a row's gold SQL may be: ours, Spider's, BIRD's (the first one that holds text)."""


class QuestionsError(ValueError):
    """The questions file as a whole cannot be used (missing splits, not JSON, too large)."""


class Question(BaseModel):
    """One row of a questions file."""

    model_config = ConfigDict(extra="ignore")

    question: str
    """What the user asks, shown verbatim to the model."""
    sql: str
    """Gold SQL whose result is the answer."""
    split: Split | None = None
    """Which split the task goes to (None: the file's ``--split``)."""
    db_id: str | None = None
    """Spider/BIRD database id: ``DB_DIR/<db_id>/<db_id>.sqlite``."""
    db: str | None = None
    """Path of the row's SQLite file (relative to the questions file)."""
    evidence: str = ""
    """BIRD's external knowledge, shown to the agent below the question."""

    @model_validator(mode="before")
    @classmethod
    def _gold_sql(cls, data: Any) -> Any:
        if isinstance(data, dict):
            text = next((data[k] for k in SQL_KEYS if isinstance(data.get(k), str)), None)
            data = {**data, "sql": text} if text is not None else {k: v for k, v in data.items() if k != "sql"}
        return data

    @field_validator("question", "sql", "evidence")
    @classmethod
    def _text(cls, value: str) -> str:
        return value.strip()

    @field_validator("split", mode="before")
    @classmethod
    def _label(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    @property
    def prompt(self) -> str:
        """What the agent is asked: the question, and the evidence where there is some."""
        return f"{self.question}\n\nEvidence: {self.evidence}" if self.evidence else self.question


class Row(NamedTuple):
    """One readable row and where it came from."""

    index: int
    """Position in the file (0-based), for keeping file order."""
    source: str
    """``file:line`` or ``file[index]``."""
    question: Question


class BadRow(NamedTuple):
    index: int
    source: str
    detail: str


def read_questions(path: str | Path) -> tuple[list[Row], list[BadRow]]:
    """Every readable row of a questions file, and every unreadable one with what is wrong."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise QuestionsError(f"{path} is {size / 2**20:.0f} MB; questions files up to "
                             f"{MAX_FILE_BYTES // 2**20} MB are read")
    raw = path.read_bytes()
    # A BOM (Windows editors write one) comes before the "[" that says the file is a JSON array.
    if raw.removeprefix(codecs.BOM_UTF8).lstrip()[:1] == b"[":
        return _json_rows(path, raw)
    return _jsonl_rows(path, raw)


def _jsonl_rows(path: Path, raw: bytes) -> tuple[list[Row], list[BadRow]]:
    good, bad = [], []
    for i, line in enumerate(raw.split(b"\n")):
        if not line.strip():
            continue
        source = f"{path.name}:{i + 1}"
        try:
            item: Any = json.loads(line)
        except (ValueError, RecursionError) as e:
            bad.append(BadRow(i, source, f"not JSON ({str(e)[:120]})"))
            continue
        _row(i, source, item, good, bad)
    return good, bad


def _json_rows(path: Path, raw: bytes) -> tuple[list[Row], list[BadRow]]:
    try:
        items = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise QuestionsError(f"{path} starts like a JSON array but is not JSON: {str(e)[:200]}") from None
    if not isinstance(items, list):
        raise QuestionsError(f"{path} is not a JSON array of questions")
    good: list[Row] = []
    bad: list[BadRow] = []
    for i, item in enumerate(items):
        _row(i, f"{path.name}[{i}]", item, good, bad)
    return good, bad


def _row(index: int, source: str, item: Any, good: list[Row], bad: list[BadRow]) -> None:
    if not isinstance(item, dict):
        bad.append(BadRow(index, source, f"a row must be an object, not {type(item).__name__}"))
        return
    try:
        q = Question.model_validate(item)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'row'}: {err['msg']}"
                             for err in e.errors(include_url=False))
        bad.append(BadRow(index, source, problems))
        return
    if not q.question or not q.sql:
        bad.append(BadRow(index, source, "empty question or sql"))
        return
    good.append(Row(index, source, q))


def with_splits(path: str | Path, rows: list[Row], split: str | None) -> list[Row]:
    """Every row with its split: its own, else ``split``; QuestionsError when rows have neither."""
    if split is not None:
        return [r._replace(question=r.question.model_copy(update={"split": r.question.split or split}))
                for r in rows]
    missing = [r for r in rows if r.question.split is None]
    if missing:
        raise QuestionsError(
            f"{Path(path).name}: {len(missing)} of {len(rows)} rows have no \"split\" field (the first: "
            f"{missing[0].source}); name the split of the file with --split NAME (a Spider or BIRD "
            "dev file: --split dev), or add \"split\" to every row")
    return rows


def database_of(row: Row, questions: Path, db: Path | None, db_dir: Path | None) -> Path:
    """The absolute path of the row's database (see the module docstring); FileNotFoundError
    naming what was looked for."""
    q = row.question
    if q.db:
        path = Path(q.db) if Path(q.db).is_absolute() else questions.resolve().parent / q.db
        where = f'its "db" {q.db!r} (relative to {questions.name})'
    elif q.db_id and db_dir is not None:
        path = db_dir / q.db_id / f"{q.db_id}.sqlite"
        where = f"db_id {q.db_id!r} under --db-dir"
    elif db is not None:
        path, where = db, "--db"
    elif q.db_id:
        raise FileNotFoundError(f"db_id {q.db_id!r} needs --db-dir (the folder holding "
                                "<db_id>/<db_id>.sqlite)")
    else:
        raise FileNotFoundError("the row names no database: give --db, or db_id with --db-dir")
    path = path.resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no database file {path} ({where})")
    return path


__all__ = ["BadRow", "MAX_FILE_BYTES", "Question", "QuestionsError", "Row", "SQL_KEYS", "database_of",
           "read_questions", "with_splits"]
