"""The prepared GPU check: SFT tokens/s and peak memory next to ``trajforge plan``, generation, a loop.

    bash benchmarks/gpu_bundle.sh                        # here, once: wheels + tokenizer (gitignored)
    python benchmarks/gpu_check.py --out $OUT            # on one GPU (<= 5 min on an H200)
    python benchmarks/gpu_check.py --out /tmp/gc --dry-run   # the same code on this CPU, toy sizes

For each size (Qwen2-style 0.5B, 1.5B, 7B shapes from ``train/shapes.py`` with Qwen2's 151,936-entry
vocabulary, random init in bf16 straight on the GPU: no weights travel) it runs the real
``train_sft`` (``train.calibrate.run_here``: the loader, sequence builder, chunked loss and
accelerate loop of ``trajforge train sft``) with ``train sft``'s defaults for a few steps on a
store of executed SQL episodes, and prints tokens/s after the first step and
``torch.cuda.max_memory_allocated`` next to ``plan``'s ``allocated_gb`` (on a CPU: the peak
resident set next to ``total_gb``); then batched-generation tokens/s (``generate`` on 16 prompts,
a fixed number of new tokens). The random base is handed to ``train_sft`` by replacing
``train.model.load_base`` for that call: saving and re-reading 15 GB of random weights would eat
the time budget. Last, a tiny synth → collect → SFT → eval loop on the device through the normal
loading path (a small random model saved with the embedded tokenizer); then, on that model made
to replay its train tasks, one RFT round, DPO and GRPO on the device (``gpu_learn.py``).

Every size has a time cap (``CAPS``); a stage that would start past it is skipped and the row
says so. Each finished row is appended to ``OUT/gpu_check.jsonl`` and the table is rewritten to
``OUT/gpu_check.md`` as it goes, so a run cut short still leaves its partial table.

What the GPU machine lacks travels in ``benchmarks/gpu_bundle/`` (``gpu_bundle.sh``): cp312 wheels
(unpacked into ``SITE``, outside the carried folder, and put at the END of ``sys.path``, so the
machine's own packages win) and the embedded model's tokenizer files (``gpu_bundle/tokenizer``).
The repository is used from its checkout (no install).
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "benchmarks" / "gpu_bundle"
SITE = Path(tempfile.gettempdir()) / "trajforge-gpu-bundle-site"
"""Where the wheels are unpacked: not inside the bundle, which a dry run here would otherwise
grow past the 64 MiB the device run may carry."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")

SIZES = {"0.5b": "qwen2.5-0.5b", "1.5b": "qwen2.5-1.5b", "7b": "qwen2.5-7b"}
CAPS = {"0.5b": 50.0, "1.5b": 60.0, "7b": 100.0, "loop": 60.0, "learn": 150.0}
"""Seconds per size, for the loop, and for the stages after it (``gpu_learn.py``; a stage that would
start past its cap is skipped): ~7 minutes in all, inside an H200 loan's 15."""
TOTAL_CAP = 285.0
VOCAB = 151_936
"""Qwen2's vocabulary (the embedded tokenizer's 49,152 ids fall inside it)."""
TOY = {"hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
       "num_key_value_heads": 2}
"""--dry-run's shape for every size (each keeps its own name, so the same code paths run)."""
LOOP_MODEL = {"hidden_size": 256, "intermediate_size": 640, "num_hidden_layers": 4, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 49152, "tie_word_embeddings": True}
GEN_PROMPTS, GEN_TOKENS = 16, 128
DRY_SLOWDOWN = 8.0
"""--dry-run multiplies every time cap by this: a shared 2-core CPU checks the code, not the time."""


