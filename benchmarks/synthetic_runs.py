"""Large, realistic stores for the report and viewer benchmarks (imported by report.py, viewer.py).

Real episodes first: five behaviours on verified SQL and travel tasks run through the harness and
are graded (expert successes; a missing argument → invalid_args / unknown_tool; prose without a
call → no_call; a repaired call then a wrong answer → wrong_answer; a recovered episode). Then a
store of any size is written by copying those episodes under new task ids, two policies per task
("base" solving ~35%, "tuned" ~75%), with generation times drawn like a CPU model's, so the sizes,
the text and the outcome mix of each line are those of real trajectories.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

MISSING_ARG = '<tool_call>\n{"name": "run_sql", "arguments": {}}\n</tool_call>'
REPAIRED = '<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT 1"}\n</tool_call>'
WRONG = '<tool_call>\n{"name": "submit_answer", "arguments": {"answer": "42"}}\n</tool_call>'
PROSE = "I think the answer is 42, but I am not sure which table holds it."


def behaviours(n_tasks: int = 24, seed: int = 0) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Graded episodes as JSON dicts, per task: ``{task_id: {"solved": [...], "failed": [...]}}``."""
    from trajforge.grade import graded
    from trajforge.harness import HarnessConfig, run_episodes
    from trajforge.policies.base import TurnRequest
    from trajforge.policies.expert import ExpertPolicy
    from trajforge.policies.scripted import ScriptedPolicy
    from trajforge.tasks import synthesize

    pool = synthesize("sql", n_tasks, seed=seed).tasks + synthesize("travel", n_tasks, seed=seed).tasks
    cfg = HarnessConfig(max_consecutive_errors=2)
    expert = ExpertPolicy()

    def recovering(req: TurnRequest) -> str:  # one bad turn, then the reference: graded "recovered"
        return MISSING_ARG if req.turn == 0 else expert.act([TurnRequest(req.task, req.messages, req.toolset,
                                                                         req.turn - 1)])[0].text

    runs = [run_episodes(pool, expert), run_episodes(pool, ScriptedPolicy(recovering), cfg),
            run_episodes(pool, ScriptedPolicy([MISSING_ARG]), cfg), run_episodes(pool, ScriptedPolicy([PROSE]), cfg),
            run_episodes(pool, ScriptedPolicy([REPAIRED, WRONG]), cfg)]
    out: dict[str, dict[str, list[dict[str, Any]]]] = {t.id: {"solved": [], "failed": []} for t in pool}
    for trajs in runs:
        for t in trajs:
            g = graded(t)
            if g.outcome.tier != "env_fault":
                out[g.task_id]["solved" if g.outcome.correct else "failed"].append(
                    json.loads(g.model_dump_json(exclude_none=True)))
    return {k: v for k, v in out.items() if v["solved"] and v["failed"]}


def write_store(root: Path, episodes: int, seed: int = 0) -> Path:
    """A store of ``episodes`` lines (half base, half tuned, same tasks); returns the shard."""
    rng = random.Random(seed)
    pools = behaviours(seed=seed)
    tasks = sorted(pools)
    root.mkdir(parents=True, exist_ok=True)
    path = root / "trajectories.jsonl"
    with open(path, "w") as f:
        for i in range(episodes // 2):
            task = pools[rng.choice(tasks)]
            for policy, p_solve in (("base", 0.35), ("tuned", 0.75)):
                src = rng.choice(task["solved"] if rng.random() < p_solve else task["failed"])
                rec = dict(src, task_id=f"{src['task_id']}-{i:05d}", policy=policy, split="heldout")
                rec["steps"] = [dict(s, gen_s=rng.lognormvariate(0, 0.5)) for s in src["steps"]]
                rec["wall_s"] = sum(s["gen_s"] + s.get("tool_s", 0.0) for s in rec["steps"])
                f.write(json.dumps(rec) + "\n")
    return path


def write_curves(path: Path, steps: int = 2000, eval_every: int = 50, seed: int = 0) -> Path:
    """A curves.jsonl as ``trajforge.train.curves`` writes it: a loss row per step, eval rows."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for s in range(1, steps + 1):
            f.write(json.dumps({"recipe": "sft", "step": s, "loss": 2.5 / (1 + s / 100) + rng.random() * 0.1,
                                "lr": 2e-4, "grad_norm": rng.random()}) + "\n")
            if s % eval_every == 0:
                done = s / steps
                f.write(json.dumps({"recipe": "sft", "step": s, "eval": {
                    "step": s, "n": 40, "completion": 0.1 + 0.6 * done, "validity": 0.5 + 0.5 * done,
                    "avg_turns": 4 - 2 * done, "avg_reward": 0.05 + 0.5 * done}}) + "\n")
    return path
