"""Split checks on any task pool: which tool combinations each split uses, and held-out leaks; and
which split plays which part.

Split labels are free text (``Task.split``): ``train``, ``test`` and ``heldout`` are what the
generators write, and a user's own labels (``dev``, ``validation``) are kept as given. What a label
is *for* is chosen by name where it is used, with these defaults (``SplitRoles``):

==========  ===========  ======================================================================
role        default      where
==========  ===========  ======================================================================
train       ``train``    ``collect --split``, ``train grpo --split``: what the model learns from
evaluate    ``test``     ``train sft|dpo|grpo --eval-split``: evaluation while training
heldout     ``heldout``  ``eval --split``: the final, held-out comparison
==========  ===========  ======================================================================

Any other label (``dev``, ``validation``) is its own split until a command is given it
(``eval --split dev``); nothing is dropped or renamed for its label.

A task's *tool combination* is the set of tool names in its reference solution. A generator can
hold out *groups* of tools that must never be used together outside ``heldout`` (travel holds out
``get_weather`` + ``book_hotel``): a train or test task whose combination contains a held-out
group is a leak, and the model would have seen at training time what the held-out split claims
to test. Works for any environment's tasks (the combination is read off ``task.reference``).

    report = combo_report(tasks, groups)     # counts per split, held-out-only combos, leaks
    kept, n = drop_combo_leaks(tasks, groups)  # enforce: remove leaking train/test tasks
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from trajforge.schema import Split, Task

ToolGroup = frozenset[str]


class SplitRoles(BaseModel):
    """Which split label plays which part (see the module docstring); labels not named here are
    their own split until a command is given them."""

    train: str = "train"
    """What the model learns from."""
    evaluate: str = "test"
    """What is evaluated while training."""
    heldout: str = "heldout"
    """What the final comparison reports."""


ROLES = SplitRoles()
"""The default roles."""


def tool_combo(task: Task) -> frozenset[str]:
    """The set of tools the task's reference solution uses."""
    return frozenset(c.name for c in task.reference)


def combo_key(combo: Iterable[str]) -> str:
    """A readable, stable name for a combination: sorted tool names joined by ``+``."""
    return "+".join(sorted(combo))


def leaks(combo: frozenset[str], groups: Iterable[ToolGroup]) -> bool:
    """Whether ``combo`` uses every tool of some held-out group."""
    return any(group <= combo for group in groups)


class ComboReport(BaseModel):
    """Tool combinations per split and what crosses the held-out line."""

    counts: dict[str, dict[str, int]] = Field(default_factory=dict)
    """``{split: {combo_key: tasks}}``."""
    heldout_only: list[str] = Field(default_factory=list)
    """Combinations used in ``heldout`` and never in ``train`` or ``test`` (the unseen ones)."""
    shared: list[str] = Field(default_factory=list)
    """Combinations used in ``heldout`` and also in ``train`` or ``test``."""
    leaks: list[str] = Field(default_factory=list)
    """Ids of train/test tasks whose combination contains a held-out group."""

    @property
    def ok(self) -> bool:
        return not self.leaks


def combo_report(tasks: Sequence[Task], groups: Iterable[ToolGroup] = ()) -> ComboReport:
    """Count combinations per split; list held-out-only and shared ones, and leaks of ``groups``."""
    groups = [frozenset(g) for g in groups]
    per_split: dict[Split, Counter[frozenset[str]]] = {}
    for task in tasks:
        per_split.setdefault(task.split, Counter())[tool_combo(task)] += 1
    seen = set(per_split.get("train", Counter())) | set(per_split.get("test", Counter()))
    held = set(per_split.get("heldout", Counter()))
    return ComboReport(
        counts={split: {combo_key(c): n for c, n in sorted(counter.items(),
                                                            key=lambda kv: combo_key(kv[0]))}
                for split, counter in per_split.items()},
        heldout_only=sorted(combo_key(c) for c in held - seen),
        shared=sorted(combo_key(c) for c in held & seen),
        leaks=[t.id for t in tasks if t.split != "heldout" and leaks(tool_combo(t), groups)],
    )


def drop_combo_leaks(tasks: Sequence[Task], groups: Iterable[ToolGroup]) -> tuple[list[Task], int]:
    """Remove train/test tasks that use a held-out group; returns (kept tasks, how many dropped)."""
    groups = [frozenset(g) for g in groups]
    kept = [t for t in tasks if t.split == "heldout" or not leaks(tool_combo(t), groups)]
    return kept, len(tasks) - len(kept)


__all__ = ["ComboReport", "ToolGroup", "combo_key", "combo_report", "drop_combo_leaks", "leaks",
           "tool_combo"]