def bootstrap() -> None:
    """The checkout and the bundle's wheels on ``sys.path`` (wheels unpacked once into ``SITE``)."""
    sys.path.insert(0, str(ROOT))
    wheels = sorted((BUNDLE / "wheels").glob("*.whl"))
    site = SITE
    names = "\n".join(w.name for w in wheels)
    if wheels and not ((site / ".unpacked").exists() and (site / ".unpacked").read_text() == names):
        site.mkdir(parents=True, exist_ok=True)
        for wheel in wheels:  # a wheel is a zip of its import folders: unpacking is installing
            with zipfile.ZipFile(wheel) as z:
                z.extractall(site)
        (site / ".unpacked").write_text(names)
    if site.exists():
        sys.path.append(str(site))


def tokenizer_dir() -> Path:
    """The bundle's tokenizer files, else the embedded model's (here, where it is cached)."""
    if (BUNDLE / "tokenizer" / "tokenizer.json").exists():
        return BUNDLE / "tokenizer"
    from trajforge.policies.models import resolve

    return Path(resolve("smollm2-135m"))


def model_folder(folder: Path, fields: dict) -> Path:
    """A Qwen2 ``config.json`` of ``fields`` plus the tokenizer files: what ``plan`` and
    ``train_sft`` read a model's shape and tokenizer from."""
    from transformers import Qwen2Config

    folder.mkdir(parents=True, exist_ok=True)
    Qwen2Config(max_position_embeddings=32768, bos_token_id=1, eos_token_id=2, pad_token_id=2,
                **fields).save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if (tokenizer_dir() / name).exists():
            shutil.copy(tokenizer_dir() / name, folder / name)
    return folder


def size_fields(name: str, dry: bool) -> dict:
    from trajforge.train.shapes import KNOWN

    known = KNOWN[SIZES[name]]
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")
    shape = TOY if dry else {k: known[k] for k in keys}
    return {**shape, "vocab_size": VOCAB, "tie_word_embeddings": known["tie_word_embeddings"]}


class Table:
    """Rows as they finish: ``gpu_check.jsonl`` appended, ``gpu_check.md`` rewritten."""

    COLUMNS = ("size", "params_b", "sft_tokens_per_s", "measured_gb", "planned_gb", "ratio", "gen_tokens_per_s",
               "seconds", "note")

    def __init__(self, out: Path):
        self.out, self.rows = out, []
        out.mkdir(parents=True, exist_ok=True)

    def add(self, row: dict) -> None:
        self.rows.append(row)
        with (self.out / "gpu_check.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")
        lines = ["| " + " | ".join(self.COLUMNS) + " |", "|" + "---|" * len(self.COLUMNS)]
        lines += ["| " + " | ".join(_cell(r.get(c)) for c in self.COLUMNS) + " |" for r in self.rows]
        (self.out / "gpu_check.md").write_text("\n".join(lines) + "\n")
        print(lines[-1], flush=True)


def _cell(v) -> str:
    return f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v))


def random_base(folder: Path, device: str, dtype):
    """(model, tokenizer) of ``folder``'s config, random init, built on ``device`` in ``dtype``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    with torch.device(device):
        net = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder), dtype=dtype)
    tok = AutoTokenizer.from_pretrained(folder)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return net, tok


def sft_settings(device: str, dry: bool, cap: float) -> dict:
    """``train sft``'s defaults, a few steps (replay off: it would self-distill a random model)."""
    return {"device": device, "max_steps": 2 if dry else 4, "replay_share": 0.0, "max_seconds": cap,
            **({"max_len": 1024} if dry else {})}


