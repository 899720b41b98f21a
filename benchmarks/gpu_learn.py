"""The GPU check's post-SFT stages: RFT, DPO and GRPO on the device, each with signal to learn from.

A random base solves nothing: its RFT round keeps nothing, its DPO pairs are all expert-vs-noise and
its GRPO groups all agree (reward 0), so GRPO never reaches its update and a device bug there would
go unseen. So the loop's small random model is first trained, every parameter, on the expert
episodes of its train tasks until it can replay them (``memorise``): a base that solves those tasks
greedily and some of the time at T = 1, so sampled groups disagree. Then, on the device:
``train sft`` (the starting adapter), one warm ``train rft`` round (sampling K attempts per task
there), ``train dpo`` on the round's own attempts, and ``train grpo`` on the tasks whose attempts
disagreed; each row says what it trained on, its seconds and peak device memory. What this checks
is that each stage runs on the GPU and learns from real signal (GRPO's groups with signal, its
trained tokens), not what it would do for a real model: these are memorised tasks.

Run on its own (``main``), it asks whether GRPO raises a policy's solve rate at all. ``--bimodal``
memorises each task's episode twice, once as the expert ended it and once submitting another
task's answer (``wrong_answer_copies``): the policy then reaches every task's last turn and there
chooses between the value in front of it and a memorised wrong one, so its failures sit at one
decision, the kind of failure RL is for, instead of T = 1 noise spread over every token.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path

MEMORISE = {"steps": 300, "batch": 16, "lr": 1e-3}
"""Full-parameter passes over the expert episodes (assistant turns only); --dry-run takes 3 steps."""
ROLLOUT = {"max_new_tokens": 96, "max_turns": 4}
"""Every arm's episodes and every solve rate's: tokens a turn, turns an episode."""


def memorise(folder: Path, expert: list, device: str, steps: int) -> dict:
    """Train ``folder``'s model (all parameters) on ``expert``'s assistant turns as ``train sft``
    renders them, save it back; the first and last loss."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trajforge.train.data import render_sample, training_dialect
    from trajforge.train.sequences import collate, default_toolset

    tok = AutoTokenizer.from_pretrained(folder)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    dialect = training_dialect(expert, str(folder), tok)
    samples = [render_sample(t, tok, default_toolset(t), dialect) for t in expert]
    net = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(device)
    net.train()
    opt = torch.optim.AdamW(net.parameters(), lr=MEMORISE["lr"])
    rng = random.Random(0)
    losses = []
    for _ in range(steps):
        batch = collate(rng.sample(samples, min(MEMORISE["batch"], len(samples))), pad, device=device)
        loss = assistant_loss(net, batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if len(losses) % 25 == 0:
            print(f"memorise step {len(losses)}/{steps}: loss {losses[-1]:.3f}", flush=True)
    net.save_pretrained(folder)
    del net, opt
    return {"first_loss": round(losses[0], 3), "last_loss": round(losses[-1], 3), "sequences": len(samples)}


def wrong_answer_copies(expert: list) -> list:
    """Each episode once more with its submitted answer, and the sentence naming it, swapped for the
    next episode's (cyclically; the first that differs): a memorised policy's choice at the last
    turn between the right value and a wrong one it has seen just as often."""
    answers = [t.steps[-1].calls[0].arguments.get("answer") for t in expert]
    copies = []
    for i, traj in enumerate(expert):
        right = answers[i]
        wrong = next((a for a in answers[i + 1:] + answers[:i] if a != right), None)
        if not isinstance(right, str) or not isinstance(wrong, str):
            continue
        at = max(k for k, m in enumerate(traj.messages) if m.role == "assistant")
        copies.append(traj.model_copy(update={
            "messages": [_swapped(m, right, wrong) if k == at else m for k, m in enumerate(traj.messages)],
            "steps": [*traj.steps[:-1], _swapped(traj.steps[-1], right, wrong)]}))
    return copies


def _swapped(turn, right: str, wrong: str):
    """A message or step whose text and submit call name ``wrong`` where they named ``right``."""
    calls = [c.model_copy(update={"arguments": {**c.arguments, "answer": wrong}}) if c.name == "submit_answer"
             else c for c in getattr(turn, "tool_calls", None) or getattr(turn, "calls", [])]
    update = {"tool_calls" if hasattr(turn, "tool_calls") else "calls": calls}
    for field in ("content", "raw"):
        text = getattr(turn, field, None)
        if isinstance(text, str):
            update[field] = text.replace(right, wrong)
    return turn.model_copy(update=update)


def assistant_loss(net, batch: dict):
    """The causal-LM loss on the labelled (assistant) tokens, with only their hidden states through
    the vocabulary projection: on a 4-layer model with a 49k vocabulary the projection of every
    prompt token is most of a step's work, and a CPU run of this file needs it gone."""
    import torch

    hidden = net.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    labels = batch["labels"][:, 1:]
    keep = labels != -100
    logits = net.lm_head(hidden[:, :-1][keep])
    return torch.nn.functional.cross_entropy(logits.float(), labels[keep])


def small(device: str) -> dict:
    """Adapter and loop settings every stage here shares (replay off: it would self-distill the
    memorised model's prompts, which is beside the point)."""
    return {"device": device, "replay_share": 0.0, "r": 16, "alpha": 32, "dropout": 0.0, "max_len": 2048,
            "grad_accum": 1}


def starting_adapter(folder: Path, expert: list, device: str, dry: bool, sft_dir: Path,
                     steps: int = MEMORISE["steps"], memorised: list | None = None) -> tuple[dict, int]:
    """Memorise the expert episodes (or ``memorised``) into ``folder``'s model, then a 2-step
    ``train_sft`` adapter on the expert's at a tiny learning rate (so the stages after it start from
    an adapter, as they do in use, on a policy that still replays what it memorised): (memorising's
    losses, sft steps)."""
    from trajforge.train.sft import SFTConfig, train_sft

    m = memorise(folder, memorised or expert, device, 3 if dry else steps)
    sft = train_sft(expert, str(folder), sft_dir, SFTConfig(**small(device), max_steps=2, lr=1e-5, batch_size=4),
                    progress=False)
    return m, sft.steps


def _peak_gb(device: str) -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 3) if device.startswith("cuda") else None


