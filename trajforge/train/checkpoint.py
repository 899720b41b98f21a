"""Atomic, resumable checkpoints: safetensors + JSON only, never pickle.

A checkpoint holds the adapter, the optimizer moments (safetensors), every process's RNG state
(safetensors; accelerate's ``save_state`` would pickle them) and the step. It is written to a
temporary folder, fsynced and renamed into place, then a ``latest`` pointer is replaced
atomically, so a kill at any moment leaves the previous checkpoint intact. With several
processes the main one writes the adapter and optimizer (replicated under DDP) and each process
its own RNG file, between barriers.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

CHECKPOINTS = "checkpoints"


class NonFiniteWeights(RuntimeError):
    """Refusing to write a checkpoint whose weights contain NaN or Inf."""


class Checkpointer:
    """Checkpoints under one folder: ``step-000012/`` plus a ``latest`` pointer."""

    def __init__(self, root: str | Path, keep: int = 2, runtime=None):
        self.root = Path(root)
        self.keep = max(1, keep)
        self.runtime = runtime

    @property
    def _rank(self) -> int:
        return self.runtime.rank if self.runtime else 0

    def _barrier(self) -> None:
        if self.runtime:
            self.runtime.barrier()

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

        final = self.root / f"step-{step:06d}"
        tmp = self.root / f".tmp-{final.name}"
        main = self._rank == 0
        if main:
            adapter = {k: v.detach().contiguous().cpu() for k, v in get_peft_model_state_dict(net).items()}
            if not all(torch.isfinite(v).all() for v in adapter.values()):
                raise NonFiniteWeights(f"adapter weights at step {step} are not finite; checkpoint not written")
            self.root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
        self._barrier()
        save_file(rng_tensors(), str(tmp / f"rng-{self._rank}.safetensors"))
        self._barrier()
        if main:
            save_file(adapter, str(tmp / "adapter.safetensors"))
            moments, groups = _optimizer_tensors(opt)
            save_file(moments, str(tmp / "optimizer.safetensors"))
            state = {"step": step, "param_groups": groups, "python_rng": jsonable(random.getstate()),
                     "processes": self.runtime.world if self.runtime else 1, **extra}
            (tmp / "state.json").write_text(json.dumps(state))
            for f in tmp.iterdir():
                _fsync(f)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            _atomic_write(self.root / "latest", final.name)
            self._prune(step)
        self._barrier()
        return final

    def state(self, path: Path) -> dict[str, Any]:
        """A checkpoint's ``state.json`` (step, result, plan), without loading anything."""
        return json.loads((path / "state.json").read_text())

    def load(self, path: Path, net, opt) -> dict[str, Any]:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        device = next(p for p in net.parameters() if p.requires_grad).device
        adapter = {k: v.to(device) for k, v in load_file(str(path / "adapter.safetensors")).items()}
        set_peft_model_state_dict(net, adapter)
        state = self.state(path)
        # Loaded on the CPU: torch's load_state_dict moves moments to their parameters' device and
        # keeps Adam's step counters where it wants them.
        _load_optimizer(opt, load_file(str(path / "optimizer.safetensors")), state["param_groups"])
        rng = path / f"rng-{self._rank}.safetensors"
        if not rng.exists():
            raise ValueError(f"{path} was written by {state.get('processes', 1)} process(es); resume with "
                             f"the same number (no RNG state for process {self._rank})")
        set_rng(load_file(str(rng)))
        random.setstate(tuplify(state["python_rng"]))
        return state

    def _prune(self, current: int) -> None:
        """Keep the ``keep`` newest checkpoints up to ``current``. One of a later step is an earlier
        run's in the same folder (this run writes its steps in order): left there, it would sort
        after this run's and prune them, ``latest`` pointing at a deleted folder."""
        steps = sorted((int(p.name[5:]), p) for p in self.root.glob("step-*")
                       if p.is_dir() and p.name[5:].isdigit())
        later = [p for n, p in steps if n > current]
        for old in later + [p for n, p in steps if n <= current][: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)


def rng_tensors() -> dict[str, Any]:
    """This process's torch RNG states (CPU, and CUDA when present) as tensors."""
    import torch

    out = {"torch_rng": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda_rng"] = torch.cuda.get_rng_state()
    return out


def set_rng(tensors: dict[str, Any]) -> None:
    import torch

    torch.set_rng_state(tensors["torch_rng"])
    if "cuda_rng" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["cuda_rng"])


def _optimizer_tensors(opt) -> tuple[dict[str, Any], list[dict]]:
    """AdamW's state as flat tensors (safetensors) and its param groups as JSON."""
    sd = opt.state_dict()
    tensors = {f"{idx}.{k}": v.detach().clone().contiguous().reshape(v.shape).cpu()
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


def jsonable(obj):
    """An RNG state (nested tuples) as JSON lists; ``tuplify`` turns it back."""
    return [jsonable(x) for x in obj] if isinstance(obj, (tuple, list)) else obj


def tuplify(obj):
    return tuple(tuplify(x) for x in obj) if isinstance(obj, list) else obj


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
