"""The one device choice every local model uses: HF policies, the trainer, in-loop eval, replay, serve.

Order: an explicit ``--device`` (or ``device=`` argument), else ``TRAJFORGE_DEVICE``, else CUDA, then
MPS, then CPU. Under ``accelerate launch`` / ``torchrun`` each process takes the GPU of its
``LOCAL_RANK`` (``cuda`` alone means "this process's GPU"), so N processes spread over N cards
without any flag.

The compute dtype follows the device: bf16 on CUDA cards that support it and on CPUs with native
bf16 (AMX / AVX512-BF16: prefill ~2.7x and decode ~1.9x faster than fp32 for the 135M model on
a 2-core AMX CPU); fp32 elsewhere (bf16 emulated in software is slower than fp32, and MPS bf16 is
partial). ``TRAJFORGE_DTYPE`` or ``--dtype`` override it.
"""

from __future__ import annotations

import os
from pathlib import Path

DEVICE_ENV = "TRAJFORGE_DEVICE"
DTYPE_ENV = "TRAJFORGE_DTYPE"
DEVICES = ("auto", "cuda", "mps", "cpu")
"""Accepted device names; ``cuda:N`` names one card."""


class DeviceUnavailable(ValueError):
    """A device was asked for that this machine does not have."""


def local_rank() -> int:
    """This process's index on its machine under accelerate/torchrun (0 when not launched so)."""
    return int(os.environ.get("LOCAL_RANK", "0") or 0)


def pick_device(requested: str | None = None) -> str:
    """The device name (``cuda:N``, ``mps`` or ``cpu``) local models load onto; see the docstring."""
    import torch

    name = (requested or os.environ.get(DEVICE_ENV) or "auto").strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            name = "cuda"
        elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            name = "mps"
        else:
            name = "cpu"
    kind, _, index = name.partition(":")
    if kind not in DEVICES[1:] or (index and not index.isdigit()):
        raise DeviceUnavailable(f"unknown device {name!r}; use one of {', '.join(DEVICES)} or cuda:N")
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise DeviceUnavailable(f"device {name!r} asked for (--device or ${DEVICE_ENV}) but torch "
                                    f"{torch.__version__} sees no CUDA device")
        card = int(index) if index else local_rank() % torch.cuda.device_count()
        if card >= torch.cuda.device_count():
            raise DeviceUnavailable(f"device {name!r}: only {torch.cuda.device_count()} CUDA device(s)")
        return f"cuda:{card}"
    if kind == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise DeviceUnavailable("device 'mps' asked for but this torch build has no MPS backend")
    return kind


def threads_per_process(processes: int) -> int:
    """CPU threads for each of ``processes`` local processes (training ranks, collection workers):
    the cores divided between them, so N processes do not each spin up every core."""
    return max(1, (os.cpu_count() or 1) // max(1, processes))


def _cpu_has_native_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


DTYPES = ("auto", "float32", "bfloat16", "float16")


def compute_dtype(name: str = "auto", device: str | None = None):
    """The torch dtype for a model's weights on ``device`` (``TRAJFORGE_DTYPE`` or ``name``, else
    the device's native choice; see the module docstring)."""
    import torch

    name = os.environ.get(DTYPE_ENV, name) or "auto"
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
             "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
    if name != "auto":
        if name not in table:
            raise ValueError(f"unknown dtype {name!r}; use one of {', '.join(DTYPES)}")
        return table[name]
    kind = (device or pick_device()).split(":")[0]
    if kind == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    if kind == "cpu":
        return torch.bfloat16 if _cpu_has_native_bf16() else torch.float32
    return torch.float32