def check_learning(out: Path, folder: Path, train: list, expert: list, device: str, dry: bool, table,
                   deadline: float) -> None:
    """memorise → sft → rft → dpo → grpo on ``device``; a table row per stage, as each finishes.
    A stage that would start past ``deadline`` is skipped, and its row says so."""
    from benchmarks.gpu_check import reset_peak
    from trajforge.eval.run import collect
    from trajforge.policies.hf import HFPolicy
    from trajforge.store import TrajectoryStore
    from trajforge.train.dpo import DPOConfig, on_policy_pool, train_dpo
    from trajforge.train.grpo import GRPOConfig, drop_solved, train_grpo
    from trajforge.train.rft import RFTConfig, train_rft

    shared = small(device)

    def late(stage: str) -> bool:
        if time.perf_counter() < deadline:
            return False
        table.add({"size": stage, "device": device, "note": "skipped: time cap"})
        return True

    def row(stage: str, began: float, note: str, **extra) -> None:
        table.add({"size": stage, "device": device, "seconds": round(time.perf_counter() - began, 1),
                   "measured_gb": _peak_gb(device), "note": note, **extra})

    began = time.perf_counter()
    reset_peak(device)
    sft_dir = out / "learn-sft"
    m, sft_steps = starting_adapter(folder, expert, device, dry, sft_dir)
    greedy = collect(train, HFPolicy(str(folder), adapter=str(sft_dir), device=device, max_new_tokens=192),
                     out / "learn-greedy", show_progress=False)
    solved = sum(1 for t in greedy if t.outcome is not None and t.outcome.correct)
    row("memorise+sft", began, f"full-parameter memorising, {MEMORISE['steps'] if not dry else 3} steps over "
        f"{m['sequences']} expert episodes: loss {m['first_loss']} → {m['last_loss']}; then sft {sft_steps} "
        f"steps; greedy: {solved}/{len(greedy)} train tasks solved", steps=sft_steps)

    if late("rft"):
        return
    began = time.perf_counter()
    reset_peak(device)
    rft_cfg = RFTConfig(**shared, rounds=1, attempts=2 if dry else 4, temperature=1.0, warm_start=True,
                        lr=1e-4, batch_size=4, max_steps=2 if dry else 8, max_new_tokens=192, max_turns=6)
    rft = train_rft(train, expert, str(folder), out / "learn-rft", rft_cfg, init_adapter=str(sft_dir),
                    progress=False)
    r1 = rft.rounds[-1]
    trained = r1.sft.steps if r1.sft else 0
    row("rft", began, f"1 warm round: {r1.sampled} attempts at T=1.0, {r1.verified} verified, "
        f"{r1.solved_tasks} tasks solved, {r1.kept} kept, {trained} SFT steps "
        f"(sampling {r1.sample_seconds} s)", steps=trained)

    samples = TrajectoryStore(out / "learn-rft" / "samples").read()
    if late("dpo"):
        return
    began = time.perf_counter()
    reset_peak(device)
    try:
        dpo = train_dpo(on_policy_pool(samples, expert), str(folder), out / "learn-dpo",
                        DPOConfig(**shared, pairs="turn", beta=0.1, lr=1e-4, batch_size=4, max_steps=2 if dry else 6,
                                  max_pairs_per_task=2), init_adapter=str(sft_dir), progress=False)
        row("dpo", began, f"{dpo.pairs} pairs from the round's attempts, {dpo.steps} steps, {dpo.tokens} tokens",
            steps=dpo.steps)
    except ValueError as e:  # no pair at all: the row says so, GRPO still runs
        row("dpo", began, f"not run: {e}")

    if late("grpo"):
        return
    tasks, dropped = drop_solved(train, samples)
    began = time.perf_counter()
    reset_peak(device)
    grpo = train_grpo(tasks or train, str(folder), out / "learn-grpo",
                      GRPOConfig(**shared, steps=1 if dry else 3, batch_size=4 if dry else 8, group_size=4,
                                 temperature=1.0, max_turns=6, max_new_tokens=192, lr=5e-4, curriculum=False),
                      init_adapter=str(sft_dir), progress=False)
    per_step = round(grpo.seconds / max(1, grpo.steps), 1)
    row("grpo", began, f"{len(tasks)} tasks not solved by every attempt ({dropped} always solved, dropped), "
        f"{grpo.steps} steps ({per_step} s a step), mean reward by step {[round(r, 2) for r in grpo.rewards]}, "
        f"solved by step {[round(r, 2) for r in grpo.solve_rates]}, {grpo.trained_tokens} tokens trained "
        f"(0: no group had signal) of {grpo.sampled_tokens} sampled", steps=grpo.steps)


