"""One LoRA adapter that equals a stack of them, exactly.

A DPO or GRPO adapter trains on top of an earlier one (SFT), which ``lora_model`` merges into the
base weights in memory. A server that takes one adapter per request (vLLM, ``trajforge serve``)
cannot reproduce that stack — unless the stack is rewritten as a single LoRA:

    W = W0 + s1·B1·A1 + s2·B2·A2 = W0 + [s1·B1 | s2·B2] · [A1 ; A2]

so concatenating the A matrices along the rank and the scaled B matrices beside each other gives
an adapter of rank r1 + r2 with scaling 1 (``lora_alpha = r``) whose output is the stack's. A module
one adapter does not touch contributes zero blocks. GRPO uses it to hand the current policy to a
rollout server each step; ``trajforge`` can also export a lineage as one adapter for serving.

Refused, with the reason: DoRA, per-module rank/alpha patterns, ``modules_to_save`` (full copies of
layers, not low-rank deltas).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

ADAPTER_FILE = "adapter_model.safetensors"
_KEY = re.compile(r"^(?P<module>.+)\.lora_(?P<part>[AB])\.weight$")


def _scaling(cfg: dict, where: str) -> float:
    if cfg.get("use_dora"):
        raise ValueError(f"{where}: use_dora adapters cannot be stacked into one LoRA")
    for field in ("rank_pattern", "alpha_pattern"):
        if cfg.get(field):
            raise ValueError(f"{where}: per-module {field} is not supported when stacking adapters")
    if cfg.get("modules_to_save"):
        raise ValueError(f"{where}: modules_to_save {cfg['modules_to_save']} are full layer copies, "
                         "not low-rank deltas; they cannot be stacked")
    r = int(cfg["r"])
    alpha = float(cfg.get("lora_alpha", r))
    return alpha / math.sqrt(r) if cfg.get("use_rslora") else alpha / r


def read_lora(folder: str | Path) -> tuple[dict[str, tuple], float, dict]:
    """({module: (A, B)}, scaling, adapter_config) of a peft LoRA folder."""
    from safetensors.torch import load_file

    folder = Path(folder)
    cfg = json.loads((folder / "adapter_config.json").read_text())
    scale = _scaling(cfg, str(folder))
    parts: dict[str, dict[str, object]] = {}
    for key, tensor in load_file(str(folder / ADAPTER_FILE)).items():
        m = _KEY.match(key)
        if m is None:
            raise ValueError(f"{folder}: unexpected tensor {key!r} in a LoRA adapter")
        parts.setdefault(m["module"], {})[m["part"]] = tensor
    missing = [k for k, v in parts.items() if set(v) != {"A", "B"}]
    if missing:
        raise ValueError(f"{folder}: modules without both lora_A and lora_B: {missing[:3]}")
    return {k: (v["A"], v["B"]) for k, v in parts.items()}, scale, cfg


def stack_loras(folders: list[str | Path], out_dir: str | Path) -> Path:
    """Write one adapter to ``out_dir`` equal to applying ``folders`` in order (oldest first)."""
    import torch
    from safetensors.torch import save_file

    if not folders:
        raise ValueError("stack_loras needs at least one adapter")
    loaded = [read_lora(f) for f in folders]
    modules = sorted({m for tensors, _, _ in loaded for m in tensors})
    ranks = [int(cfg["r"]) for _, _, cfg in loaded]
    total = sum(ranks)
    out_tensors = {}
    for module in modules:
        shape_a = shape_b = None
        for tensors, _, _ in loaded:
            if module in tensors:
                shape_a, shape_b = tensors[module][0].shape[1], tensors[module][1].shape[0]
        a_blocks, b_blocks = [], []
        for (tensors, scale, _), r in zip(loaded, ranks):
            if module in tensors:
                a, b = tensors[module]
                a_blocks.append(a.float())
                b_blocks.append(b.float() * scale)
            else:  # this adapter leaves the module alone: a zero block of its rank
                a_blocks.append(torch.zeros(r, shape_a))
                b_blocks.append(torch.zeros(shape_b, r))
        out_tensors[f"{module}.lora_A.weight"] = torch.cat(a_blocks, 0).contiguous()
        out_tensors[f"{module}.lora_B.weight"] = torch.cat(b_blocks, 1).contiguous()
    targets = sorted({name for _, _, cfg in loaded for name in _targets(cfg)})
    cfg = dict(loaded[0][2])
    cfg.update(r=total, lora_alpha=total, use_rslora=False, lora_dropout=0.0, target_modules=targets,
               layers_to_transform=_layers([c for _, _, c in loaded]),
               rank_pattern={}, alpha_pattern={}, inference_mode=True)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_file(out_tensors, str(out / ADAPTER_FILE))
    (out / "adapter_config.json").write_text(json.dumps(cfg, indent=2))
    return out


def _layers(cfgs: list[dict]) -> list[int] | None:
    """The layers the stack adapts (``--lora-layers``): every layer if any adapter adapts every
    layer, else the union of theirs."""
    picked = [c.get("layers_to_transform") for c in cfgs]
    if any(p is None for p in picked):
        return None
    return sorted({int(i) for p in picked for i in ([p] if isinstance(p, int) else p)})


def _targets(cfg: dict) -> list[str]:
    t = cfg.get("target_modules") or []
    if isinstance(t, str):  # a regex in peft; keep it only if it is the sole one
        raise ValueError(f"target_modules given as a regex ({t!r}) cannot be merged with others")
    return list(t)
