"""``trajforge train sft|dpo|grpo``: the three recipes with one option style.

Common options: --model, --init-adapter (start from an earlier adapter, e.g. SFT before DPO or
GRPO), --out, --lr, --r, --batch-size, --max-steps, --seed, --checkpoint-every, --resume,
--eval-tasks/--eval-every (in-loop evaluation curves), --replay-share (general-data replay).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

console = Console()
app = typer.Typer(no_args_is_help=True, help="Training recipes: sft, dpo, grpo.")


def _fail(msg: str) -> None:
    console.print(f"[red]error:[/red] {msg}")
    raise typer.Exit(2)


def _evaluator(eval_tasks: Optional[Path], every: int, model: str, split: str):
    if not eval_tasks or not every:
        return None
    from trajforge.tasks.pool import read_tasks
    from trajforge.train.inloop import InLoopEval

    tasks = [t for t in read_tasks(eval_tasks) if t.split == split]
    if not tasks:
        _fail(f"no {split!r} tasks in {eval_tasks} for in-loop evaluation")
    return InLoopEval(tasks, model, every)


def _replay(model: str, share: float):
    if share <= 0:
        return None
    from trajforge.policies.hf import load_model
    from trajforge.policies.models import home, resolve
    from trajforge.train.replay import cached_replay, general_prompts

    net, tok = load_model(model)
    return cached_replay(resolve(model), net, tok, general_prompts()[0], home() / "replay")


def _trajectories(data: Path):
    from trajforge.store import TrajectoryStore

    trajs = TrajectoryStore(data).read()
    if not trajs:
        _fail(f"no trajectories in {data}")
    return trajs


@app.command("sft")
def sft(data: Path = typer.Option(..., help="store of graded trajectories"),
        model: str = typer.Option("smollm2-135m"), out: Path = typer.Option(...),
        epochs: float = 2.0, lr: float = 2e-4, r: int = 32, batch_size: int = 8, max_steps: int = -1,
        seed: int = 0, checkpoint_every: int = 0, resume: bool = False,
        eval_tasks: Optional[Path] = None, eval_every: int = 0, eval_split: str = "test",
        replay_share: float = typer.Option(
            0.3, help="share of self-distilled general-instruction samples mixed in against "
                      "forgetting (the base model's own answers to shipped prompts; 0 turns it off)")) -> None:
    """LoRA SFT on a store's successful trajectories (loss on assistant tokens only)."""
    from trajforge.train.sft import SFTConfig, train_sft

    cfg = SFTConfig(epochs=epochs, lr=lr, r=r, alpha=2 * r, batch_size=batch_size, max_steps=max_steps,
                    seed=seed, checkpoint_every=checkpoint_every, eval_every=eval_every,
                    replay_share=replay_share)
    try:
        res = train_sft(_trajectories(data), model, out, cfg, resume=resume,
                        evaluator=_evaluator(eval_tasks, eval_every, model, eval_split),
                        replay=_replay(model, replay_share))
    except ValueError as e:
        _fail(str(e))
    console.print(f"adapter saved to {res.adapter_dir}: {res.samples} samples, {res.steps} steps, "
                  f"{res.tokens} tokens in {res.seconds:.0f}s, final loss {res.losses[-1]:.3f}")


