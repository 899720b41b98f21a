"""Saving a trained adapter: the LoRA weights, the tokenizer, and the meta the policies check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def save_adapter(net, tokenizer, out_dir: str | Path, meta: dict[str, Any]) -> Path:
    """The final adapter plus the trajforge meta (toolsets, dialect, render mode, lineage)."""
    from trajforge.policies.hf import ADAPTER_META

    out = Path(out_dir)
    net.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / ADAPTER_META).write_text(json.dumps(meta, indent=2))
    return out