def check_size(name: str, out: Path, store: Path, device: str, dry: bool, table: Table, deadline: float) -> None:
    import torch

    import trajforge.train.model as train_model
    from trajforge.cli.plan_cmd import detected_gpu_gb
    from trajforge.train.calibrate import run_here
    from trajforge.train.plan import GPU_GB, Hardware, make_plan
    from trajforge.train.plan_data import read_data
    from trajforge.train.sft import SFTConfig
    from trajforge.train.shapes import model_shape

    began = time.perf_counter()
    cap = min(CAPS[name] * (DRY_SLOWDOWN if dry else 1.0), deadline - began)
    row = {"size": name, "device": device}
    if cap < 15:
        table.add({**row, "note": "skipped: total time cap"})
        return
    folder = model_folder(out / f"model-{name}", size_fields(name, dry))
    settings = sft_settings(device, dry, 0.6 * cap)
    shape = model_shape(str(folder))
    hw = Hardware(device="cuda" if device.startswith("cuda") else "cpu", gpu_gb=detected_gpu_gb() or GPU_GB)
    dtype = torch.bfloat16 if hw.device == "cuda" else torch.float32
    net, tok = random_base(folder, device, dtype)
    original = train_model.load_base
    train_model.load_base = lambda *a, **k: (net, tok, device)  # the random base, not a 15 GB file
    try:
        if hw.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        measured = run_here(str(folder), str(store), str(out / f"run-{name}"), settings)
    finally:
        train_model.load_base = original
    # The plan for what the run settled on this device (its derived micro-batch, accumulation and
    # checkpointing, from the adapter's meta), so planned and measured describe one run.
    ran = json.loads((out / f"run-{name}" / "trajforge_adapter.json").read_text())["config"]
    cfg = SFTConfig(**settings | {k: ran[k] for k in ("batch_size", "grad_accum", "gradient_checkpointing")})
    plan = make_plan(shape, cfg, hw, read_data(store, str(folder), cfg, hw))
    planned = plan.train.allocated_gb if hw.device == "cuda" else plan.train.total_gb
    row |= {"params_b": round(shape.params().total / 1e9, 3), "sft_tokens_per_s": measured.tokens_per_s,
            "steps": measured.steps, "measured_gb": round(measured.peak_gb, 3), "planned_gb": planned,
            "ratio": round(planned / measured.peak_gb, 3) if measured.peak_gb else None,
            "plan_total_gb": plan.train.total_gb, "workload": plan.workload.model_dump(),
            "settled": {k: ran[k] for k in ("batch_size", "grad_accum", "gradient_checkpointing")},
            "memory_gb_per_step": measured.memory_gb}
    if measured.steps < 2:
        row["note"] = "one step within the cap: no tokens/s after the first step"
    if time.perf_counter() - began < cap - 10:
        row["gen_tokens_per_s"] = generation_tokens_per_s(net, tok, 8 if dry else GEN_TOKENS)
    else:
        row["note"] = ((row.get("note", "") + "; ") if row.get("note") else "") + "generation skipped: size time cap"
    row["seconds"] = round(time.perf_counter() - began, 1)
    table.add(row)
    del net
    gc.collect()
    if hw.device == "cuda":
        torch.cuda.empty_cache()


def generation_tokens_per_s(net, tok, new_tokens: int) -> float:
    """Greedy batched generation of exactly ``new_tokens`` for ``GEN_PROMPTS`` chat prompts."""
    import torch

    tok.padding_side = "left"
    texts = [tok.apply_chat_template([{"role": "user", "content": f"Question {i}: list the tables."}],
                                     tokenize=False, add_generation_prompt=True) for i in range(GEN_PROMPTS)]
    enc = tok(texts, return_tensors="pt", padding=True).to(net.device)
    net.eval()
    with torch.no_grad():
        net.generate(**enc, max_new_tokens=2, min_new_tokens=2, do_sample=False, pad_token_id=tok.pad_token_id)
        _sync(net.device)
        t0 = time.perf_counter()
        net.generate(**enc, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                     pad_token_id=tok.pad_token_id)
        _sync(net.device)
    return round(GEN_PROMPTS * new_tokens / (time.perf_counter() - t0), 1)


