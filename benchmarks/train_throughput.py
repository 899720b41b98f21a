"""SFT tokens/s: trajforge vs TRL's SFTTrainer vs a raw training loop, in one run, step by step.

    nice -n 5 .venv/bin/python benchmarks/train_throughput.py --steps 8 --batch 2 --max-len 1024 --json out.json
    .venv/bin/python benchmarks/train_throughput.py --data STORE --model DIR   # your store, your model

Four arms train the same model (``--model``, the embedded SmolLM2-135M by default) on the same
samples in the same order, with the same LoRA (rank, alpha, dropout and targets: ``LoraSettings``'
defaults), micro-batch, max length, optimiser (AdamW, lr 2e-4, clip 1.0, one micro-batch per
optimizer step), fp32 on the CPU, loss on completion tokens only, and the same gradient
checkpointing setting (off unless ``--gradient-checkpointing``; the shared-prefix cache needs it off):

- ``trajforge``: ``train_sft`` itself, ``share_prefix=False``: data loader prepared by accelerate,
  accumulation bookkeeping, curves, NaN guard — everything a user's run does.
- ``shared``: the same with ``share_prefix=True`` (the common system prompt run once per batch).
- ``trl``: ``trl.SFTTrainer`` configured for completion-only loss as its docs say
  (``completion_only_loss=True``; the dataset is TRL's own tokenized prompt-completion form,
  ``input_ids`` + ``completion_mask``, so it sees our exact tokens and masks), packing and
  padding-free off, sequential sampling, padded to a multiple of 8 like ours: the same batches.
- ``raw``: forward (``lm_loss_sum``, the same math) + backward + clip + ``AdamW.step`` over the
  same batches collated up front: no data loader, no accelerate — the limit for the data path.
- ``raw-hf`` (only with ``--arms``): the loop most people write first, ``model(**batch,
  labels=...).loss`` with full-vocabulary logits at every position.

The arms run as threads that hand one baton round-robin (A B C D, A B C D, ...): only the holder
computes, so each optimizer step is timed alone yet under the same machine load as its neighbours
(this 2-core machine is shared and noisy). A step's time runs from receiving the baton to the end
of its optimizer step, so it includes each loop's own work between steps (fetching and moving the
next batch, logging). The first ``--warmup`` steps (and each arm's setup) are not counted.
Tokens/s counts the same tokens in every arm: non-pad input tokens of the measured steps.

Needs ``trl`` for the TRL arm (``pip install -e '.[bench]'``); without it that arm is skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

ARMS = ("trajforge", "shared", "trl", "raw")
EXTRA_ARMS = ("raw-hf",)
TRL_MISSING = ("trl is not installed, so the TRL SFTTrainer arm is skipped; install it with "
               "`pip install -e '.[bench]'` (trl is in trajforge's `bench` extra)")


def one_malloc_arena() -> None:
    """glibc gives every thread its own malloc arena and never lends one arena's freed memory to
    another thread: four arms in four threads would each keep their own high-water mark of
    activations (we saw 18 GB resident for what one process does in 7). One arena, as a
    single-threaded trainer has, keeps the comparison's memory that of one run."""
    import ctypes
    import ctypes.util

    libc = ctypes.util.find_library("c")
    if libc and sys.platform.startswith("linux"):
        ctypes.CDLL(libc).mallopt(-8, 1)  # M_ARENA_MAX = 1


# ---- the baton ------------------------------------------------------------------------------


class Relay:
    """One baton passed round-robin among named arms; an arm computes only while it holds it."""

    def __init__(self, names: list[str]):
        self.order, self.turn, self.done = list(names), 0, set()
        self.cond = threading.Condition()

    def wait(self, name: str) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.order[self.turn] == name)

    def pass_on(self, name: str, finished: bool = False) -> None:
        with self.cond:
            if finished:
                self.done.add(name)
            if len(self.done) < len(self.order):
                i = self.turn
                while True:
                    i = (i + 1) % len(self.order)
                    if self.order[i] not in self.done:
                        break
                self.turn = i
            self.cond.notify_all()


class Clock:
    """One arm's step timer. ``stepped(k)`` is called at the end of its optimizer step k (1-based):
    it records the time since the baton came, hands the baton on and waits for its next turn. After
    the last step it keeps the baton, so the arm's wrap-up (saving an adapter) runs alone, untimed."""

    def __init__(self, name: str, relay: Relay, warmup: int, total: int):
        self.name, self.relay, self.warmup, self.total = name, relay, warmup, total
        self.seconds: list[float] = []
        self.steps_seen = 0
        self.began = 0.0

    def start(self) -> None:
        self.relay.wait(self.name)
        self.began = time.perf_counter()

    def stepped(self, step: int) -> None:
        elapsed = time.perf_counter() - self.began
        self.steps_seen = step
        if step > self.warmup:
            self.seconds.append(elapsed)
        if step < self.total:
            self.relay.pass_on(self.name)
            self.relay.wait(self.name)
            self.began = time.perf_counter()


