"""Host memory that training on a CPU gives back between steps.

What made ``train sft`` on a CPU grow to 15–24 GB was not a leak. glibc's malloc serves a block
below its mmap threshold from the heap and, when such a block is freed, raises the threshold
(up to 32 MiB on 64-bit) so that the next blocks of that size come from the heap too. Activations
of a long batch — a few MiB to a few tens of MiB per tensor — then live in the heap; when they are
freed the heap stays as large as it was (other blocks pin its top), and a longer batch later adds
more on top. Resident memory keeps the high-water mark of every batch shape seen so far, several
times what torch holds at any moment (``benchmarks/host_memory.py`` measures both, side by side).

Fixing the threshold (``mallopt(M_MMAP_THRESHOLD, …)``, which also turns the dynamic raise off)
makes every tensor above it its own mapping, returned to the kernel when torch frees it, so the
resident peak follows what is alive (plus what smaller blocks leave in the heap). ``TRAJFORGE_MMAP_THRESHOLD`` sets the bytes (``0`` leaves
glibc's behaviour); other C libraries (macOS, musl) are left as they are.

The threshold trades step time for memory, so ``train sft`` derives it when the variable is unset
(``defaults.auto_host_allocator``): glibc's dynamic threshold where three times the plan's peak
still fits the host, 1 MiB otherwise. On the demo's pool the dynamic threshold made a step 1.35×
faster for 1.2× the peak (stop 55, ``benchmarks/sft_settings.py --arms auto@0,auto@1048576``).
DPO and GRPO, which the plan does not model, always give memory back.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from contextlib import contextmanager
from typing import Iterator

log = logging.getLogger(__name__)

MMAP_THRESHOLD = 1 << 20
"""Blocks of at least 1 MiB get their own mapping. Each mapping costs page faults when first
touched and a TLB flush when unmapped, so the threshold trades step time for memory; measured on
the embedded model (``benchmarks/host_memory.py``, B=2, up to 768 tokens, checkpointing on):
glibc's dynamic threshold peaked at 3.2–3.7 GB; 8 MiB at 2.8 GB and 1.14x its step time; 1 MiB at
1.8 GB and 1.66x. At ``train sft``'s defaults on real data (~1000-token samples) 8 MiB still
peaked at 3.6 GB against 1.8 GB at 1 MiB (``benchmarks/plan_check.py``): the default is the
memory that ``plan`` predicts and a 24 GB machine can count on; ``TRAJFORGE_MMAP_THRESHOLD=0``
takes glibc's speed where memory is plentiful (the demo does)."""

_M_MMAP_THRESHOLD = -3  # from glibc's malloc.h
_applied: int | None = None


def return_freed_blocks() -> int:
    """Set this process's mmap threshold once (glibc only); returns the threshold in force (0:
    unchanged)."""
    global _applied
    if _applied is not None:
        return _applied
    want = mmap_threshold()
    _applied = 0
    if want <= 0:
        return 0
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        if getattr(libc, "gnu_get_libc_version", None) is None:
            return 0  # not glibc: its allocator has other rules
        if libc.mallopt(_M_MMAP_THRESHOLD, want) == 1:
            _applied = want
    except (OSError, AttributeError) as e:
        log.debug("mallopt unavailable (%s); host memory is left to the C library", e)
    return _applied


def _env_value() -> str:
    return os.environ.get("TRAJFORGE_MMAP_THRESHOLD", "").strip()


def threshold_decided() -> bool:
    """Whether this process's allocator is already settled: an earlier run set it, the demo's
    ``glibc_allocator`` holds it, or ``$TRAJFORGE_MMAP_THRESHOLD`` says what to do."""
    return _applied is not None or bool(_env_value())


def keep_glibc_threshold() -> None:
    """Leave glibc's dynamic threshold for the rest of this process (as ``TRAJFORGE_MMAP_THRESHOLD=0``)."""
    global _applied
    if _applied is None:
        _applied = 0


def mmap_threshold() -> int:
    """``$TRAJFORGE_MMAP_THRESHOLD`` in bytes (unset or empty: ``MMAP_THRESHOLD``); anything but an
    integer is refused by name (it crashed as a bare ``int()`` error in the training runtime)."""
    raw = _env_value()
    if not raw:
        return MMAP_THRESHOLD
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"TRAJFORGE_MMAP_THRESHOLD={raw!r}: give bytes as an integer (0 keeps glibc's "
                         f"dynamic threshold; unset: {MMAP_THRESHOLD})") from None


@contextmanager
def glibc_allocator() -> Iterator[None]:
    """Training inside leaves this process's allocator as glibc has it (unless an earlier run
    already set the threshold: a process's setting is never undone). For runs whose memory is
    plentiful and whose step time counts, such as the demo's."""
    global _applied
    if _applied is not None:
        yield
        return
    _applied = 0
    try:
        yield
    finally:
        _applied = None