def reset_peak(device: str) -> None:
    """Free cached blocks and restart ``max_memory_allocated``, so the next row's peak is its own."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _sync(device) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def check_loop(out: Path, device: str, dry: bool, table: Table, deadline: float) -> tuple | None:
    """synth → collect (expert) → SFT → eval (the HF policy on ``device``) with a small random model;
    (its folder, train tasks, expert episodes) for the learning stages."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from trajforge.eval.run import collect
    from trajforge.policies.hf import HFPolicy
    from trajforge.store import TrajectoryStore
    from trajforge.tasks import synthesize
    from trajforge.train.sft import SFTConfig, train_sft

    began = time.perf_counter()
    if deadline - began < 20:
        table.add({"size": "loop", "note": "skipped: total time cap"})
        return None
    folder = model_folder(out / "model-loop", LOOP_MODEL)
    reset_peak(device)  # the row's peak is the loop's own, not the last size's
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder)).save_pretrained(folder)
    report = synthesize("sql", 40, seed=1)
    train = [t for t in report.tasks if t.split == "train"][:16]
    test = [t for t in report.tasks if t.split != "train"][:4 if dry else 8]
    collect(train, _expert(), out / "loop-store", show_progress=False)
    expert = TrajectoryStore(out / "loop-store").read()
    res = train_sft(expert, str(folder), out / "loop-adapter",
                    SFTConfig(device=device, max_steps=2 if dry else 4, replay_share=0.0, max_len=2048),
                    progress=False)
    policy = HFPolicy(str(folder), adapter=str(out / "loop-adapter"), device=device, max_new_tokens=32)
    evaluated = collect(test, policy, out / "loop-eval", show_progress=False)
    completed = sum(1 for t in evaluated if t.outcome is not None and t.outcome.correct)
    table.add({"size": "loop", "device": device, "steps": res.steps, "measured_gb": round(res.peak_memory_gb, 3),
               "seconds": round(time.perf_counter() - began, 1),
               "note": f"synth {len(report.tasks)} → collect {len(train)} → SFT {res.steps} steps → eval "
                       f"{len(evaluated)} episodes on {device}, {completed} completed (random weights: 0 is expected)"})
    return folder, train, expert


def _expert():
    from trajforge.policies import make_policy

    return make_policy("expert")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the table (written as it goes)")
    ap.add_argument("--dry-run", action="store_true", help="this CPU, toy sizes, the same code")
    ap.add_argument("--sizes", default=",".join(SIZES), help="comma-separated: " + ", ".join(SIZES))
    ap.add_argument("--no-loop", action="store_true", help="skip the synth → collect → SFT → eval loop")
    ap.add_argument("--no-learn", action="store_true", help="skip rft, dpo and grpo after the loop")
    args = ap.parse_args()
    start = time.perf_counter()
    deadline = start + TOTAL_CAP * (DRY_SLOWDOWN if args.dry_run else 1.0)
    bootstrap()
    import torch

    from trajforge.train.calibrate import synthetic_store

    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: use --dry-run on a CPU")
    if device == "cuda":
        print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    out = args.out
    table = Table(out)
    store = synthetic_store(out / "store", n=8 if args.dry_run else 24)
    for name in args.sizes.split(","):
        try:
            check_size(name, out, store, device, args.dry_run, table, deadline)
        except Exception as e:  # one size failing (e.g. out of memory) still leaves the others' rows
            table.add({"size": name, "note": f"failed: {type(e).__name__}: {str(e)[:200]}"})
            gc.collect()
    if not args.no_loop:
        try:
            loop_cap = CAPS["loop"] * (DRY_SLOWDOWN if args.dry_run else 1.0)
            loop = check_loop(out, device, args.dry_run, table, min(deadline, time.perf_counter() + loop_cap))
        except Exception as e:
            loop = None
            table.add({"size": "loop", "note": f"failed: {type(e).__name__}: {str(e)[:200]}"})
        if loop and not args.no_learn:
            try:
                from benchmarks.gpu_learn import check_learning

                learn_cap = CAPS["learn"] * (DRY_SLOWDOWN if args.dry_run else 1.0)
                check_learning(out, *loop, device, args.dry_run, table, time.perf_counter() + learn_cap)
            except Exception as e:
                table.add({"size": "learn", "note": f"failed: {type(e).__name__}: {str(e)[:300]}"})
    print(f"# {time.perf_counter() - start:.0f} s; table in {out / 'gpu_check.md'}", flush=True)


if __name__ == "__main__":
    main()