def _sampler(folder: Path, adapter: Path, device: str, temperature: float, seed: int, name: str | None = None):
    """The adapter as a sampling policy with the arms' rollout settings."""
    from trajforge.policies.hf import HFPolicy

    return HFPolicy(str(folder), adapter=str(adapter), device=device, temperature=temperature, seed=seed,
                    max_new_tokens=ROLLOUT["max_new_tokens"], batch_size=64, name=name)


def _harness():
    from trajforge.harness import HarnessConfig

    return HarnessConfig(max_turns=ROLLOUT["max_turns"], max_consecutive_errors=4)


def _after(folder: Path, adapter: Path, train: list, device: str, samples: int, temperature: float) -> str:
    """An arm's note's closing solve rate, when ``samples`` asks for one."""
    return f"; after: {sampled_solve(folder, adapter, train, device, samples, temperature)}" if samples else ""


def sampled_solve(folder: Path, adapter: Path, train: list, device: str, samples: int,
                  temperature: float = 1.0) -> str:
    """"k/n solved at T" over ``samples`` attempts per task at ``temperature`` with the arms'
    rollout settings, always the same sampling seed, so two adapters are compared on common random
    numbers; then the failures' reasons (a wrong answer submitted is a choice, a parse failure or
    the turn limit is sampling noise)."""
    from trajforge.grade import graded
    from trajforge.harness import run_episodes

    policy = _sampler(folder, adapter, device, temperature, seed=4242)
    trajs = [graded(t) for t in run_episodes(train, policy, _harness(), samples=samples)]
    solved = sum(bool(t.outcome and t.outcome.correct) for t in trajs)
    reasons = Counter(t.outcome.fail_reason if t.outcome else "ungraded" for t in trajs
                      if not (t.outcome and t.outcome.correct))
    return (f"{solved}/{len(trajs)} solved at T = {temperature:g}; failed: "
            + (", ".join(f"{r} {k}" for r, k in reasons.most_common()) or "none"))


