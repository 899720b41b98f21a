"""SFT → DPO → GRPO on the embedded model and the SQL domain, held-out completion after each stage.

    .venv/bin/python benchmarks/learning.py [--out runs/learning] [--budget-min 40] [--pass-k 8]

One run on the 2-core CPU (budget: 40 minutes). Stages:
1. synthesize SQL tasks; collect expert episodes on the train split;
2. SFT (the demo's settings) → evaluate on the held-out split;
3. sample the SFT model on 24 train tasks (4 samples each, T=0.8), graded: the model's own
   failures against its own successes make DPO pairs at the first diverging turn (the expert's
   success only where the model never succeeded: ``on_policy_pool``) → DPO → evaluate;
4. GRPO from the DPO model with the environment in the loop on the sampled train tasks the SFT
   model did not solve every time (``drop_solved``: groups there have signal), lr 5e-4, tasks
   drawn uniformly (``--curriculum`` schedules tiers from medium instead), guided exploration on
   (so its rescue rate is measured), up to 8 steps × 8 tasks × G=4, stopped early by the time
   budget (``--budget-min 40``: it keeps time for GRPO's evaluation) → evaluate.
Prints a table of held-out completion / validity / avg turns per stage with 95% intervals, which
held-out tasks each stage fixed and broke against SFT, the stage timings, forgetting (NLL of the
base model's own answers to 20 held-out general prompts), and guided exploration's rescue rate;
writes everything to OUT/learning.json. ``--pass-k K`` adds the held-out pass@k curve of SFT and
GRPO (K samples per task at T=0.8): the headroom that RL's sharpening could turn into greedy
success; it costs ~21 minutes per model for K=8 and is outside the 40-minute budget.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

console = Console()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/learning")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--n", type=int, default=260)
    ap.add_argument("--dpo-tasks", type=int, default=24)
    ap.add_argument("--dpo-samples", type=int, default=4)
    ap.add_argument("--grpo-steps", type=int, default=8, help="planned GRPO steps (the budget may stop it sooner)")
    ap.add_argument("--budget-min", type=float, default=40.0,
                    help="whole-run budget: GRPO stops before a step that would leave too little time "
                         "for its evaluation and the forgetting measurement (0: no budget)")
    ap.add_argument("--grpo-lr", type=float, default=5e-4)
    ap.add_argument("--grpo-temperature", type=float, default=0.8)
    ap.add_argument("--curriculum", action="store_true",
                    help="GRPO schedules tiers easy → medium → hard (from medium) instead of sampling uniformly")
    ap.add_argument("--rl-pool", choices=("measured", "train"), default="measured",
                    help="GRPO tasks: those SFT was sampled on and did not always solve (every group "
                         "has signal), or the whole train split minus the always-solved")
    ap.add_argument("--seed", type=int, default=0)
    # Variants (for measuring what would help, not the 40-minute run):
    ap.add_argument("--sft-adapter", help="reuse this SFT adapter instead of training one")
    ap.add_argument("--skip-dpo", action="store_true", help="GRPO starts from the SFT adapter")
    ap.add_argument("--replay-share", type=float, default=0.0,
                    help="share of self-distilled general samples mixed into SFT (forgetting)")
    ap.add_argument("--sft-only", action="store_true", help="stop after SFT: its eval and forgetting")
    ap.add_argument("--eval-test", action="store_true",
                    help="also evaluate every stage on the test split (seen templates and entities)")
    ap.add_argument("--pass-k", type=int, default=0,
                    help="also sample SFT and GRPO K times per held-out task at T=0.8: pass@k is the "
                         "headroom RL can sharpen into greedy success (~21 min per model for K=8 on 2 cores)")
    args = ap.parse_args()

    from trajforge.eval.run import collect
    from trajforge.grade.metrics import evaluate
    from trajforge.harness import HarnessConfig
    from trajforge.policies import make_policy
    from trajforge.store import TrajectoryStore
    from trajforge.tasks import synthesize
    from trajforge.train.dpo import DPOConfig, on_policy_pool, train_dpo
    from trajforge.train.grpo import GRPOConfig, drop_solved, train_grpo
    from trajforge.train.sft import SFTConfig, train_sft

    out = Path(args.out)
    for sub in ("expert", "dpo-samples", "sft", "dpo", "grpo"):  # a rerun starts clean
        shutil.rmtree(out / sub, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    cpu: dict[str, float] = {}  # process CPU seconds: what the wall time is on a quiet machine
    results: dict[str, dict] = {}
    solved_ids: dict[str, set[str]] = {}  # stage → held-out (or test) task ids solved
    flips: dict[str, dict[str, list[str]]] = {}
    pass_k: dict[str, dict[int, float]] = {}
    t_start = time.perf_counter()

    def stage(name, fn):
        t0, c0 = time.perf_counter(), time.process_time()
        console.rule(name)
        value = fn()
        timings[name] = round(time.perf_counter() - t0, 1)
        cpu[name] = round(time.process_time() - c0, 1)
        console.print(f"[dim]{name}: {timings[name]}s wall, {cpu[name]}s CPU "
                      f"(total {time.perf_counter() - t_start:.0f}s)[/dim]")
        return value

    tasks = synthesize("sql", args.n, args.seed).tasks
    train = [t for t in tasks if t.split == "train"]
    heldout = [t for t in tasks if t.split == "heldout"]
    harness = HarnessConfig(max_consecutive_errors=2)

    test = [t for t in tasks if t.split == "test"]

    def evaluate_adapter(label: str, adapter: Path | None):
        spec = f"hf:{args.model}@{adapter}" if adapter else f"hf:{args.model}"
        for split, pool in (("heldout", heldout), ("test", test if args.eval_test else [])):
            if not pool:
                continue
            key = label if split == "heldout" else f"{label} (test split)"
            store = out / (f"eval-{label}" if split == "heldout" else f"eval-{label}-test")
            for old in store.glob("*.jsonl"):
                old.unlink()
            trajs = collect(pool, make_policy(spec, name=label, batch_size=48), store, harness=harness,
                            show_progress=False)
            results[key] = r = evaluate(trajs)
            solved_ids[key] = {t.task_id for t in trajs if t.outcome and t.outcome.correct}
            console.print(f"{key}: completion {r['completion']:.3f} {r['completion_ci95']}, "
                          f"validity {r['validity']:.3f}, turns {r['avg_turns']:.2f}")
            sft_key = "sft" + key[len(label):]  # the same split's SFT result
            if label != "sft" and sft_key in solved_ids:  # which tasks this stage fixed and broke
                base = solved_ids[sft_key]
                flips[key] = {"fixed": sorted(solved_ids[key] - base), "broke": sorted(base - solved_ids[key])}
                console.print(f"  vs sft: fixed {len(flips[key]['fixed'])}, broke {len(flips[key]['broke'])}")

    def sample_heldout(label: str, adapter: Path):
        """K samples per held-out task at T=0.8: the pass@k curve."""
        store = out / f"passk-{label}"
        for old in store.glob("*.jsonl"):
            old.unlink()
        trajs = collect(heldout, make_policy(f"hf:{args.model}@{adapter}", name=f"{label}-sampled",
                                             temperature=0.8, batch_size=64),
                        store, samples=args.pass_k, harness=harness, show_progress=False)
        pass_k[label] = evaluate(trajs)["pass_at_k"]
        console.print(f"{label} held-out pass@k at T=0.8: {pass_k[label]}")

    expert = stage("collect expert", lambda: collect(train, make_policy("expert"), out / "expert",
                                                     show_progress=False))
    sft_dir = Path(args.sft_adapter) if args.sft_adapter else out / "sft"
    if not args.sft_adapter:
        replay = stage("self-distill replay", lambda: general_replay(args.model, out)) if args.replay_share else None
        stage("train sft", lambda: train_sft(expert, args.model, sft_dir, SFTConfig(
            epochs=1.75, lr=1e-3, batch_size=4, dropout=0.0, seed=args.seed, replay_share=args.replay_share),
            progress=False, replay=replay))
    stage("eval sft", lambda: evaluate_adapter("sft", sft_dir))
    if args.pass_k:
        stage("pass@k sft", lambda: sample_heldout("sft", sft_dir))
    if args.sft_only:
        forgetting = stage("forgetting", lambda: measure_forgetting(args.model, {"sft": sft_dir}, out))
        console.print(f"forgetting (mean NLL of base answers): {forgetting}; timings {timings}")
        (out / "learning.json").write_text(json.dumps({"results": results, "timings_s": timings,
                                                       "forgetting_nll": forgetting, "args": vars(args)}, indent=2))
        return

    samples: list = []
    dpo_dir, dpo = sft_dir, None
    if not args.skip_dpo:
        # DPO data: the SFT model's own samples on train tasks (the expert only where it never succeeded).
        sample_tasks = train[: args.dpo_tasks]
        samples = stage("sample sft for dpo", lambda: collect(
            sample_tasks, make_policy(f"hf:{args.model}@{sft_dir}", name="sft-sampled", temperature=0.8,
                                      batch_size=64), out / "dpo-samples", samples=args.dpo_samples,
            harness=HarnessConfig(max_turns=6), show_progress=False))
        pool = on_policy_pool(samples, expert)
        solved = sum(t.outcome.correct for t in samples)
        console.print(f"sft samples: {solved}/{len(samples)} solved; pool {len(pool)} "
                      f"({len(pool) - len(samples)} expert episodes for never-solved tasks)")
        dpo_dir = out / "dpo"
        dpo = stage("train dpo", lambda: train_dpo(pool, args.model, dpo_dir, DPOConfig(
            pairs="turn", beta=0.1, lr=1e-4, r=16, alpha=32, dropout=0.0, batch_size=4, epochs=1.0,
            max_pairs_per_task=2, seed=args.seed), init_adapter=str(sft_dir), progress=False))
        console.print(f"dpo: {dpo.pairs} pairs, skipped {dpo.skipped}, margin {dpo.margins[-1]:+.3f}")
        stage("eval dpo", lambda: evaluate_adapter("dpo", dpo_dir))

    grpo_dir = out / "grpo"
    rl_tasks, dropped = drop_solved(train, samples)
    if args.rl_pool == "measured" and samples:
        sampled = {t.task_id for t in samples}
        rl_tasks = [t for t in rl_tasks if t.id in sampled]
    console.print(f"grpo tasks: {len(rl_tasks)} ({dropped} always solved by SFT dropped; pool {args.rl_pool})")
    # What is left of the budget after GRPO's own evaluation (timed like SFT's) and forgetting.
    reserve = 1.2 * timings["eval sft"] + 60
    grpo_seconds = max(1.0, 60 * args.budget_min - (time.perf_counter() - t_start) - reserve) if args.budget_min else 0.0
    console.print(f"grpo time budget: {grpo_seconds:.0f}s" if grpo_seconds else "grpo: no time budget")
    grpo = stage("train grpo", lambda: train_grpo(rl_tasks, args.model, grpo_dir, GRPOConfig(
        steps=args.grpo_steps, batch_size=8, group_size=4, temperature=args.grpo_temperature, max_turns=6,
        lr=args.grpo_lr, r=16, alpha=32, dropout=0.0, curriculum=args.curriculum,
        curriculum_start="medium", guided=True, seed=args.seed, max_seconds=grpo_seconds),
        init_adapter=str(dpo_dir), progress=False))
    console.print(f"grpo: {grpo.steps} steps{' (stopped by the time budget)' if grpo.stopped else ''}, "
                  f"{grpo.seconds / max(1, grpo.steps):.0f}s/step, "
                  f"rewards {[round(x, 3) for x in grpo.rewards]}, solve {grpo.solve_rates}, "
                  f"rescue {grpo.rescue}, curriculum {grpo.curriculum}")
    stage("eval grpo", lambda: evaluate_adapter("grpo", grpo_dir))
    if args.pass_k:
        stage("pass@k grpo", lambda: sample_heldout("grpo", grpo_dir))
    stages = {"sft": sft_dir, "grpo": grpo_dir} if args.skip_dpo else {"sft": sft_dir, "dpo": dpo_dir, "grpo": grpo_dir}
    forgetting = stage("forgetting", lambda: measure_forgetting(args.model, stages, out))

    table = Table(title=f"held-out SQL, {len(heldout)} tasks, {args.model}")
    for col in ("stage", "completion [95% CI]", "validity", "avg turns", "forgetting NLL"):
        table.add_column(col)
    for label, r in results.items():
        lo, hi = r["completion_ci95"]
        table.add_row(label, f"{r['completion']:.3f} [{lo:.3f}, {hi:.3f}]", f"{r['validity']:.3f}",
                      f"{r['avg_turns']:.2f}", f"{forgetting.get(label.split(' ')[0], float('nan')):.3f}")
    console.print(table)
    timings["total"] = round(time.perf_counter() - t_start, 1)
    cpu["total"] = round(sum(cpu.values()), 1)
    console.print(f"wall (s): {timings}")
    console.print(f"CPU (s, all threads; /2 ≈ quiet 2-core wall): {cpu}")
    console.print(f"forgetting (mean NLL of base answers; base = {forgetting['base']:.3f}): {forgetting}")
    (out / "learning.json").write_text(json.dumps({
        "results": results, "timings_s": timings, "cpu_s": cpu, "forgetting_nll": forgetting,
        "flips_vs_sft": flips, "pass_at_k": pass_k,
        "dpo": dpo.model_dump(exclude={"losses"}) if dpo else None,
        "grpo": grpo.model_dump(exclude={"losses"}), "args": vars(args)}, indent=2))


def general_replay(model: str, out: Path):
    """The base model's own answers to the shipped (training) general prompts."""
    from trajforge.policies.hf import load_model
    from trajforge.policies.models import resolve
    from trajforge.train.replay import cached_replay, general_prompts

    base, tok = load_model(model)
    return cached_replay(resolve(model), base, tok, general_prompts()[0], out / "replay-cache")


def measure_forgetting(model: str, adapters: dict[str, Path], out: Path) -> dict[str, float]:
    """Mean NLL of the base model's greedy answers to the held-out general prompts, per model."""
    from trajforge.policies.hf import load_model
    from trajforge.policies.models import resolve
    from trajforge.train.replay import answer_nll, cached_replay, general_prompts

    base, tok = load_model(model)
    held = cached_replay(resolve(model), base, tok, general_prompts()[1], out / "replay-cache")
    scores = {"base": answer_nll(base, held, tok.pad_token_id)}
    for label, adapter in adapters.items():
        net, _ = load_model(model, str(adapter))
        scores[label] = answer_nll(net, held, tok.pad_token_id)
    return {k: round(v, 4) for k, v in scores.items()}


if __name__ == "__main__":
    main()
