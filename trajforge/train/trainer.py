"""The optimisation loop every recipe shares: LoRA set-up, guarded steps, atomic checkpoints, resume.

SFT, DPO and GRPO differ only in how a step's batch is made and what its loss is; the rest lives
here once:

- ``fit`` runs AdamW with warm-up + cosine decay for ``total`` steps. ``batch_at(step)`` makes the
  step's batch (a slice of pre-rendered data, or fresh rollouts for GRPO) and ``loss_fn(batch)``
  returns ``(loss, stats)``.
- A NaN/Inf guard: a step whose loss or gradient norm is not finite is skipped (gradients dropped,
  optimizer and schedule untouched) and counted; a checkpoint is never written from non-finite
  weights.
- Checkpoints are written to a temporary folder, fsynced and renamed into place, then a ``latest``
  pointer is replaced atomically, so a kill at any moment leaves the previous checkpoint intact.
  They hold the adapter, the optimizer moments (safetensors, never pickle), the RNG states and the
  step; ``resume=True`` continues from the latest one and reproduces an uninterrupted run.
- Curves (loss and in-loop evaluation) go to ``curves.jsonl`` and TensorBoard when installed.
- ``max_seconds`` bounds the wall time: a step that would end past it is not started.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from trajforge.train.curves import Curves

CHECKPOINTS = "checkpoints"


class LoraSettings(BaseModel):
    """Adapter and optimiser settings shared by every recipe."""

    r: int = 32
    """LoRA rank."""
    alpha: int = 64
    """LoRA alpha."""
    dropout: float = 0.05
    """LoRA dropout."""
    targets: list[str] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    """Modules that get adapters."""
    lr: float = 2e-4
    """Peak learning rate (cosine decay, short warm-up)."""
    batch_size: int = 8
    """Sequences (or pairs, or tasks) per optimizer step."""
    seed: int = 0
    """Seed for data order, dropout, sampling and LoRA init."""
    max_steps: int = -1
    """Stop after this many optimizer steps (-1: the recipe's natural length)."""
    dtype: str = "auto"
    """Base-model weights: auto (bf16 where the hardware does it natively), float32 or bfloat16.
    Adapter weights and optimizer state stay fp32; matmuls run under bf16 autocast."""
    checkpoint_every: int = 0
    """Write a resumable checkpoint every N steps (0: only the final adapter)."""
    keep_checkpoints: int = 2
    """How many checkpoints to keep on disk."""
    eval_every: int = 0
    """Run the in-loop evaluation every N steps (0: never; needs eval tasks)."""
    max_seconds: float = 0.0
    """Time budget: stop before a step that would end past this many seconds of training, judged
    by the mean step time so far (0: no limit). The learning-rate schedule stays the one planned
    for the full run, so a stopped run ends before its decay finishes; the adapter is saved as
    usual and ``FitResult.stopped`` says why it ended early."""


def lora_model(path: str, cfg: LoraSettings, init_adapter: str | None = None):
    """(peft model, tokenizer): base weights frozen, a fresh trainable LoRA on top.

    ``init_adapter`` (an earlier recipe's output, e.g. SFT before DPO/GRPO) is merged into the
    base first, so the new adapter trains on top of it and "adapter disabled" means that model:
    the natural reference for DPO's ratios and GRPO's KL.
    """
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trajforge.policies.models import default_dtype

    tok = AutoTokenizer.from_pretrained(init_adapter or path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    net = AutoModelForCausalLM.from_pretrained(path, dtype=default_dtype(cfg.dtype))
    if init_adapter:
        from trajforge.policies.hf import adapter_lineage

        for step in adapter_lineage(init_adapter):  # a DPO adapter sits on its SFT adapter, etc.
            net = PeftModel.from_pretrained(net, step).merge_and_unload()
    torch.manual_seed(cfg.seed)
    net = get_peft_model(net, LoraConfig(r=cfg.r, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                                         target_modules=cfg.targets, task_type="CAUSAL_LM"))
    return net, tok


class FitResult(BaseModel):
    losses: list[float]
    """Loss per completed step (skipped steps excluded)."""
    skipped_nonfinite: int = 0
    """Steps dropped by the NaN/Inf guard."""
    resumed_from: int = 0
    """Step the run continued from (0: a fresh start)."""
    stopped: str | None = None
    """Why the run ended before ``total`` steps (``time budget``), else None."""


def fit(net, total: int, batch_at: Callable[[int], Any], loss_fn: Callable[[Any], tuple[Any, dict]],
        cfg: LoraSettings, out_dir: str | Path, name: str = "train", progress: bool = True,
        resume: bool = False, on_step: Callable[[int], dict | None] | None = None) -> FitResult:
    """Optimise ``net``'s trainable parameters for ``total`` steps; see the module docstring.

    ``loss_fn`` may return a loss that still needs ``backward`` or, when it accumulated gradients
    over micro-batches itself, a detached one. ``on_step(step)`` runs after each completed step (1-based) and may return metrics to log (the
    in-loop evaluation uses it).
    """
    import torch
    from transformers import get_cosine_schedule_with_warmup

    from trajforge.harness.progress import progress_bar

    out = Path(out_dir)
    params = [p for p in net.parameters() if p.requires_grad]
    device = next(net.parameters()).device
    bf16 = next(net.get_base_model().parameters()).dtype == torch.bfloat16
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    # No warm-up for short runs: the schedule's first warm-up step has learning rate 0.
    sched = get_cosine_schedule_with_warmup(opt, total // 20, max(1, total))
    ckpt = Checkpointer(out / CHECKPOINTS, keep=cfg.keep_checkpoints)
    start, result = 0, FitResult(losses=[])
    if resume and ckpt.latest() is not None:
        state = ckpt.load(ckpt.latest(), net, opt)
        start, result = state["step"], FitResult(**state["result"])
        result.resumed_from = start
        for _ in range(start):
            sched.step()  # the schedule is a pure function of the step
    curves = Curves(out, name, append=start > 0)
    net.train()
    began = time.perf_counter()
    with progress_bar(name, total - start, progress) as advance:
        for step in range(start, total):
            if out_of_time(began, step - start, cfg.max_seconds):
                result.stopped = "time budget"
                curves.log(step, stopped_for_time=1)
                break
            batch = batch_at(step)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                loss, stats = loss_fn(batch)
            if loss.requires_grad:  # loss_fns that micro-batch run their own backward passes
                loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
            if not (torch.isfinite(loss) and torch.isfinite(norm)):
                opt.zero_grad(set_to_none=True)  # drop the step; weights and moments untouched
                result.skipped_nonfinite += 1
                curves.log(step + 1, skipped_nonfinite=1)
            else:
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                result.losses.append(float(loss.detach()))
                curves.log(step + 1, loss=result.losses[-1], lr=sched.get_last_lr()[0],
                           grad_norm=float(norm), **stats)
            if on_step is not None:
                net.eval()
                metrics = on_step(step + 1)
                net.train()
                if metrics:
                    curves.log_eval(step + 1, metrics)
            if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0 and step + 1 < total:
                ckpt.save(step + 1, net, opt, {"result": result.model_dump()})
            advance(1)
    net.eval()
    curves.close()
    return result


def out_of_time(began: float, done: int, budget: float) -> bool:
    """Would one more step, at the mean pace of the ``done`` steps so far, end past ``budget``
    seconds? Never before the first step (its time is unknown) or without a budget."""
    if budget <= 0 or done == 0:
        return False
    elapsed = time.perf_counter() - began
    return elapsed + elapsed / done > budget


class NonFiniteWeights(RuntimeError):
    """Refusing to write a checkpoint whose weights contain NaN or Inf."""


class Checkpointer:
    """Atomic, resumable checkpoints under one folder: ``step-000012/`` plus a ``latest`` pointer."""

    def __init__(self, root: str | Path, keep: int = 2):
        self.root = Path(root)
        self.keep = max(1, keep)

    def latest(self) -> Path | None:
        pointer = self.root / "latest"
        if not pointer.exists():
            return None
        path = self.root / pointer.read_text().strip()
        return path if (path / "state.json").exists() else None

    def save(self, step: int, net, opt, extra: dict[str, Any]) -> Path:
        import torch
        from peft import get_peft_model_state_dict
        from safetensors.torch import save_file

        adapter = {k: v.detach().contiguous() for k, v in get_peft_model_state_dict(net).items()}
        if not all(torch.isfinite(v).all() for v in adapter.values()):
            raise NonFiniteWeights(f"adapter weights at step {step} are not finite; checkpoint not written")
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / f"step-{step:06d}"
        tmp = self.root / f".tmp-{final.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        save_file(adapter, str(tmp / "adapter.safetensors"))
        moments, groups = _optimizer_tensors(opt)
        save_file(moments, str(tmp / "optimizer.safetensors"))
        save_file({"torch_rng": torch.get_rng_state()}, str(tmp / "rng.safetensors"))
        state = {"step": step, "param_groups": groups, "python_rng": _jsonable(random.getstate()), **extra}
        (tmp / "state.json").write_text(json.dumps(state))
        for f in tmp.iterdir():
            _fsync(f)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        _atomic_write(self.root / "latest", final.name)
        self._prune()
        return final

    def load(self, path: Path, net, opt) -> dict[str, Any]:
        import torch
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        set_peft_model_state_dict(net, load_file(str(path / "adapter.safetensors")))
        state = json.loads((path / "state.json").read_text())
        _load_optimizer(opt, load_file(str(path / "optimizer.safetensors")), state["param_groups"])
        torch.set_rng_state(load_file(str(path / "rng.safetensors"))["torch_rng"])
        random.setstate(_tuplify(state["python_rng"]))
        return state

    def _prune(self) -> None:
        steps = sorted(p for p in self.root.glob("step-*") if p.is_dir())
        for old in steps[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)


def _optimizer_tensors(opt) -> tuple[dict[str, Any], list[dict]]:
    """AdamW's state as flat tensors (safetensors) and its param groups as JSON."""
    sd = opt.state_dict()
    tensors = {f"{idx}.{k}": v.detach().clone().contiguous().reshape(v.shape)
               for idx, st in sd["state"].items() for k, v in st.items()}
    return tensors, sd["param_groups"]


def _load_optimizer(opt, tensors: dict[str, Any], groups: list[dict]) -> None:
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        idx, _, name = key.partition(".")
        state.setdefault(int(idx), {})[name] = value
    for g in groups:
        g["betas"] = tuple(g["betas"])
    opt.load_state_dict({"state": state, "param_groups": groups})


def _jsonable(obj):
    return [_jsonable(x) for x in obj] if isinstance(obj, (tuple, list)) else obj


def _tuplify(obj):
    return tuple(_tuplify(x) for x in obj) if isinstance(obj, list) else obj


def _fsync(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)



def save_adapter(net, tokenizer, out_dir: str | Path, meta: dict[str, Any]) -> Path:
    """The final adapter plus the trajforge meta the policies check (toolset, dialect, lineage)."""
    from trajforge.policies.hf import ADAPTER_META

    out = Path(out_dir)
    net.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / ADAPTER_META).write_text(json.dumps(meta, indent=2))
    return out
