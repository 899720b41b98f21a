"""The benchmark on disk: the database, the questions in the BYO format, and the tasks made of them
by the bring-your-own path a user runs (``trajforge synth --env sql --questions ...``).

    report = build(Path("runs/text2sql"))    # hospital.sqlite, questions.jsonl, tasks.jsonl, rejected.jsonl

``questions.jsonl`` rows are ``{"question", "sql", "split", "db"}`` (the BYO format; ``db`` is
relative to the file) plus what the benchmark reports by — ``group``, ``family``, ``structure``,
``tier``, ``entities`` — which the BYO reader ignores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from benchmarks.text2sql.questions import Counts, Item, check, generate
from benchmarks.text2sql.world import build_db

DB_NAME = "hospital.sqlite"
QUESTIONS = "questions.jsonl"
TASKS = "tasks.jsonl"
REJECTED = "rejected.jsonl"


class BuildReport(NamedTuple):
    counts: Counts
    tasks: int
    rejected: list[dict]
    """Rows the BYO path did not make a task of, with their reasons (none expected)."""
    synth_output: str


def write_questions(path: Path, items: list[Item]) -> Path:
    path.write_text("".join(json.dumps(i.row()) + "\n" for i in items), encoding="utf-8")
    return path


def read_questions(path: Path) -> list[Item]:
    return [Item(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def build(out: Path, seed: int = 0, synth: bool = True) -> BuildReport:
    """Build everything under ``out``; ``synth=False`` stops before the tasks."""
    out.mkdir(parents=True, exist_ok=True)
    db = build_db(out / DB_NAME, seed)
    items = generate(db, seed, db_name=DB_NAME)
    counts = check(items, db)
    qfile = write_questions(out / QUESTIONS, items)
    if not synth:
        return BuildReport(counts, 0, [], "")
    return BuildReport(counts, *synth_tasks(db, qfile, out / TASKS, out / REJECTED))


def synth_tasks(db: Path, questions: Path, tasks: Path, rejected: Path) -> tuple[int, list[dict], str]:
    """Run ``trajforge synth`` on the questions, as a user would: (tasks written, rejections, its output)."""
    cmd = [sys.executable, "-m", "trajforge.cli.main", "synth", "--env", "sql", "--db", str(db),
           "--questions", str(questions), "--out", str(tasks), "--rejected", str(rejected)]
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"trajforge synth failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    n = sum(1 for line in tasks.read_text(encoding="utf-8").splitlines() if line.strip())
    bad = [json.loads(line) for line in rejected.read_text(encoding="utf-8").splitlines() if line.strip()]
    return n, bad, run.stdout


__all__ = ["BuildReport", "DB_NAME", "QUESTIONS", "REJECTED", "TASKS", "build", "read_questions", "synth_tasks",
           "write_questions"]
