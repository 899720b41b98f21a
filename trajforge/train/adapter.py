"""Saving a trained adapter: the LoRA weights, the tokenizer, and the meta the policies check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def save_adapter(net, tokenizer, out_dir: str | Path, meta: dict[str, Any]) -> Path:
    """The final adapter plus the trajforge meta (toolsets, dialect, render mode, lineage) and the
    chat template the samples were rendered with (``policies.loading.template_record``): the hf
    policy and ``serve`` render with it, so eval and serving see training's prompts byte for byte."""
    from trajforge.policies.hf import ADAPTER_META
    from trajforge.policies.loading import template_record

    out = Path(out_dir)
    net.save_pretrained(out)
    tokenizer.save_pretrained(out)
    meta = {**meta, "chat_template": template_record(tokenizer)}
    (out / ADAPTER_META).write_text(json.dumps(meta, indent=2))
    return out


def lineage_ref(init_adapter: str | Path | None) -> str | None:
    """The meta's ``init_adapter``: the adapter a training went on from, as an absolute path
    (``policies.hf.adapter_lineage`` follows it when loading), or None for a start from the base."""
    return str(Path(init_adapter).resolve()) if init_adapter else None
