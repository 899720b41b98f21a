"""``trajforge collect``: run a policy on tasks into a store, resumable, at scale for servers.

    trajforge collect --tasks tasks.jsonl --policy expert --out store/ --split train
    trajforge collect --tasks tasks.jsonl --policy openai:http://127.0.0.1:8000/v1#qwen --out store/ \\
        --samples 8 --temperature 0.7 --concurrency 64 --request-timeout 60 --tool-timeout 30
    trajforge collect ... --resume          # also say what the interrupted run had in flight
    trajforge collect --tasks tasks.jsonl --policy repair --samples 2 --out store/ --split train \\
        [--mistakes-from samples-store/]    # self-repair demonstrations (trajforge/tasks/repair.py)
    trajforge collect --policy hf:MODEL ... --processes 4   # 4 workers, one slice and device each
    trajforge collect ... --shard 2/4       # one slice by hand (see trajforge/cli/spread.py)

Resuming is what every run does: episodes whose idempotency key (task, policy, sampling, sample)
is in the store are never run again, so rerunning a finished collection makes no model call.
Server policies run through the async harness (``--concurrency`` episodes at once, three
deadlines, retries of infrastructure faults only); ``--executor ray`` runs environments in Ray
actors. Requests and tool calls are logged to ``STORE/logs/<shard>.jsonl``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from trajforge.cli import spread
from trajforge.cli.options import Options, with_configs
from trajforge.cli.rewards import MILESTONE_BONUS, REWARD_WEIGHTS, REWARDS, with_reward_flags
from trajforge.cli.targets import refuse_unwritable
from trajforge.grade.reward import RewardConfig
from trajforge.harness.concurrent import CollectConfig
from trajforge.harness.loop import HarnessConfig, episode_rules

console = Console()


def _fail(msg: str) -> None:
    console.print(f"[red]error:[/red] {msg}")
    raise typer.Exit(2)


def _report_interrupted(out: Path) -> None:
    from trajforge.harness.events import interrupted_runs

    runs = interrupted_runs(out) if out.exists() else []
    if not runs:
        console.print("resume: no interrupted run in the log")
    for r in runs[-3:]:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started))
        console.print(f"resume: run {r.run} (started {when}) stopped with {len(r.episodes)} episodes "
                      f"in flight ({r.requests} model requests, {r.tool_calls} tool calls); "
                      "those not in the store run again now")


def _repair_policy(pool, mistakes_from: Optional[Path], name: Optional[str]):
    """The repair policy over ``pool``, its mistakes measured in ``mistakes_from`` when given."""
    from trajforge.policies.repair import RepairPolicy
    from trajforge.tasks.repair import Planner, measured_mistakes

    measured = None
    if mistakes_from is not None:
        from trajforge.store import TrajectoryStore

        if not mistakes_from.is_dir():
            _fail(f"--mistakes-from {mistakes_from}: no such store")
        measured = measured_mistakes(TrajectoryStore(mistakes_from).read(), pool)
        console.print(f"mistakes from {mistakes_from}: {sum(map(len, measured.by_task.values()))} refused turns "
                      f"on {len(measured.by_task)} tasks; fail reasons {dict(measured.reasons.most_common(5))}")
    return RepairPolicy(Planner(pool, measured), name=name or "repair")


SCALE = Options(CollectConfig, flags={"request_timeout_s": "--request-timeout", "tool_timeout_s": "--tool-timeout",
                                      "episode_timeout_s": "--episode-timeout", "backoff_s": "--backoff",
                                      "backoff_max_s": "--backoff-max"})
"""The collection's scale options; the ``_s`` of a field in seconds is left off its flag."""


