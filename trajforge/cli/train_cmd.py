"""``trajforge train sft|dpo|grpo``: the three recipes, their options generated from their configs.

Every field of ``SFTConfig`` / ``DPOConfig`` / ``GRPOConfig`` (``train/settings.py`` and the
recipe modules) is an option with the config's default (``cli/options.py``), and
``--config FILE.toml`` reads them from a file. Hardware: ``--device``, ``--batch-size``
(per device) × ``--grad-accum`` × processes = the batch of one optimizer step,
``--gradient-checkpointing/--no-gradient-checkpointing``, ``--max-len``, ``--load-in-4bit``
(QLoRA, CUDA). Several processes: ``--processes N [--distributed ddp|zero2|zero3|fsdp]``
relaunches the command under ``accelerate launch`` (GPUs) or ``torch.distributed.run`` (CPUs), or
start it yourself with ``accelerate launch ... -m trajforge.cli.main train sft ...``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from trajforge.cli.options import Options, with_configs
from trajforge.cli.rewards import MILESTONE_BONUS, REWARD_WEIGHTS, with_reward_flags
from trajforge.cli.spread import without_options
from trajforge.cli.targets import refuse_target
from trajforge.train.dpo_online import OnlineDPOConfig
from trajforge.train.grpo import GRPOConfig
from trajforge.train.rft import RFTConfig
from trajforge.train.sft import SFTConfig

console = Console()
app = typer.Typer(no_args_is_help=True, help="Training recipes: sft, dpo, grpo, rft.")

# Spelled as other options: --max-minutes (max_seconds), --load-in-4bit/--load-in-8bit (load_in).
HIDDEN = ("max_seconds", "load_in")


def _fail(msg: str) -> None:
    console.print(f"[red]error:[/red] {msg}")
    raise typer.Exit(2)


def _split_pool(tasks: Path, split: str) -> list:
    """The pool's ``split`` tasks, or a clear error naming the splits it has (``eval``'s reader)."""
    from trajforge.cli.main import _load_tasks

    return _load_tasks(tasks, split)


def _evaluator(eval_tasks: Optional[Path], every: int, model: str, split: str):
    if not eval_tasks or not every:
        return None
    from trajforge.train.inloop import InLoopEval

    return InLoopEval(_split_pool(eval_tasks, split), model, every)


def _trajectories(data: Path):
    from trajforge.store import TrajectoryStore

    trajs = TrajectoryStore(data).read()
    if not trajs:
        _fail(f"no trajectories in {data}")
    return trajs


def _hardware(cfg, load_in_4bit: bool, load_in_8bit: bool, max_minutes: float):
    """Apply the flags that are spelled differently from their config fields."""
    if load_in_4bit and load_in_8bit:
        _fail("--load-in-4bit and --load-in-8bit exclude each other")
    if max_minutes < 0:  # else a budget spent before the run began (rft), or none at all (the others)
        _fail(f"--max-minutes must be 0 (no limit) or more, not {max_minutes:g}")
    update = {}
    if load_in_4bit or load_in_8bit:
        update["load_in"] = "4bit" if load_in_4bit else "8bit"
    if max_minutes:
        update["max_seconds"] = 60 * max_minutes
    return cfg.model_copy(update=update) if update else cfg


def _launch(processes: int, cfg, out: Path, model: str) -> None:
    """With ``--processes N`` (N > 1) outside a launched run: run this very command in N processes."""
    refuse_target(out, "--out", kind="folder")  # every recipe's first step: an adapter folder never goes into a store
    from trajforge.policies.models import resolve
    from trajforge.train.distributed import launched, relaunch

    if processes <= 1 or launched():
        return
    argv = without_options(sys.argv[1:], valued=("--processes",))
    try:
        code = relaunch(argv, processes, cfg.distributed, cfg, out, resolve(model))
    except ValueError as e:
        _fail(str(e))
    raise typer.Exit(code)


def _guard(fn):
    """Run a recipe, turning the errors a user can fix into a one-line message."""
    from trajforge.policies.devices import DeviceUnavailable
    from trajforge.policies.loading import QuantizationUnavailable
    from trajforge.train.rollout_server import RolloutServerError

    try:
        return fn()
    except (ValueError, DeviceUnavailable, QuantizationUnavailable, RolloutServerError) as e:
        _fail(str(e))
    except OSError as e:  # a --model that is no local folder, embedded name or reachable hub id (its
        # message says so); a disk that filled up says that instead
        _fail(str(e))


PROCESSES = typer.Option(1, min=1, help="processes to train in (GPUs, or CPU processes over gloo); relaunches "
                                 "the command under accelerate / torch.distributed")
FOUR_BIT = typer.Option(False, "--load-in-4bit", help="QLoRA: the frozen base in 4-bit NF4 (CUDA + bitsandbytes)")
EIGHT_BIT = typer.Option(False, "--load-in-8bit", help="the frozen base in 8-bit (CUDA + bitsandbytes)")
MAX_MINUTES = typer.Option(0.0, help="time budget: stop before a step that would end past it (0: none); "
                                     "the adapter is saved as usual")


@app.command("sft")
@with_configs(config_file=True, cfg=Options(SFTConfig, exclude=HIDDEN))
def sft(cfg: SFTConfig = None, data: Path = typer.Option(..., help="store of graded trajectories"),
        model: str = typer.Option("smollm2-135m"), out: Path = typer.Option(...), resume: bool = False,
        eval_tasks: Optional[Path] = None, eval_split: str = "test", processes: int = PROCESSES,
        load_in_4bit: bool = FOUR_BIT, load_in_8bit: bool = EIGHT_BIT, max_minutes: float = MAX_MINUTES) -> None:
    """LoRA SFT on a store's successful trajectories (loss on assistant tokens only)."""
    from trajforge.train.sft import train_sft

    cfg = _hardware(cfg, load_in_4bit, load_in_8bit, max_minutes)
    _launch(processes, _settled(cfg, data, model, processes), out, model)
    res = _guard(lambda: train_sft(_trajectories(data), model, out, cfg, resume=resume,
                                   evaluator=_evaluator(eval_tasks, cfg.eval_every, model, eval_split)))
    skipped = f"; skipped {res.skipped}" if res.skipped else ""
    lr_note, batch_note = (" (derived)" if value is None else "" for value in (cfg.lr, cfg.grad_accum))
    console.print(f"adapter saved to {res.adapter_dir}: {res.samples} samples, {res.steps} steps at lr "
                  f"{res.lr:.2g}{lr_note}, effective batch {res.effective_batch}{batch_note}, {res.tokens} tokens in "
                  f"{res.seconds:.0f}s, final loss {res.losses[-1]:.3f}, peak memory {res.peak_memory_gb:.2f} GB{skipped}")


