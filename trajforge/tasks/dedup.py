"""Duplicate and near-duplicate tasks: normalized prompt text, token-set Jaccard, same plan.

A synthesized pool is only as useful as it is diverse: an LLM asked for fifty tasks happily
writes the same question five times in slightly different words. Three checks, cheapest first:

* ``duplicate``: the normalized prompt (casefolded, NFKC, punctuation dropped, whitespace
  collapsed) equals one already in the pool, or the reference plan does the same thing as one
  already there (same calls up to the final one: two wordings of one query are one task);
* ``near_duplicate``: token-set Jaccard similarity of the normalized prompts at or above the
  threshold *and* the same key terms (numbers, quoted strings, capitalized words inside a
  sentence). Similarity alone cannot tell a reworded copy from a different question about another
  entity: ``How many customers live in Lyon? Answer with a number.`` and the same about Berlin
  share 9 of 11 words (0.82) yet have different answers. Requiring the same entities keeps those
  apart, so the threshold can be low enough (0.7) to catch real rewordings.

A user's own questions are another matter: paraphrases of one question and different questions
sharing a gold query are what a text-to-SQL set is made of, and dropping test questions changes the
benchmark. For those, duplicates are *reported*, not dropped (``DuplicateGroup``: which rows share
a question or a gold query, and which groups cross splits, i.e. leak between them); they are
dropped only when asked (``synth --dedup exact|near``), train copies first.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Hashable, Iterable

from pydantic import BaseModel

from trajforge.schema import Task, ToolCall

DEFAULT_THRESHOLD = 0.7
"""Token-set Jaccard at or above which two prompts count as near-duplicates."""


def normalize_prompt(text: str) -> str:
    """Casefold, NFKC, punctuation to spaces, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


_KEY_TERM = re.compile(r"\d+(?:\.\d+)?|'[^']+'|\"[^\"]+\"|(?<![.?!:]\s)(?<!^)\b[A-Z][\w-]*")


def key_terms(text: str) -> frozenset[str]:
    """Numbers, quoted strings and capitalized words that don't start a sentence (entities)."""
    text = unicodedata.normalize("NFKC", text).strip()
    return frozenset(t.strip("'\"").casefold() for t in _KEY_TERM.findall(text))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|, 1.0 for two empty sets."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def plan_key(plan: Iterable[ToolCall], final_tool: str | None) -> str:
    """What a plan does, without its final call (whose argument is only the result restated)."""
    steps = [(c.name, c.arguments) for c in plan if c.name != final_tool]
    return json.dumps(steps, sort_keys=True, default=str)


class Deduper:
    """The prompts and plans already in a pool; ``check`` says whether a candidate repeats one."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD):
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"similarity threshold must be in (0, 1], got {threshold}")
        self.threshold = threshold
        self._texts: dict[str, str] = {}  # normalized prompt -> task id
        self._plans: dict[str, str] = {}  # plan key -> task id
        self._tokens: list[tuple[frozenset[str], frozenset[str], str]] = []

    def add(self, task: Task, final_tool: str | None = None) -> None:
        text = normalize_prompt(task.prompt)
        self._texts.setdefault(text, task.id)
        if task.reference and any(c.name != final_tool for c in task.reference):
            self._plans.setdefault(f"{task.env}:{plan_key(task.reference, final_tool)}", task.id)
        self._tokens.append((frozenset(text.split()), key_terms(task.prompt), task.id))

    def check_prompt(self, prompt: str) -> tuple[str, str] | None:
        """``(reason, detail)`` when the prompt repeats a pool prompt, else None."""
        text = normalize_prompt(prompt)
        if text in self._texts:
            return "duplicate", f"same prompt as {self._texts[text]}"
        tokens, terms = frozenset(text.split()), key_terms(prompt)
        best, best_id = 0.0, ""
        for other, other_terms, tid in self._tokens:
            if other_terms != terms:
                continue
            sim = jaccard(tokens, other)
            if sim > best:
                best, best_id = sim, tid
        if best >= self.threshold:
            return "near_duplicate", f"similarity {best:.2f} to {best_id} (threshold {self.threshold})"
        return None

    def check_plan(self, env: str, plan: Iterable[ToolCall], final_tool: str | None
                   ) -> tuple[str, str] | None:
        """``("duplicate", detail)`` when another task already runs the same calls."""
        key = f"{env}:{plan_key(plan, final_tool)}"
        if key in self._plans:
            return "duplicate", f"same reference plan as {self._plans[key]}"
        return None


def merge_pools(base: list[Task], new: list[Task], threshold: float = DEFAULT_THRESHOLD,
                dedup_text: bool = True) -> tuple[list[Task], dict[str, int]]:
    """``base`` followed by the tasks of ``new`` that repeat nothing before them; drop counts.

    Ids must stay unique in a pool, so a task whose id is already present is a duplicate too; that
    is the only check when ``dedup_text`` is False (a user's own questions, see the module doc).
    """
    dedup = Deduper(threshold)
    ids: set[str] = set()
    for task in base:
        dedup.add(task)
        ids.add(task.id)
    merged, dropped = list(base), {}
    for task in new:
        hit = ("duplicate", "") if task.id in ids else None
        if hit is None and dedup_text:
            hit = dedup.check_prompt(task.prompt) or dedup.check_plan(task.env, task.reference, None)
        if hit is not None:
            dropped[hit[0]] = dropped.get(hit[0], 0) + 1
            continue
        dedup.add(task)
        ids.add(task.id)
        merged.append(task)
    return merged, dropped


# ---- reporting duplicates instead of dropping them ---------------------------------------------

class DuplicateGroup(BaseModel):
    """Rows that share one thing (a question, a gold query): reported, kept unless asked."""

    kind: str
    """What they share: ``question`` (the same normalized text) or ``gold_query``."""
    shared: str
    """The shared text (normalized, clipped to 200 characters)."""
    sources: list[str]
    """Where each row came from (``dev.json[12]``, ``q.jsonl:3``), in file order."""
    splits: list[str]
    """Each row's split, aligned with ``sources``."""

    @property
    def leaks(self) -> bool:
        """The group crosses splits: a model trained on one copy is tested on another."""
        return len(set(self.splits)) > 1


def duplicate_groups(kind: str, rows: Iterable[tuple[Hashable, str, str, str]]) -> list[DuplicateGroup]:
    """Groups of two or more rows with the same key; ``rows`` are ``(key, shown text, source,
    split)``, in file order."""
    found: dict[Hashable, DuplicateGroup] = {}
    for key, text, source, split in rows:
        group = found.setdefault(key, DuplicateGroup(kind=kind, shared=text[:200], sources=[], splits=[]))
        group.sources.append(source)
        group.splits.append(split)
    return [g for g in found.values() if len(g.sources) > 1]


def leakage(groups: Iterable[DuplicateGroup]) -> dict[str, int]:
    """Groups that cross splits, counted per pair of splits (``{"dev/train": 3}``)."""
    pairs: Counter[str] = Counter()
    for g in groups:
        labels = sorted(set(g.splits))
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                pairs[f"{a}/{b}"] += 1
    return dict(sorted(pairs.items()))


__all__ = ["DEFAULT_THRESHOLD", "Deduper", "DuplicateGroup", "duplicate_groups", "jaccard", "key_terms",
           "leakage", "merge_pools", "normalize_prompt", "plan_key"]
