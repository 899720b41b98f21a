"""The template-retrieval baseline: the nearest training question's SQL, with the new question's
entities put in. No learning; it is what a model that memorised the training set can do at best.

    baseline = TemplateBaseline(db_path, train_items)
    guess = baseline.predict("How many patients live in Tartu?")   # Guess(sql, neighbour, ...)

How it works, and why it is a strong baseline rather than a straw man:

1. *Entities are masked before retrieval.* Every database value a question names (``Gazetteer``:
   all text columns, numbers and dates) is replaced by a token for the columns holding it, so
   "patients in Tartu" and "patients in Aarhus" are the same question to the retriever.
2. *Retrieval* is TF-IDF (sublinear term frequency, smoothed idf) over the masked words and word
   pairs, cosine similarity; pure Python.
3. *Filling.* Each literal of the retrieved SQL that equals a value the training question named
   (a whole string, a number, or a year inside a date string) is replaced by the new question's
   value of the same kind (columns in common), the i-th of its kind for the i-th: a template for
   ``city`` and ``diagnosis`` gets the new city and the new diagnosis.
4. *Execution-guided choice* among the ``TOP_K`` nearest: the first whose every entity slot was
   filled, that uses every entity the new question names, and whose SQL runs to a non-empty
   result; failing that, the first that runs; failing that, the nearest as filled.

Scoring runs the guess and the gold query in the project's SQL worker (``GuardedDb``, with a
deadline) and compares them with the project's execution comparison (``envs/sql/compare.py``).
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from benchmarks.text2sql.gazetteer import DATE, NUMBER, Gazetteer, Mention
from benchmarks.text2sql.structure import literals
from trajforge.envs.sql.compare import compare_results, gold_expected
from trajforge.envs.sqlguard import GuardedDb, QueryFailed

TOP_K = 10
TIMEOUT_S = 2.0
MAX_ROWS = 10_000
_WORD = re.compile(r"[a-z0-9_]+")


# ---- retrieval ----------------------------------------------------------------------------------

def masked_tokens(text: str, mentions: Sequence[Mention]) -> list[str]:
    """The question's words with each mention replaced by a token naming its kind, plus word pairs."""
    parts, last = [], 0
    for m in mentions:
        parts += [text[last:m.start].casefold(), f" {_slot_token(m)} "]
        last = m.end
    parts.append(text[last:].casefold())
    words = _WORD.findall("".join(parts))
    return words + [f"{a}+{b}" for a, b in zip(words, words[1:])]


def _slot_token(m: Mention) -> str:
    return "slot_" + "_".join(sorted(label.replace(".", "_") for label in m.labels))


class TfIdf:
    """Cosine similarity over sublinear TF-IDF vectors of token lists."""

    def __init__(self, docs: Sequence[Sequence[str]]):
        df = Counter(t for d in docs for t in set(d))
        self.idf = {t: math.log((1 + len(docs)) / (1 + n)) + 1 for t, n in df.items()}
        self.vectors = [self.vector(d) for d in docs]

    def vector(self, tokens: Sequence[str]) -> dict[str, float]:
        v = {t: (1 + math.log(c)) * self.idf.get(t, 0.0) for t, c in Counter(tokens).items()}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        return {t: x / norm for t, x in v.items()}

    def ranked(self, tokens: Sequence[str]) -> list[tuple[float, int]]:
        """(similarity, document index), most similar first (ties: the earlier document)."""
        q = self.vector(tokens)
        sims = [(sum(w * d.get(t, 0.0) for t, w in q.items()), i) for i, d in enumerate(self.vectors)]
        return sorted(sims, key=lambda s: (-s[0], s[1]))


# ---- filling ------------------------------------------------------------------------------------

class Filled(NamedTuple):
    sql: str
    complete: bool
    """Every literal that came from the training question's entities got a new value."""
    used: frozenset[int]
    """Indexes of the new question's mentions the SQL now uses."""


def _compatible(a: Mention, b: Mention) -> bool:
    return bool(a.labels & b.labels)