def _settled(cfg: SFTConfig, data: Path, model: str, processes: int) -> SFTConfig:
    """Before a relaunch, SFT's derived settings made concrete (train/defaults.py): the DeepSpeed
    config written for the processes needs the accumulation. Each process derives the same values
    again from the same store and model, and records why in the adapter."""
    from trajforge.train.distributed import launched
    from trajforge.train.defaults import MICRO_BATCH_FALLBACK

    if processes <= 1 or launched():
        return cfg
    if cfg.batch_size is None and cfg.distributed != "ddp":  # the DeepSpeed config fixes the micro-batch
        # before the processes see their devices: the plan cannot size it (DDP processes settle their own)
        cfg = cfg.model_copy(update={"batch_size": MICRO_BATCH_FALLBACK})
    if None not in (cfg.lr, cfg.grad_accum, cfg.epochs) or cfg.batch_size is None:
        return cfg
    from trajforge.policies.models import resolve
    from trajforge.train.defaults import derive, model_params
    from trajforge.train.sft import select

    demonstrations, _ = select(_trajectories(data), cfg)
    return derive(cfg, model_params(resolve(model)), len(demonstrations), processes)[0]


@app.command("dpo")
@with_configs(config_file=True, cfg=Options(OnlineDPOConfig, exclude=HIDDEN))
def dpo(cfg: OnlineDPOConfig = None,
        data: Path = typer.Option(..., help="store with successes and failures of the same tasks (with --tasks: "
                                            "the expert episodes for tasks no attempt solves)"),
        model: str = typer.Option("smollm2-135m"), out: Path = typer.Option(...),
        init_adapter: Optional[Path] = typer.Option(None, help="adapter to start from (e.g. SFT)"),
        tasks: Optional[Path] = typer.Option(None, help="online DPO: sample the pairs from the policy on this pool's "
                                                        "--split tasks, afresh each of --rounds rounds"),
        split: str = "train",
        resume: bool = False, eval_tasks: Optional[Path] = None, eval_split: str = "test",
        processes: int = PROCESSES, load_in_4bit: bool = FOUR_BIT, load_in_8bit: bool = EIGHT_BIT,
        max_minutes: float = MAX_MINUTES) -> None:
    """DPO from preference pairs built out of graded trajectories; with --tasks, online DPO in rounds."""
    from trajforge.train.dpo import train_dpo

    cfg = _hardware(cfg, load_in_4bit, load_in_8bit, max_minutes)
    if tasks is not None:
        if resume or eval_tasks:
            _fail("--resume and --eval-tasks are offline DPO's; with --tasks a rerun in the same --out resumes the "
                  "sampling by itself (the rounds train again), and `trajforge eval` scores the adapter")
        return _dpo_online(cfg, tasks, split, data, model, out, init_adapter, processes)
    _launch(processes, cfg, out, model)
    res = _guard(lambda: train_dpo(_trajectories(data), model, out, cfg.offline(),
                                   init_adapter=str(init_adapter) if init_adapter else None, resume=resume,
                                   evaluator=_evaluator(eval_tasks, cfg.eval_every, model, eval_split)))
    console.print(f"adapter saved to {res.adapter_dir}: {res.pairs} pairs, {res.steps} steps in "
                  f"{res.seconds:.0f}s; loss {res.losses[0]:.3f} → {res.losses[-1]:.3f}, "
                  f"margin {res.margins[-1]:+.3f}; skipped {res.skipped}")


