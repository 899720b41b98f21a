"""Saving a trained adapter: the LoRA weights, the tokenizer, and the meta the policies check."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any


def save_adapter(net, tokenizer, out_dir: str | Path, meta: dict[str, Any]) -> Path:
    """The final adapter plus the trajforge meta (toolsets, dialect, render mode, lineage) and the
    chat template the samples were rendered with (``policies.loading.template_record``): the hf
    policy and ``serve`` render with it, so eval and serving see training's prompts byte for byte."""
    from trajforge.policies.hf import ADAPTER_META
    from trajforge.policies.loading import template_record

    out = Path(out_dir)
    # Written aside, then moved in, the meta last: a kill while writing (seconds for a 7B adapter)
    # leaves the folder's previous adapter whole, never new weights under an earlier run's meta or
    # a torn weights file. Renames are instant; the folder itself stays (checkpoints, curves).
    staging = out / ".adapter-staging"
    shutil.rmtree(staging, ignore_errors=True)
    net.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    meta = {**meta, "chat_template": template_record(tokenizer)}
    (staging / ADAPTER_META).write_text(json.dumps(meta, indent=2))
    for f in staging.rglob("*"):
        if f.is_file():
            _fsync(f)
    (out / ADAPTER_META).unlink(missing_ok=True)  # from here the folder is no trajforge adapter until the end
    for f in sorted(staging.iterdir(), key=lambda f: f.name == ADAPTER_META):
        if (out / f.name).is_dir() and not (out / f.name).is_symlink():
            shutil.rmtree(out / f.name)
        os.replace(f, out / f.name)
    staging.rmdir()
    return out


def _fsync(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def lineage_ref(init_adapter: str | Path | None) -> str | None:
    """The meta's ``init_adapter``: the adapter a training went on from, as an absolute path
    (``policies.hf.adapter_lineage`` follows it when loading), or None for a start from the base."""
    return str(Path(init_adapter).resolve()) if init_adapter else None