def _counterpart(old: Sequence[Mention], i: int, new: Sequence[Mention]) -> int | None:
    """The new mention standing where old mention ``i`` stood: the r-th of its kind for the r-th."""
    rank = sum(1 for m in old[:i] if _compatible(m, old[i]))
    same_kind = [j for j, m in enumerate(new) if _compatible(m, old[i])]
    return same_kind[rank] if rank < len(same_kind) else None


def _sql_text(value) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def fill(sql: str, old: Sequence[Mention], new: Sequence[Mention]) -> Filled:
    """``sql`` (a training question's gold query) with ``old``'s values replaced by ``new``'s."""
    out, last, complete, used = [], 0, True, set()
    for lit in literals(sql):
        replacement = None
        for i, m in enumerate(old):
            whole = (lit.quoted and m.labels not in (NUMBER,) and str(m.value) == lit.value) or (
                m.labels == NUMBER and _same_number(lit.value, m.value))
            inside = lit.quoted and m.labels in (NUMBER,) and re.search(rf"(?<!\d){re.escape(m.text)}(?!\d)", lit.value)
            if not (whole or inside):
                continue
            j = _counterpart(old, i, new)
            if j is None:
                complete = False
                break
            used.add(j)
            value = _sql_text(new[j].value) if new[j].labels in (NUMBER, DATE) else str(new[j].value)
            if inside and not whole:
                value = re.sub(rf"(?<!\d){re.escape(m.text)}(?!\d)", new[j].text, lit.value, count=1)
            replacement = "'" + value.replace("'", "''") + "'" if lit.quoted else value
            break
        if replacement is not None:
            out += [sql[last:lit.start], replacement]
            last = lit.end
    out.append(sql[last:])
    return Filled("".join(out), complete, frozenset(used))


def _same_number(text: str, value) -> bool:
    try:
        return float(text) == float(value)
    except ValueError:
        return False


# ---- the baseline -------------------------------------------------------------------------------

class Guess(NamedTuple):
    """What the baseline answers for one question, and how it got there."""

    sql: str
    neighbour: str
    """The training question whose SQL was used."""
    similarity: float
    complete: bool


class TemplateBaseline:
    """Nearest training question → its SQL with the new entities (see the module docstring)."""

    def __init__(self, db: Path, train: Sequence[tuple[str, str]]):
        self.db = Path(db)
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            self.gazetteer = Gazetteer.of_database(conn)
        finally:
            conn.close()
        self.train = list(train)
        self.mentions = [self.gazetteer.find(q) for q, _ in self.train]
        self.index = TfIdf([masked_tokens(q, m) for (q, _), m in zip(self.train, self.mentions)])
        self._guarded = GuardedDb(self.db)

    def close(self) -> None:
        self._guarded.close()

    def predict(self, question: str) -> Guess:
        new = self.gazetteer.find(question)
        entities = {j for j, m in enumerate(new) if m.labels not in (NUMBER, DATE)}
        ranked = self.index.ranked(masked_tokens(question, new))[:TOP_K]
        runs: Guess | None = None
        for sim, i in ranked:
            filled = fill(self.train[i][1], self.mentions[i], new)
            guess = Guess(filled.sql, self.train[i][0], round(sim, 4), filled.complete)
            result = self._run(filled.sql)
            if result is None:
                continue
            if filled.complete and entities <= filled.used and result.rows:
                return guess
            runs = runs or guess
        if runs is not None:
            return runs
        sim, i = ranked[0]
        filled = fill(self.train[i][1], self.mentions[i], new)
        return Guess(filled.sql, self.train[i][0], round(sim, 4), filled.complete)

    def _run(self, sql: str):
        try:
            return self._guarded.rows(sql, timeout_s=TIMEOUT_S, max_rows=MAX_ROWS)
        except (QueryFailed, sqlite3.Error):
            return None

    def correct(self, guess_sql: str, gold_sql: str) -> bool:
        """Whether the guess's result equals the gold result (the project's execution comparison)."""
        gold = self._run(gold_sql)
        got = self._run(guess_sql)
        if gold is None or got is None:
            return False
        return compare_results(gold_expected(gold, gold_sql), got).ok


__all__ = ["Filled", "Guess", "TemplateBaseline", "TfIdf", "fill", "masked_tokens"]
