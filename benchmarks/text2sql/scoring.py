"""Execution accuracy on the test questions, overall, by tier and by split kind, side by side.

    kinds = split_kinds(items)                          # test question → "seen" / "unseen" structure
    base = baseline_outcomes(db, items)                 # question → correct (the template baseline)
    agents = store_outcomes(store, tasks_path, items)   # policy → question → share of its episodes correct
    print(render(table(items, {"template baseline": base, **agents})))

A test question's *split kind* is ``seen`` when its SQL structure occurs in some training
question, else ``unseen``. Every column of a table is computed over the same questions (those
every column has); each cell is ``accuracy (correct/n)``, and a policy column also gives the
exact McNemar p-value of its difference from the first column over the same questions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from benchmarks.text2sql.baseline import TemplateBaseline
from benchmarks.text2sql.questions import Item

SEEN, UNSEEN = "seen", "unseen"
TIERS = ("easy", "medium", "hard")


def split_kinds(items: Sequence[Item], split: str = "test") -> dict[str, str]:
    """Question → ``seen`` / ``unseen`` (its structure in train or not), for ``split``'s questions."""
    train = {i.structure for i in items if i.split == "train"}
    return {i.question: SEEN if i.structure in train else UNSEEN for i in items if i.split == split}


def baseline_outcomes(db: Path, items: Sequence[Item], split: str = "test") -> dict[str, float]:
    """Question → 1.0 / 0.0: the template baseline's execution accuracy on ``split``."""
    baseline = TemplateBaseline(db, [(i.question, i.sql) for i in items if i.split == "train"])
    try:
        return {i.question: float(baseline.correct(baseline.predict(i.question).sql, i.sql))
                for i in items if i.split == split}
    finally:
        baseline.close()


def store_outcomes(store: Path, tasks: Path, items: Sequence[Item], split: str = "test") -> dict[str, dict[str, float]]:
    """Policy → question → share of its episodes that were correct, from an eval store (e.g.
    ``trajforge eval ... --store STORE``); questions matched through the task pool's prompts."""
    from trajforge.store import TrajectoryStore
    from trajforge.tasks.pool import read_tasks

    prompt_of = {t.id: t.prompt for t in read_tasks(tasks)}
    wanted = {i.question for i in items if i.split == split}
    tally: dict[str, dict[str, list[int]]] = {}
    for traj in TrajectoryStore(store).read():
        question = prompt_of.get(traj.task_id)
        if question not in wanted:
            continue
        correct = int(bool(traj.outcome and traj.outcome.correct))
        tally.setdefault(traj.policy, {}).setdefault(question, []).append(correct)
    return {p: {q: sum(v) / len(v) for q, v in qs.items()} for p, qs in sorted(tally.items())}


class Cell(NamedTuple):
    correct: float
    n: int

    def __str__(self) -> str:
        if not self.n:
            return "-"
        k = f"{self.correct:.0f}" if float(self.correct).is_integer() else f"{self.correct:.1f}"
        return f"{self.correct / self.n:.3f} ({k}/{self.n})"


class Table(NamedTuple):
    columns: list[str]
    rows: list[tuple[str, list[Cell]]]
    p_values: dict[str, float]
    """Column → exact McNemar p against the first column, over all questions of the table."""
    missing: dict[str, int]
    """Column → test questions it had no outcome for (left out of every column)."""


def table(items: Sequence[Item], columns: dict[str, dict[str, float]], split: str = "test") -> Table:
    """Accuracy per column: overall, per tier, per split kind, over the questions every column has."""
    kinds = split_kinds(items, split)
    tiers = {i.question: i.tier for i in items if i.split == split}
    missing = {name: sum(q not in out for q in kinds) for name, out in columns.items()}
    common = [q for q in kinds if all(q in out for out in columns.values())]
    groups = [("all", common)] + [(t, [q for q in common if tiers[q] == t]) for t in TIERS] + [
        (f"{k} structure", [q for q in common if kinds[q] == k]) for k in (SEEN, UNSEEN)]
    rows = [(label, [Cell(sum(out[q] for q in qs), len(qs)) for out in columns.values()]) for label, qs in groups]
    names = list(columns)
    first = columns[names[0]] if names else {}
    p_values = {n: mcnemar([first[q] for q in common], [columns[n][q] for q in common]) for n in names[1:]}
    return Table(names, rows, p_values, missing)


def mcnemar(a: Sequence[float], b: Sequence[float]) -> float:
    """Exact two-sided McNemar p-value of paired 0/1 outcomes (fractions rounded to 0/1)."""
    only_a = sum(1 for x, y in zip(a, b) if round(x) and not round(y))
    only_b = sum(1 for x, y in zip(a, b) if round(y) and not round(x))
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def render(t: Table) -> str:
    """The table as aligned text."""
    header = ["test questions", *t.columns]
    lines = [header] + [[label, *map(str, cells)] for label, cells in t.rows]
    widths = [max(len(r[i]) for r in lines) for i in range(len(header))]
    text = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    for name, p in t.p_values.items():
        text.append(f"{name} vs {t.columns[0]}: exact McNemar p = {p:.4f}")
    for name, n in t.missing.items():
        if n:
            text.append(f"note: {name} has no outcome for {n} test questions (left out of every column)")
    return "\n".join(text)


__all__ = ["SEEN", "UNSEEN", "Table", "baseline_outcomes", "mcnemar", "render", "split_kinds", "store_outcomes", "table"]
