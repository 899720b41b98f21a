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
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable

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


def merge_pools(base: list[Task], new: list[Task], threshold: float = DEFAULT_THRESHOLD
                ) -> tuple[list[Task], dict[str, int]]:
    """``base`` followed by the tasks of ``new`` that repeat nothing before them; drop counts.

    Ids must stay unique in a pool, so a task whose id is already present is a duplicate too.
    """
    dedup = Deduper(threshold)
    ids: set[str] = set()
    for task in base:
        dedup.add(task)
        ids.add(task.id)
    merged, dropped = list(base), {}
    for task in new:
        hit = (("duplicate", "") if task.id in ids else None) or dedup.check_prompt(task.prompt)
        if hit is None:
            hit = dedup.check_plan(task.env, task.reference, None)
        if hit is not None:
            dropped[hit[0]] = dropped.get(hit[0], 0) + 1
            continue
        dedup.add(task)
        ids.add(task.id)
        merged.append(task)
    return merged, dropped


__all__ = ["DEFAULT_THRESHOLD", "Deduper", "jaccard", "key_terms", "merge_pools", "normalize_prompt", "plan_key"]