# ---- the data every arm sees ----------------------------------------------------------------


class Workload(NamedTuple):
    trajectories: list  # the N trajectories train_sft is given (one sample each)
    samples: list  # their samples (train/sequences.Sample), in build order
    micro: list[list[int]]  # micro-batches of sample indices, in training order
    pad_id: int
    tokens: list[int]  # non-pad input tokens per micro-batch (= per optimizer step)
    loss_tokens: list[int]


def sft_config(args, share_prefix: bool):
    from trajforge.train.sft import SFTConfig

    # Every arm takes its LoRA and optimiser numbers from here (LoraSettings' defaults; the lr is
    # given, since SFT's own would be derived from the model and data: train/defaults.py).
    return SFTConfig(epochs=1.0, replay_share=0.0, batch_size=args.batch, grad_accum=1, lr=2e-4, max_len=args.max_len,
                     max_steps=args.warmup + args.steps, dtype="float32", device="cpu", seed=args.seed,
                     gradient_checkpointing=args.gradient_checkpointing, share_prefix=share_prefix)


def workload(args, trajs: list) -> Workload:
    """N trajectories that make one sample each within ``--max-len``, and the micro-batches
    ``train_sft`` will make of them (its own ``epoch_rows``: length-grouped, batches shuffled)."""
    from transformers import AutoTokenizer

    from trajforge.policies.models import resolve
    from trajforge.train.sft import build_samples, epoch_rows, select

    cfg = sft_config(args, share_prefix=False)
    tok = AutoTokenizer.from_pretrained(resolve(args.model))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    data, _ = select(trajs, cfg)
    n = args.batch * (args.warmup + args.steps)
    chosen, samples = [], []
    for t in data:
        built, _ = build_samples([t], tok, args.model, cfg, {})
        if len(built) == 1:
            chosen.append(t)
            samples.append(built[0])
        if len(chosen) == n:
            break
    if len(chosen) < n:
        raise SystemExit(f"need {n} trajectories of one sample within --max-len {args.max_len}; found {len(chosen)}")
    micro = epoch_rows(samples, cfg.epochs, cfg.batch_size, cfg.seed)
    tokens = [sum(len(samples[i].input_ids) for i in rows) for rows in micro]
    loss_tokens = [sum(sum(samples[i].loss_mask[1:]) for i in rows) for rows in micro]
    return Workload(chosen, samples, micro, tok.pad_token_id, tokens, loss_tokens)


def trajectories(args) -> list:
    from trajforge.store import TrajectoryStore

    store = args.data
    if store is None:
        sys.path.insert(0, str(Path(__file__).parent))
        from byo_fixture import build_store

        store = build_store(Path(args.work) / "byo")
    trajs = TrajectoryStore(store).read()
    if not trajs:
        raise SystemExit(f"no trajectories in {store}")
    return trajs


# ---- the arms -------------------------------------------------------------------------------


class StepHook:
    """What ``train_sft`` takes as its in-loop evaluator: ``hook(net, tok)`` gives the callback
    ``fit`` runs after every optimizer step."""

    def __init__(self, clock: Clock):
        self.clock = clock

    def hook(self, net, tok) -> Callable[[int], None]:
        return self.clock.stepped


def run_trajforge(args, work: Workload, clock: Clock, share_prefix: bool) -> dict[str, Any]:
    from trajforge.train.sft import train_sft

    out = Path(args.work) / f"adapter-{clock.name}"
    result = train_sft(work.trajectories, args.model, out, sft_config(args, share_prefix), progress=False,
                       evaluator=StepHook(clock))
    used = sum(work.tokens[: clock.total])
    if result.tokens != used:  # the proof that this arm trained on the very batches the others did
        raise RuntimeError(f"train_sft trained on {result.tokens} tokens, the other arms on {used}")
    return {"first_loss": result.losses[0], "losses": result.losses}


def lora_net(args):
    from trajforge.policies.models import resolve
    from trajforge.train.model import lora_model

    return lora_model(resolve(args.model), sft_config(args, share_prefix=False), device="cpu")


def raw_batches(work: Workload, total: int) -> list[dict[str, Any]]:
    from trajforge.train.sequences import collate

    return [collate([work.samples[i] for i in rows], work.pad_id, device="cpu") for rows in work.micro[:total]]