def grpo_arms(out: Path, folder: Path, train: list, sft_dir: Path, device: str, lrs: list[float], steps: int,
              table, norms: tuple[str, ...] = ("token",), eval_samples: int = 0, temperature: float = 1.0) -> None:
    """GRPO from the same starting adapter at each learning rate and loss normalisation, every step
    over all of ``train`` (so each step's solve rate is measured on the same tasks and steps
    compare): does GRPO sharpen a policy that solves these tasks only some of the time at T = 1?
    With ``eval_samples``, the starting adapter's and each arm's solve rate over that many
    attempts per task (the steps' own rates are 4 attempts a task: too few to tell arms apart)."""
    from benchmarks.gpu_check import reset_peak
    from trajforge.train.grpo import GRPOConfig, train_grpo

    if eval_samples:
        began = time.perf_counter()
        solve = sampled_solve(folder, sft_dir, train, device, eval_samples, temperature)
        table.add({"size": "grpo start", "device": device, "seconds": round(time.perf_counter() - began, 1),
                   "note": f"starting adapter: {solve}"})
    for lr, norm in [(lr, norm) for norm in norms for lr in lrs]:
        began = time.perf_counter()
        reset_peak(device)
        cfg = GRPOConfig(**small(device), steps=steps, batch_size=len(train), group_size=4,
                         temperature=temperature, **ROLLOUT, lr=lr, curriculum=False, loss_norm=norm)
        arm = out / f"arm-grpo-{norm}-{lr:g}"
        res = train_grpo(train, str(folder), arm, cfg, init_adapter=str(sft_dir), progress=False)
        curves = [json.loads(line) for line in (arm / "curves.jsonl").read_text().splitlines()]
        down = [round(c.get("down_token_share", 0.0), 2) for c in curves]
        table.add({"size": f"grpo {norm} lr {lr:g}", "device": device, "steps": res.steps,
                   "seconds": round(time.perf_counter() - began, 1), "measured_gb": _peak_gb(device),
                   "note": f"{len(train)} tasks × 4 rollouts every step; solved by step "
                           f"{[round(r, 2) for r in res.solve_rates]}; mean reward by step "
                           f"{[round(r, 2) for r in res.rewards]}; share of loss tokens pushed down by step "
                           f"{down}; {res.trained_tokens} tokens trained"
                           + _after(folder, arm, train, device, eval_samples, temperature)})


def rft_arm(out: Path, folder: Path, train: list, sft_dir: Path, device: str, rounds: int, lr: float,
            seconds: float, table, eval_samples: int = 0, temperature: float = 1.0, reinforce: float = 0.0) -> None:
    """Warm RFT from the same starting adapter, on its own verified attempts only (no expert data:
    GRPO gets none either), at the arms' rollout settings, within ``seconds`` (0: no cap): what
    rejection sampling does with the same signal that GRPO's groups carry. ``reinforce``: the
    rounds' ``reinforce_below`` (its own arm folder)."""
    from trajforge.train.rft import RFTConfig, train_rft

    began = time.perf_counter()
    cfg = RFTConfig(**small(device), rounds=rounds, attempts=4, temperature=temperature, warm_start=True,
                    expert_mix=0.0, lr=lr, batch_size=4, **ROLLOUT, max_seconds=seconds, reinforce_below=reinforce)
    arm = out / (f"arm-rft-{lr:g}" + (f"-reinforce{reinforce:g}" if reinforce else ""))
    res = train_rft(train, [], str(folder), arm, cfg, init_adapter=str(sft_dir), progress=False)
    done = [r for r in res.rounds if r.round > 0]
    table.add({"size": f"rft lr {lr:g}" + (f" reinforce < {reinforce:g}" if reinforce else ""), "device": device,
               "steps": sum(r.sft.steps for r in done if r.sft), "seconds": round(time.perf_counter() - began, 1),
               "note": f"{len(done)} warm rounds of {len(train)} tasks × 4 attempts; verified by round "
                       f"{[r.verified for r in done]}; kept by round {[r.kept for r in done]}"
                       + (f" (again {[r.reinforced for r in done]})" if reinforce else "")
                       + (_after(folder, arm, train, device, eval_samples, temperature) if done else "")})


