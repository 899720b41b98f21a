"""Imported conversations become real data: each one replayed in its environment.

    trajforge import-openai chats.jsonl --env sql --out store/ --execute --tasks pool.jsonl

    run = execute_imported(read_openai_jsonl("chats.jsonl", env="sql").trajectories, tasks)
    run.trajectories   # executed, ready for grade.graded and a store; run.skipped: the rest, by reason

An imported conversation (``export.from_openai``) holds what a model wrote and what some tool
answered, elsewhere: SFT skips it, since nothing in it was executed here. Executing keeps the
first and replaces the second. Each conversation is matched to the task its first user message
asks (a task of the pool whose prompt it is, or begins with), and its assistant turns are fed in
order to the real harness as a scripted policy: the environment executes every call, each result
the conversation continues with is the environment's, the episode is verified as any rollout is
(the model is shown the environment's own system prompt and the task's prompt). The trajectory
then grades like a collected one: the successes are SFT demonstrations, the failures
(``wrong_answer``, ``max_turns`` when the conversation ends before the final tool, ...) DPO
negatives.

What is not executed is reported by reason (``Skipped``): ``no_task`` (no task of the pool, in this
environment, asks the conversation's first user message), ``ambiguous_task`` (several tasks with
different answers do), ``no_turns`` (no assistant turn), ``env_fault`` (the environment failed to
start or crashed: nothing the conversation did). ``diverged`` counts the executed conversations in
which some result from the environment differs from the one in the file, i.e. the file's model saw
other results than its calls give here.

A replayed trajectory's ``sample`` is a hash of the task and the assistant turns, so importing a
file twice adds nothing new (a store collapses equal keys) while two different conversations of
one task stay two records.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from trajforge.harness import HarnessConfig, run_episodes
from trajforge.parse import get_dialect
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.schema import Task, Trajectory


class Skipped(NamedTuple):
    """An imported conversation that was not executed, and why."""

    source: str
    """The conversation's task id as imported (``file:line``)."""
    reason: str
    detail: str


class ExecutedImport(NamedTuple):
    trajectories: list[Trajectory]
    """Executed trajectories (ungraded; ``grade.graded`` them before storing)."""
    skipped: list[Skipped]
    diverged: int
    """Executed conversations whose environment results differ from the file's somewhere."""


def _normalized(text: str) -> str:
    return " ".join(text.split()).casefold()


class TaskIndex:
    """The tasks of a pool by the prompt a conversation's first user message states."""

    def __init__(self, tasks: Iterable[Task], env: str | None = None):
        self._by_prompt: dict[str, list[Task]] = {}
        for t in tasks:
            if env is None or t.env == env:
                self._by_prompt.setdefault(_normalized(t.prompt), []).append(t)

    def find(self, message: str) -> list[Task]:
        """Tasks whose prompt is the message, or the message up to a blank line (the harness puts
        the environment's first observation below the prompt); the longest such prompt wins."""
        cuts = [len(message)] + [i for i in range(len(message) - 1, 0, -1) if message.startswith("\n\n", i)]
        for cut in cuts:
            found = self._by_prompt.get(_normalized(message[:cut]))
            if found:
                return found
        return []


def execute_imported(trajs: Sequence[Trajectory], tasks: Iterable[Task], env: str | None = None,
                     policy: str | None = None) -> ExecutedImport:
    """Replay every imported conversation on its task (see the module docstring)."""
    index = TaskIndex(tasks, env)
    done: list[Trajectory] = []
    skipped: list[Skipped] = []
    diverged = 0
    for traj in trajs:
        task, why = _task_of(traj, index)
        if task is None:
            skipped.append(Skipped(traj.task_id, *why))
            continue
        try:
            new = replay(traj, task, policy or traj.policy)
        except Exception as e:  # noqa: BLE001 - an environment that cannot start: this conversation only
            skipped.append(Skipped(traj.task_id, "env_fault", f"{type(e).__name__}: {str(e)[:300]}"))
            continue
        if new.end == "env_fault" or any(r.fault for s in new.steps for r in s.results):
            # What failed: the tool's own message, else the harness's fault record (an
            # environment that could not start), else how the episode ended.
            fault = next((r.content for s in new.steps for r in s.results if r.fault), None)
            if fault is None:
                fault = next((f"{f.kind}: {f.message}" for f in reversed(new.faults)), new.end)
            skipped.append(Skipped(traj.task_id, "env_fault", fault))
            continue
        diverged += _diverged(traj, new)
        done.append(new)
    return ExecutedImport(done, skipped, diverged)


def _task_of(traj: Trajectory, index: TaskIndex) -> tuple[Task | None, tuple[str, str]]:
    if not traj.steps:
        return None, ("no_turns", "the conversation has no assistant turn")
    first = next((m.content for m in traj.messages if m.role == "user"), None)
    if first is None:
        return None, ("no_task", "the conversation has no user message")
    found = index.find(first)
    if not found:
        return None, ("no_task", f"no task of the pool asks {first[:80]!r}")
    answers = {json.dumps([t.env, t.db, t.expected], sort_keys=True, default=str) for t in found}
    if len(answers) > 1:
        return None, ("ambiguous_task", f"{len(found)} tasks with different answers ask it: "
                      + ", ".join(t.id for t in found[:5]))
    return found[0], ("", "")


def replay(traj: Trajectory, task: Task, policy: str) -> Trajectory:
    """One imported conversation's assistant turns, in order, run on ``task`` by the harness."""
    turns = [s.raw for s in traj.steps]
    scripted = ScriptedPolicy(turns, name=policy, dialect=get_dialect(traj.dialect))
    # Exactly the file's turns: no more, and none cut short by a run of errors.
    cfg = HarnessConfig(max_turns=len(turns), max_consecutive_errors=len(turns) + 1)
    [new] = run_episodes([task], scripted, cfg)
    for ours, theirs in zip(new.steps, traj.steps):
        ours.train = theirs.train  # a turn the file weighted 0 stays untrained once executed
    key = json.dumps([task.id, turns])
    new.sample = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) & 0x7FFFFFFF
    return new


def _diverged(imported: Trajectory, executed: Trajectory) -> bool:
    """Whether the environment answered a call differently than the file says it did (a call the
    file shows no result for, such as a conversation's last one, is not counted)."""
    said = [m.content for m in imported.messages if m.role == "tool" and m.tool_call_id is not None]
    got = [r.content for s in executed.steps for r in s.results]
    return any(a.strip() != b.strip() for a, b in zip(said, got))


__all__ = ["ExecutedImport", "Skipped", "TaskIndex", "execute_imported", "replay"]