def run_raw(args, work: Workload, clock: Clock, hf_loss: bool = False) -> dict[str, Any]:
    import torch

    from trajforge.train.losses import lm_loss_sum

    net, _ = lora_net(args)
    cfg = sft_config(args, share_prefix=False)
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    batches = raw_batches(work, clock.total)
    net.train()
    losses = []
    for step, (b, count) in enumerate(zip(batches, work.loss_tokens), start=1):
        if hf_loss:  # mean over the batch's loss tokens, through full logits
            loss = net(input_ids=b["input_ids"], attention_mask=b["attention_mask"], labels=b["labels"]).loss
        else:
            loss = lm_loss_sum(net, b["input_ids"], b["attention_mask"], b["labels"], False) / max(1, count)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        clock.stepped(step)
    return {"first_loss": losses[0], "losses": losses}


def run_trl(args, work: Workload, clock: Clock) -> dict[str, Any]:
    import datasets
    import trl
    from peft import LoraConfig
    from transformers import TrainerCallback

    from trajforge.policies.loading import load_base
    from trajforge.policies.models import resolve

    cfg = sft_config(args, share_prefix=False)
    base, tok, _ = load_base(resolve(args.model), "float32", "cpu")
    order = [work.samples[i] for rows in work.micro[: clock.total] for i in rows]
    # TRL's tokenized prompt-completion form: what its own tokenizer step makes of a
    # {"prompt", "completion"} row, here with our exact ids and (multi-turn) masks.
    ds = datasets.Dataset.from_list([{"input_ids": s.input_ids, "completion_mask": s.loss_mask} for s in order])
    config = trl.SFTConfig(
        output_dir=str(Path(args.work) / "trl"), completion_only_loss=True, packing=False, padding_free=False,
        max_length=args.max_len, pad_to_multiple_of=8, per_device_train_batch_size=args.batch,
        gradient_accumulation_steps=1, max_steps=clock.total, learning_rate=cfg.lr, weight_decay=0.0,
        max_grad_norm=1.0, lr_scheduler_type="cosine", warmup_steps=clock.total // 20, optim="adamw_torch",
        train_sampling_strategy="sequential", gradient_checkpointing=args.gradient_checkpointing,
        bf16=False, fp16=False, use_cpu=True, seed=args.seed, save_strategy="no", report_to="none",
        disable_tqdm=True, dataloader_pin_memory=False, logging_first_step=True)

    class Stepped(TrainerCallback):
        def on_step_end(self, _args, state, control, **kwargs):
            clock.stepped(state.global_step)

    peft = LoraConfig(r=cfg.r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.dropout, target_modules=cfg.targets,
                      task_type="CAUSAL_LM")
    trainer = trl.SFTTrainer(model=base, args=config, train_dataset=ds, processing_class=tok, peft_config=peft,
                             callbacks=[Stepped()])
    out = trainer.train()
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"first_loss": logged[0], "train_loss": out.training_loss}


RUNNERS: dict[str, Callable[[Any, Workload, Clock], dict]] = {
    "trajforge": lambda a, w, c: run_trajforge(a, w, c, share_prefix=False),
    "shared": lambda a, w, c: run_trajforge(a, w, c, share_prefix=True),
    "trl": run_trl,
    "raw": run_raw,
    "raw-hf": lambda a, w, c: run_raw(a, w, c, hf_loss=True),
}


# ---- running and reporting ------------------------------------------------------------------


def run_arms(args, work: Workload, names: list[str]) -> dict[str, dict[str, Any]]:
    total = args.warmup + args.steps
    relay = Relay(names)
    clocks = {n: Clock(n, relay, args.warmup, total) for n in names}
    results: dict[str, dict[str, Any]] = {n: {} for n in names}

    def arm(name: str) -> None:
        clock = clocks[name]
        try:
            clock.start()
            results[name] = RUNNERS[name](args, work, clock)
            if clock.steps_seen != total:
                raise RuntimeError(f"{name} ran {clock.steps_seen} steps, not {total}")
        except BaseException as exc:  # reported below; the other arms go on
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            relay.pass_on(name, finished=True)

    threads = [threading.Thread(target=arm, args=(n,), name=n) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    measured = sum(work.tokens[args.warmup: total])
    for n in names:
        secs = clocks[n].seconds
        if "error" not in results[n] and secs:
            per_step = [tok / s for tok, s in zip(work.tokens[args.warmup: total], secs)]
            results[n].update(tokens_per_s=measured / sum(secs), seconds=sum(secs), step_seconds=secs,
                              median_step_tokens_per_s=statistics.median(per_step))
    return results


PAIRS = (("trajforge/raw", "trajforge", "raw"), ("trajforge/trl", "trajforge", "trl"),
         ("shared/trajforge", "shared", "trajforge"), ("shared/trl", "shared", "trl"), ("raw/raw-hf", "raw", "raw-hf"))


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, float]:
    def rate(n: str) -> float | None:
        return results.get(n, {}).get("tokens_per_s")

    out = {}
    for label, a, b in PAIRS:
        if rate(a) and rate(b):
            out[label] = rate(a) / rate(b)
    return out


