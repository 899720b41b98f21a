"""A run directory of real, graded SQL episodes with known flips, for report and viewer tests.

Every episode runs through the real harness and SQLite environment; only the policy is scripted
(the model boundary). Layout, as ``trajforge demo`` leaves it:

    run/eval_store/trajectories.jsonl   base and tuned on the same 12 held-out-like tasks
    run/train_store/trajectories.jsonl  expert on 4 other tasks
    run/train/sft/curves.jsonl          loss and in-training eval rows
    run/tasks.jsonl                     the task pool (must not be taken for a store)

base fails tasks 0-7 (task 0 with a ``<script>`` payload and no call, tasks 1-3 with a missing
argument, 4-7 with a repaired call then a wrong answer) and solves 8-11; tuned solves 0-9 and
submits a wrong answer on 10-11. So 8 tasks flip failed → solved and 2 solved → failed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import pytest

from trajforge.grade import graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies.base import TurnRequest
from trajforge.policies.expert import ExpertPolicy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.schema import Trajectory
from trajforge.store import TrajectoryStore
from trajforge.tasks import synthesize
from trajforge.tasks.pool import write_tasks

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
MISSING_ARG = '<tool_call>\n{"name": "run_sql", "arguments": {}}\n</tool_call>'
REPAIRED = '<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT 1"}\n</tool_call>'
WRONG = '<tool_call>\n{"name": "submit_answer", "arguments": {"answer": "not the answer"}}\n</tool_call>'


class RunFixture(NamedTuple):
    root: Path
    episodes: list[Trajectory]
    improved: list[str]
    regressed: list[str]


def _policy(name: str, script: dict[str, list[str]]) -> ScriptedPolicy:
    """Replies from ``script[task_id]`` turn by turn; tasks not in it get the expert's reference."""
    expert = ExpertPolicy()

    def reply(req: TurnRequest) -> str:
        lines = script.get(req.task.id)
        if lines is None:
            return expert.act([req])[0].text
        return lines[min(req.turn, len(lines) - 1)]

    return ScriptedPolicy(reply, name=name)


def build_run(root: Path) -> RunFixture:
    pool = synthesize("sql", 40, seed=0).tasks
    tasks, train = pool[:12], pool[12:16]
    ids = [t.id for t in tasks]
    base = {ids[0]: [XSS], **{i: [MISSING_ARG] for i in ids[1:4]}, **{i: [REPAIRED, WRONG] for i in ids[4:8]}}
    tuned = {i: [WRONG] for i in ids[10:12]}
    cfg = HarnessConfig(max_consecutive_errors=2)
    episodes = [graded(t) for t in run_episodes(tasks, _policy("base", base), cfg)]
    episodes += [graded(t) for t in run_episodes(tasks, _policy("tuned", tuned), cfg)]
    eval_store = TrajectoryStore(root / "eval_store")
    for t in episodes:
        eval_store.append(t)
    train_store = TrajectoryStore(root / "train_store")
    for t in run_episodes(train, ExpertPolicy()):
        train_store.append(graded(t))
    write_tasks(root / "tasks.jsonl", pool)
    curves = root / "train" / "sft" / "curves.jsonl"
    curves.parent.mkdir(parents=True)
    rows = [{"step": s, "loss": 2.0 / (1 + s), "lr": 1e-3} for s in range(1, 41)]
    rows += [{"step": s, "eval": {"completion": s / 40, "validity": 0.5 + s / 80, "avg_turns": 3 - s / 40}}
             for s in (10, 20, 30, 40)]
    curves.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return RunFixture(root, episodes, improved=ids[:8], regressed=ids[10:12])


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> RunFixture:
    return build_run(tmp_path_factory.mktemp("run"))