def dpo_arm(out: Path, folder: Path, train: list, expert: list, sft_dir: Path, device: str, steps: int, lr: float,
            table, eval_samples: int = 0, temperature: float = 1.0, attempts: int = 8, rounds: int = 1) -> None:
    """DPO from the same starting adapter on pairs of its own attempts at their first diverging
    turn: ``attempts`` per task sampled at the arms' rollout settings (another seed than the solve
    rates'), the expert's episode only for a task no attempt solved (``on_policy_pool``). What it
    shares with GRPO and RFT lacks is the push down on the failed side of a decision.

    ``rounds`` 1 is offline: one sampling, then ``steps``. More is iterative (online) DPO, the
    fair match for GRPO, which samples afresh every step: each round samples from the adapter the
    last round left, trains ``steps // rounds`` steps on top of it, and that adapter (the round's
    start) is its reference."""
    from trajforge.eval.run import collect
    from trajforge.store import TrajectoryStore
    from trajforge.train.dpo import DPOConfig, on_policy_pool, train_dpo

    began = time.perf_counter()
    arm = out / (f"arm-dpo-{lr:g}" + (f"-online{rounds}" if rounds > 1 else ""))
    current, per_round = sft_dir, max(1, steps // rounds)
    solved_by_round, pairs_by_round, accuracy, tokens, total_steps = [], [], [], 0, 0
    for r in range(rounds):
        here = arm / f"round-{r + 1}" if rounds > 1 else arm
        collect(train, _sampler(folder, current, device, temperature, seed=7 + r, name=f"dpo-round-{r + 1}"),
                here / "samples", samples=attempts, harness=_harness(), show_progress=False)
        samples = TrajectoryStore(here / "samples").read()
        solved_by_round.append(sum(bool(t.outcome and t.outcome.correct) for t in samples))
        res = train_dpo(on_policy_pool(samples, expert), str(folder), here / "adapter",
                        DPOConfig(**small(device), pairs="turn", beta=0.1, lr=lr, batch_size=4,
                                  epochs=100.0, max_steps=per_round, max_pairs_per_task=4),  # steps end it
                        init_adapter=str(current), progress=False)
        pairs_by_round.append(res.pairs)
        accuracy += [round(a, 2) for a in res.accuracy]
        tokens += res.tokens
        total_steps += res.steps
        current = here / "adapter"
    how = (f"{rounds} rounds of {len(train)} tasks × {attempts} attempts from the round's adapter, "
           f"{per_round} steps each; solved by round {solved_by_round}, turn pairs by round {pairs_by_round}"
           if rounds > 1 else f"{len(train) * attempts} attempts ({solved_by_round[0]} solved), "
           f"{pairs_by_round[0]} turn pairs")
    table.add({"size": f"dpo lr {lr:g}" + (f" online {rounds}" if rounds > 1 else ""), "device": device,
               "steps": total_steps, "seconds": round(time.perf_counter() - began, 1),
               "note": f"{how}, {tokens} tokens; reward accuracy by step {accuracy}"
                       + _after(folder, current, train, device, eval_samples, temperature)})


def main() -> None:
    """memorise → sft → GRPO arms, on their own (``gpu_check.py`` runs the stages once each)."""
    import argparse
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks import gpu_check as gc_

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dry-run", action="store_true", help="this CPU, 3 memorising steps, 1 GRPO step")
    ap.add_argument("--lrs", default="1e-4,5e-4", help="comma-separated GRPO learning rates, one arm each")
    ap.add_argument("--steps", type=int, default=6, help="GRPO steps per arm")
    ap.add_argument("--tasks", type=int, default=16, help="train tasks (memorised, then rolled out)")
    ap.add_argument("--norms", default="token", help="comma-separated GRPO loss_norm values (token, sequence)")
    ap.add_argument("--memorise-steps", type=int, default=MEMORISE["steps"],
                    help="full-parameter steps that teach the random model its tasks")
    ap.add_argument("--reuse", action="store_true", help="keep OUT's memorised model and sft adapter if there")
    ap.add_argument("--eval-samples", type=int, default=0,
                    help="also measure the solve rate at --temperature with this many attempts per task, before "
                         "the arms and after each (the same sampling seed: paired)")
    ap.add_argument("--device", default="cuda", help="where to run (cpu: the whole check, slowly)")
    ap.add_argument("--bimodal", action="store_true",
                    help="memorise a wrong-answer copy of each episode too (wrong_answer_copies)")
    ap.add_argument("--temperature", type=float, default=1.0, help="GRPO's rollouts and the solve rates")
    ap.add_argument("--rft-rounds", type=int, default=0,
                    help="also a warm RFT arm of up to this many rounds at the first learning rate")
    ap.add_argument("--rft-seconds", type=float, default=0.0, help="the RFT arm's time budget (0: none)")
    ap.add_argument("--dpo-steps", type=int, default=0,
                    help="also a DPO arm of this many steps at the first learning rate, on pairs of the starting "
                         "adapter's own attempts")
    ap.add_argument("--dpo-lr", type=float, default=0.0, help="the DPO arm's learning rate (0: the first of --lrs)")
    ap.add_argument("--dpo-rounds", type=int, default=1,
                    help="the DPO arm's sampling rounds (>1: online DPO, each round sampled from the last one's adapter)")
    ap.add_argument("--rft-reinforce", type=float, default=0.0,
                    help="the RFT arm's reinforce_below: keep again the successes of tasks solved in under this share")
    args = ap.parse_args()
    gc_.bootstrap()
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from trajforge.eval.run import collect
    from trajforge.store import TrajectoryStore
    from trajforge.tasks import synthesize

    device = "cpu" if args.dry_run else args.device
    table = gc_.Table(args.out)
    folder = args.out / "model"
    train = [t for t in synthesize("sql", 40, seed=1).tasks if t.split == "train"][:args.tasks]
    sft_dir = args.out / "sft"
    if not (args.reuse and (sft_dir / "trajforge_adapter.json").exists()):
        folder = gc_.model_folder(folder, gc_.LOOP_MODEL)
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder)).save_pretrained(folder)
        collect(train, gc_._expert(), args.out / "expert", show_progress=False)
        expert = TrajectoryStore(args.out / "expert").read()
        began = time.perf_counter()
        m, _ = starting_adapter(folder, expert, device, args.dry_run, sft_dir, args.memorise_steps,
                                memorised=expert + wrong_answer_copies(expert) if args.bimodal else None)
        table.add({"size": "memorise+sft", "device": device, "seconds": round(time.perf_counter() - began, 1),
                   "note": f"loss {m['first_loss']} → {m['last_loss']} over {m['sequences']} episodes"})
    lrs = [float(x) for x in args.lrs.split(",") if x]
    grpo_arms(args.out, folder, train, sft_dir, device, lrs, 1 if args.dry_run else args.steps, table,
              tuple(n for n in args.norms.split(",") if n), args.eval_samples, args.temperature)
    if args.rft_rounds:
        rft_arm(args.out, folder, train, sft_dir, device, args.rft_rounds, lrs[0] if lrs else 5e-4,
                args.rft_seconds, table, args.eval_samples, args.temperature, args.rft_reinforce)
    if args.dpo_steps:
        dpo_arm(args.out, folder, train, TrajectoryStore(args.out / "expert").read(), sft_dir, device,
                1 if args.dry_run else args.dpo_steps, args.dpo_lr or (lrs[0] if lrs else 5e-4), table,
                args.eval_samples, args.temperature, rounds=args.dpo_rounds)


if __name__ == "__main__":
    main()