@with_configs(config_file=True, harness=HarnessConfig, scale=SCALE, rewards=REWARDS)
def collect(tasks: Path = typer.Option(..., help="task pool (JSONL)"),
            policy: str = typer.Option(..., help="expert, repair (the expert, a mistake first: self-repair "
                                       "demonstrations), hf:MODEL[@ADAPTER] or openai:BASE_URL#MODEL"),
            out: Path = typer.Option(..., help="store directory"),
            split: Optional[str] = None, samples: int = typer.Option(1, min=1), name: Optional[str] = None,
            temperature: float = typer.Option(0.0, min=0.0),
            executor: str = typer.Option("asyncio", help="where environments run: asyncio | ray"),
            resume: bool = typer.Option(False, "--resume", help="report what an interrupted run had "
                                        "in flight (finished episodes are always skipped)"),
            retry_faults: bool = typer.Option(False, help="also rerun episodes stored as env_fault"),
            reward_weights: list[str] = REWARD_WEIGHTS, milestone_bonus: list[str] = MILESTONE_BONUS,
            mistakes_from: Optional[Path] = typer.Option(None, help="with --policy repair: a store of a model's "
                                                         "graded samples whose own mistakes to replay"),
            device: Optional[str] = spread.DEVICE, processes: int = spread.PROCESSES,
            shard: str = spread.SHARD, report: Optional[Path] = spread.REPORT,
            harness: HarnessConfig = None, scale: CollectConfig = None, rewards: RewardConfig = None) -> None:
    """Run a policy on tasks; trajectories are graded and appended as each episode ends (resumable)."""
    from trajforge.cli.main import _check_demos, _demo_harness, _load_tasks, _policy
    from trajforge.eval.run import collect as run_collect

    if executor not in ("asyncio", "ray"):
        _fail(f"--executor must be asyncio or ray, not {executor!r}")
    refuse_unwritable(out, "--out", "folder")
    rewards = with_reward_flags(rewards, reward_weights, milestone_bonus)
    asked = harness  # as given: --demo-pool's store, not the temporary pool file made from it
    # --demo-pool's temporary pool file lasts as long as the command
    with _demo_harness(harness) as harness:
        if mistakes_from is not None and policy != "repair":
            _fail("--mistakes-from goes with --policy repair")
        whole = _load_tasks(tasks, split)
        part = spread.parse_slice(shard)
        pool = part.of(whole)
        if resume:
            _report_interrupted(out)
        if processes > 1:
            _collect_spread(pool, part, processes, out)
            _note_other_rewards(out, rewards)
            return
        # Repair mistakes (the nearest template) are drawn from the whole pool, not this slice.
        pol = (_repair_policy(whole, mistakes_from, name) if policy == "repair"
               else _policy(policy, name, temperature, device))
        _check_demos(harness, [pol])
        _same_harness(out, pol.name, asked)
        try:
            new = run_collect(pool, pol, out, samples=samples, harness=harness, scale=scale, executor=executor,
                              retry_faults=retry_faults, rewards=rewards, show_progress=report is None,
                              first_shard=part.index)
        except (ImportError, KeyError) as e:  # ray missing; an unknown environment in the pool
            _fail(str(e).strip("'\""))
        tiers = spread.tally(new)
        faults = sum(len(t.faults) for t in new)
        console.print(f"collected {len(new)} new episodes into {out}: {tiers}"
                      + (f"; {faults} infrastructure faults recorded (see {out}/logs/)" if faults else ""))
        if report is None:  # a --processes worker: its parent says it once for the whole store
            _note_other_rewards(out, rewards)
        if report:
            spread.write_report(report, spread.WorkerReport(slice=str(part), device=spread.device_of([pol]),
                                                            new=len(new), tiers=tiers, policies=[pol.name]))


HARNESS_RULES = "harness.by-policy.json"
"""Beside a store: ``{policy: harness settings}`` of the episodes ``collect`` ran into it."""


def _same_harness(out: Path, policy: str, harness: HarnessConfig) -> None:
    """Record the harness settings ``policy``'s episodes run under, or refuse a rerun under other
    ones: the resume key does not hold them, so a rerun with another ``--max-turns`` skipped every
    finished episode, said "0 new", and left the store mixing two limits. Per policy (unlike RFT's
    ``harness.json``): one store may hold a model's samples cut at ``--max-turns 2`` and the
    expert's episodes, both training data for DPO."""
    rules, path = episode_rules(harness), out / HARNESS_RULES
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        kept = {}  # none yet, or damaged: this run's rules start it again
    kept = kept if isinstance(kept, dict) else {}
    before = kept.get(policy)
    if isinstance(before, dict) and before != rules:
        changed = ", ".join(f"{k} {before.get(k)!r} -> {v!r}" for k, v in rules.items() if before.get(k) != v)
        _fail(f"{out} holds episodes of {policy} run under other harness settings ({changed}): a rerun "
              "would skip them all and mix the two; rerun with the same settings, or into another --out "
              "(or under another --name)")
    if before != rules:
        out.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # --processes workers write at once
        tmp.write_text(json.dumps({**kept, policy: rules}, indent=1, sort_keys=True))
        tmp.replace(path)


def _note_other_rewards(out: Path, rewards: RewardConfig) -> None:
    """Say when the store holds episodes whose rewards other weights gave. A rerun with new reward
    flags skips every finished episode, so without this it reports "0 new" and leaves the old
    totals, mixed with the new ones, for DPO's ranking and the reports to read."""
    from trajforge.store import TrajectoryStore

    def other(t) -> bool:
        chosen = rewards.resolve_for(t)
        return (tuple(t.reward.weights) != chosen.weights
                or t.reward.milestone_bonus not in (None, chosen.milestone_bonus))

    stale = sum(1 for t in TrajectoryStore(out) if t.reward is not None and other(t))
    if stale:
        console.print(f"note: {stale} episodes in {out} have rewards from other weights than this run's; "
                      f"`trajforge grade {out}` with this run's reward flags or --config regrades them all",
                      markup=False, highlight=False, soft_wrap=True)


def _collect_spread(pool: list, part, processes: int, out: Path) -> None:
    """``--processes N``: the same collection in N workers, one slice of ``pool`` each."""
    argv = spread.without_options(spread.command_line("collect"), valued=spread.SPREAD_OPTIONS,
                                  flags=("--resume",))
    reports = spread.spread(argv, spread.worker_slices(part, processes, len(pool)), out)
    tiers: dict[str, int] = {}
    for rep in reports:
        for tier, n in rep.tiers.items():
            tiers[tier] = tiers.get(tier, 0) + n
    console.print(f"collected {sum(r.new for r in reports)} new episodes into {out} over "
                  f"{len(reports)} processes: {tiers}", highlight=False, soft_wrap=True)