def _dpo_online(cfg: OnlineDPOConfig, tasks: Path, split: str, data: Path, model: str, out: Path,
                init_adapter: Optional[Path], processes: int) -> None:
    from trajforge.train.dpo_online import train_dpo_online

    refuse_target(out, "--out", kind="folder")
    if processes > 1:
        _fail("online DPO (--tasks) runs in one process: its rounds sample in the harness between trainings")
    pool = _split_pool(tasks, split)
    res = _guard(lambda: train_dpo_online(pool, _trajectories(data), model, out, cfg,
                                          init_adapter=str(init_adapter) if init_adapter else None))
    for r in res.rounds[1:]:
        trained = f"{r.dpo.steps} DPO steps on {r.pairs} pairs" if r.dpo else "no pairs: adapter kept"
        console.print(f"round {r.round}: {r.sampled} attempts, {r.solved} solved; {trained}")
    console.print(f"adapter saved to {res.adapter_dir} after {len(res.rounds) - 1} round(s), {res.steps} steps "
                  f"in {res.seconds:.0f}s")


@app.command("grpo")
@with_configs(config_file=True, cfg=Options(GRPOConfig, exclude=HIDDEN + ("explore", "rewards"), file_only=("rewards",)))
def grpo(cfg: GRPOConfig = None, tasks: Path = typer.Option(..., help="task pool to roll out on"), split: str = "train",
         model: str = typer.Option("smollm2-135m"), out: Path = typer.Option(...),
         init_adapter: Optional[Path] = typer.Option(None, help="adapter to start from (e.g. SFT)"),
         resume: bool = False, eval_tasks: Optional[Path] = None, eval_split: str = "test",
         processes: int = PROCESSES, load_in_4bit: bool = FOUR_BIT, load_in_8bit: bool = EIGHT_BIT,
         max_minutes: float = MAX_MINUTES, reward_weights: list[str] = REWARD_WEIGHTS,
         milestone_bonus: list[str] = MILESTONE_BONUS) -> None:
    """GRPO: sampled rollouts in the harness, group-relative advantages, loss on sampled tokens."""
    from trajforge.train.grpo import train_grpo

    pool = _split_pool(tasks, split)
    cfg = _hardware(cfg, load_in_4bit, load_in_8bit, max_minutes)
    cfg = cfg.model_copy(update={"rewards": with_reward_flags(cfg.rewards, reward_weights, milestone_bonus)})
    _launch(processes, cfg, out, model)
    res = _guard(lambda: train_grpo(pool, model, out, cfg, init_adapter=str(init_adapter) if init_adapter else None,
                                    resume=resume, evaluator=_evaluator(eval_tasks, cfg.eval_every, model, eval_split)))
    stopped = f" (stopped early: {res.stopped})" if res.stopped else ""
    console.print(f"adapter saved to {res.adapter_dir}: {res.steps} steps in {res.seconds:.0f}s{stopped}; "
                  f"mean reward {res.rewards[0]:.3f} → {res.rewards[-1]:.3f}; rescue {res.rescue}")


@app.command("rft")
@with_configs(config_file=True, cfg=Options(RFTConfig, exclude=HIDDEN))
def rft(cfg: RFTConfig = None, tasks: Path = typer.Option(..., help="task pool whose training tasks are attempted"),
        data: Path = typer.Option(..., help="store of expert demonstrations every round trains on"),
        split: str = "train", model: str = typer.Option("smollm2-135m"), out: Path = typer.Option(...),
        init_adapter: Optional[Path] = typer.Option(None, help="the starting policy (else SFT on --data first)"),
        max_minutes: float = typer.Option(0.0, help="time budget of the whole run, all rounds (0: none)")) -> None:
    """Rejection-sampling fine-tuning: sample attempts, keep the verified ones, retrain; in rounds."""
    from trajforge.train.rft import train_rft

    refuse_target(out, "--out", kind="folder")
    pool = _split_pool(tasks, split)
    cfg = _hardware(cfg, False, False, max_minutes)
    res = _guard(lambda: train_rft(pool, _trajectories(data), model, out, cfg,
                                   init_adapter=str(init_adapter) if init_adapter else None))
    for r in res.rounds:
        sft = f", SFT {r.sft.steps} steps on {r.trained_on} demonstrations" if r.sft else " (given)"
        again = f" ({r.reinforced} kept before)" if r.reinforced else ""
        console.print(f"round {r.round}: {r.sampled} attempts, {r.verified} verified on {r.solved_tasks} tasks, "
                      f"{r.kept} kept{again}{sft}")
    stopped = f" (stopped early: {res.stopped})" if res.stopped else ""
    console.print(f"adapter saved to {res.adapter_dir} after {len(res.rounds) - 1} round(s) in {res.seconds:.0f}s"
                  f"{stopped}; {res.sampled_tokens} tokens sampled, {res.trained_tokens} trained")