@app.command("dpo")
def dpo(data: Path = typer.Option(..., help="store with successes and failures of the same tasks"),
        model: str = typer.Option("smollm2-135m"), out: Path = typer.Option(...),
        init_adapter: Optional[Path] = typer.Option(None, help="adapter to start from (e.g. SFT)"),
        pairs: str = typer.Option("episode", help="episode | turn (first diverging turn)"),
        beta: float = 0.1, epochs: float = 1.0, lr: float = 5e-5, r: int = 32, batch_size: int = 4,
        max_steps: int = -1, seed: int = 0, checkpoint_every: int = 0, resume: bool = False,
        eval_tasks: Optional[Path] = None, eval_every: int = 0, eval_split: str = "test",
        replay_share: float = typer.Option(
            0.3, help="share of self-distilled general-instruction samples mixed in against "
                      "forgetting (the base model's own answers to shipped prompts; 0 turns it off)")) -> None:
    """DPO from preference pairs built out of graded trajectories."""
    from trajforge.train.dpo import DPOConfig, train_dpo

    if pairs not in ("episode", "turn"):
        _fail(f"--pairs must be 'episode' or 'turn', got {pairs!r}")
    cfg = DPOConfig(pairs=pairs, beta=beta, epochs=epochs, lr=lr, r=r, alpha=2 * r, batch_size=batch_size,
                    max_steps=max_steps, seed=seed, checkpoint_every=checkpoint_every,
                    eval_every=eval_every, replay_share=replay_share)
    try:
        res = train_dpo(_trajectories(data), model, out, cfg,
                        init_adapter=str(init_adapter) if init_adapter else None, resume=resume,
                        evaluator=_evaluator(eval_tasks, eval_every, model, eval_split),
                        replay=_replay(model, replay_share))
    except ValueError as e:
        _fail(str(e))
    console.print(f"adapter saved to {res.adapter_dir}: {res.pairs} pairs, {res.steps} steps in "
                  f"{res.seconds:.0f}s; loss {res.losses[0]:.3f} → {res.losses[-1]:.3f}, "
                  f"margin {res.margins[-1]:+.3f}; skipped {res.skipped}")


@app.command("grpo")
def grpo(tasks: Path = typer.Option(..., help="task pool to roll out on"), split: str = "train",
         model: str = typer.Option("smollm2-135m"), out: Path = typer.Option(...),
         init_adapter: Optional[Path] = typer.Option(None, help="adapter to start from (e.g. SFT)"),
         steps: int = 20, batch_size: int = 8, group_size: int = 4, temperature: float = 1.0,
         max_turns: int = 6, kl_beta: float = 0.0, lr: float = 5e-5, r: int = 32, seed: int = 0,
         curriculum: bool = True, guided: bool = False, checkpoint_every: int = 0,
         resume: bool = False, eval_tasks: Optional[Path] = None, eval_every: int = 0,
         eval_split: str = "test",
         max_minutes: float = typer.Option(0.0, help="time budget: stop before a step that would end "
                                                     "past it (0: none); the adapter is saved as usual"),
         rollout_server: Optional[str] = typer.Option(
             None, help="sample rollouts on this OpenAI-compatible server (vLLM with runtime LoRA "
                        "updates, or trajforge serve --allow-adapter-updates): http://HOST:PORT/v1")) -> None:
    """GRPO: sampled rollouts in the harness, group-relative advantages, loss on sampled tokens."""
    from trajforge.tasks.pool import read_tasks
    from trajforge.train.grpo import GRPOConfig, train_grpo
    from trajforge.train.rollout_server import RolloutServerError

    pool = [t for t in read_tasks(tasks) if t.split == split]
    if not pool:
        _fail(f"no {split!r} tasks in {tasks}")
    cfg = GRPOConfig(steps=steps, batch_size=batch_size, group_size=group_size, temperature=temperature,
                     max_turns=max_turns, kl_beta=kl_beta, lr=lr, r=r, alpha=2 * r, seed=seed,
                     curriculum=curriculum, guided=guided, checkpoint_every=checkpoint_every,
                     eval_every=eval_every, rollout_server=rollout_server, max_seconds=60 * max_minutes)
    try:
        res = train_grpo(pool, model, out, cfg, init_adapter=str(init_adapter) if init_adapter else None,
                         resume=resume, evaluator=_evaluator(eval_tasks, eval_every, model, eval_split))
    except (ValueError, RolloutServerError) as e:  # bad data, or the server refused the adapter
        _fail(str(e))
    stopped = f" (stopped early: {res.stopped})" if res.stopped else ""
    console.print(f"adapter saved to {res.adapter_dir}: {res.steps} steps in {res.seconds:.0f}s{stopped}; "
                  f"mean reward {res.rewards[0]:.3f} → {res.rewards[-1]:.3f}; rescue {res.rescue}")