def step_ratios(results: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Median over steps of the speed ratio of two arms on the same step (same batch, neighbouring
    times): robust to the one step a busy machine stalls, which the totals are not."""
    out = {}
    for label, a, b in PAIRS:
        sa, sb = results.get(a, {}).get("step_seconds"), results.get(b, {}).get("step_seconds")
        if sa and sb:
            out[label] = statistics.median(tb / ta for ta, tb in zip(sa, sb))
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--data", type=Path, default=None,
                    help="a trajectory store (default: build benchmarks/byo_fixture.py's into --work)")
    ap.add_argument("--steps", type=int, default=8, help="measured optimizer steps per arm")
    ap.add_argument("--warmup", type=int, default=1, help="steps per arm not counted (after its setup)")
    ap.add_argument("--batch", type=int, default=2, help="sequences per micro-batch = per optimizer step")
    ap.add_argument("--max-len", type=int, default=1024)
    ap.add_argument("--gradient-checkpointing", action="store_true",
                    help="on in every arm (then the shared-prefix cache is off and 'shared' equals 'trajforge')")
    ap.add_argument("--arms", default=",".join(ARMS), help=f"comma list of {', '.join(ARMS + EXTRA_ARMS)}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    names = [n for n in args.arms.split(",") if n]
    unknown = set(names) - set(ARMS + EXTRA_ARMS)
    if unknown:
        ap.error(f"unknown arms {sorted(unknown)}")
    if "trl" in names and importlib.util.find_spec("trl") is None:
        print(TRL_MISSING, file=sys.stderr)
        names.remove("trl")
    if args.steps < 1 or args.warmup < 0:
        ap.error("--steps must be at least 1 and --warmup at least 0")

    one_malloc_arena()
    import torch

    with tempfile.TemporaryDirectory(prefix="throughput-") as scratch:
        args.work = args.work or scratch
        work = workload(args, trajectories(args))
        load_before = os.getloadavg()
        began = time.perf_counter()
        results = run_arms(args, work, names)
        report = {
            "model": args.model, "batch": args.batch, "max_len": args.max_len, "steps": args.steps,
            "warmup": args.warmup, "gradient_checkpointing": args.gradient_checkpointing, "dtype": "float32",
            "samples": args.batch * (args.warmup + args.steps),
            "measured_tokens": sum(work.tokens[args.warmup: args.warmup + args.steps]),
            "measured_loss_tokens": sum(work.loss_tokens[args.warmup: args.warmup + args.steps]),
            "torch_threads": torch.get_num_threads(), "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(), "wall_seconds": time.perf_counter() - began,
            "arms": results, "ratios": ratios(results), "step_ratios": step_ratios(results),
        }
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    if any("error" in r for r in results.values()):
        raise SystemExit(1)
    return report


def print_report(r: dict[str, Any]) -> None:
    print(f"model {r['model']}, fp32, batch {r['batch']}, max_len {r['max_len']}, gradient checkpointing "
          f"{'on' if r['gradient_checkpointing'] else 'off'}, {r['steps']} measured steps per arm "
          f"({r['measured_tokens']} non-pad tokens, {r['measured_loss_tokens']} loss tokens), "
          f"load average {r['loadavg_before'][0]:.1f} -> {r['loadavg_after'][0]:.1f}")
    for name, a in r["arms"].items():
        if "error" in a:
            print(f"  {name:10s} FAILED {a['error']}")
        else:
            print(f"  {name:10s} {a['tokens_per_s']:8.1f} tokens/s  ({a['seconds']:.1f} s; median step "
                  f"{a['median_step_tokens_per_s']:.1f} tokens/s)")
    firsts = {n: round(a["first_loss"], 5) for n, a in r["arms"].items() if "first_loss" in a}
    print(f"  first-step loss per arm (LoRA B starts at 0, so all equal the base model's): {firsts}")
    print("  ratio of tokens/s      total   median per step")
    for label, v in r["ratios"].items():
        print(f"  {label:18s} x{v:5.2f}   x{r['step_ratios'][label]:.2f}")


if __name__ == "__main__":
    main()
