"""Evaluation during training: every N steps, a fixed task set runs in the real harness.

The model being trained acts through an ``HFPolicy`` built on the in-memory weights (greedy, the
same dialect and renderer as ``trajforge eval``), and the graded episodes are summarised with the
very metric definitions ``eval`` uses (grade/metrics.py). The numbers land in the run's curves.
"""

from __future__ import annotations

from typing import Any

from trajforge.grade import graded
from trajforge.grade.metrics import summarize
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.schema import Task


class InLoopEval:
    def __init__(self, tasks: list[Task], model_name: str, every: int, dialect=None,
                 harness: HarnessConfig | None = None, batch_size: int = 48, render_mode: str = "dialect"):
        self.tasks, self.model_name, self.every = tasks, model_name, every
        self.dialect, self.harness, self.batch_size = dialect, harness or HarnessConfig(), batch_size
        self.render_mode = render_mode
        self.history: list[dict[str, Any]] = []

    def run(self, net, tokenizer, step: int) -> dict[str, Any]:
        from trajforge.policies.hf import HFPolicy

        policy = HFPolicy(self.model_name, name=f"step-{step}", loaded=(net, tokenizer),
                          dialect=self.dialect, batch_size=self.batch_size, render_mode=self.render_mode)
        trajs = [graded(t) for t in run_episodes(self.tasks, policy, self.harness)]
        s = summarize(trajs)
        metrics = {"step": step, "n": s["n"], "completion": s["completion"], "validity": s["validity"],
                   "avg_turns": s["avg_turns"], "avg_reward": s["avg_reward"]}
        self.history.append(metrics)
        return metrics

    def hook(self, net, tokenizer):
        """An ``on_step`` callback for ``trainer.fit``: evaluates every ``every`` steps."""
        def on_step(step: int):
            if self.every and step % self.every == 0:
                return self.run(net, tokenizer, step)
            return None
        return on_step
