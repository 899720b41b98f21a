"""Which names a server answers to, and which dialect each one speaks.

An adapter trained by ``trajforge train sft`` records its dialect, render mode and chat template in
``trajforge_adapter.json`` (each served adapter renders with its own), and, when it was trained
with retrieved demonstrations, the pool it shows them from;
serving it with another dialect would render tools in a format it never saw, so a ``--dialect``
that disagrees with an adapter's recorded one is refused. Adapters without that file (peft folders
from elsewhere) and the base model use ``--dialect``, else the embedded model's, else hermes.
"""

from __future__ import annotations

import re
from pathlib import Path

from trajforge.harness.demos import Demos, load_pool
from trajforge.parse import RENDER_MODES, get_dialect
from trajforge.policies.hf import ADAPTER_META, read_adapter_meta, trained_demos
from trajforge.policies.models import EMBEDDED
from trajforge.serve.service import ServedModel
from trajforge._jsonl import read_json_object

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")


class ServeConfigError(ValueError):
    """The adapters or options given to ``trajforge serve`` cannot be served together."""


def parse_adapter_specs(specs: list[str]) -> dict[str, str]:
    """``["NAME=DIR", ...]`` → ``{NAME: DIR}``, refusing malformed and duplicate names."""
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ServeConfigError(f"--adapter {spec!r}: expected NAME=DIR")
        if not _NAME.match(name):
            raise ServeConfigError(f"--adapter {spec!r}: name {name!r} must start with a letter or digit "
                                   "and hold only letters, digits and . _ : / -")
        if name in out:
            raise ServeConfigError(f"--adapter name {name!r} is given twice")
        out[name] = path
    return out


def check_adapter_dir(name: str, path: str | Path) -> Path:
    folder = Path(path)
    if not (folder / "adapter_config.json").is_file():
        raise ServeConfigError(f"adapter {name!r}: {folder} has no adapter_config.json "
                               "(not a peft LoRA adapter folder)")
    return folder


def adapter_dialect(path: str | Path) -> str | None:
    """The dialect an adapter was trained with, from its trajforge meta (None without one)."""
    return _meta(path).get("dialect")


def _meta(path: str | Path) -> dict:
    """An adapter's trajforge meta ({} without one); a damaged one is a config error naming it."""
    if not (Path(path) / ADAPTER_META).is_file():
        return {}
    try:
        return read_adapter_meta(path)
    except ValueError as e:
        raise ServeConfigError(str(e)) from None


def adapter_rank(path: str | Path) -> int:
    """Largest LoRA rank in an adapter's ``adapter_config.json`` (``r`` and any ``rank_pattern``);
    a damaged file is a config error naming it (vLLM's ``--max-lora-rank`` is sized from it)."""
    file = Path(path) / "adapter_config.json"
    try:
        cfg = read_json_object(file, "re-save the adapter")
        pattern = cfg.get("rank_pattern") or {}
        ranks = [cfg.get("r", 8), *(pattern.values() if isinstance(pattern, dict) else [pattern])]
        if not all(isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in ranks):
            raise ValueError(f"{file}: LoRA ranks (r, rank_pattern) must be positive integers, not {ranks}")
    except ValueError as e:
        raise ServeConfigError(str(e)) from None
    return max(ranks)


def served_models(model: str, adapters: dict[str, str], dialect: str | None = None) -> dict[str, ServedModel]:
    """The base model and every adapter under their names, each with its dialect."""
    if model in adapters:
        raise ServeConfigError(f"adapter name {model!r} is the base model's name; pick another")
    default = dialect or EMBEDDED.get(model, {}).get("dialect", "hermes")
    models = {model: ServedModel(model, None, _dialect(default, "--dialect"), model)}
    for name, path in adapters.items():
        models[name] = served_adapter(name, path, default, dialect)
    return models


def served_adapter(name: str, path: str | Path, default: str, forced: str | None = None) -> ServedModel:
    """One adapter as a served model: its recorded dialect, else ``default``; a ``forced`` dialect
    (``--dialect``) that disagrees with the recorded one is refused."""
    if not _NAME.match(name):
        raise ServeConfigError(f"adapter name {name!r} must start with a letter or digit "
                               "and hold only letters, digits and . _ : / -")
    check_adapter_dir(name, path)
    trained = adapter_dialect(path)
    if forced and trained and trained != forced:
        raise ServeConfigError(f"adapter {name!r} was trained with dialect {trained!r} "
                               f"(its {ADAPTER_META}) but --dialect is {forced!r}")
    meta = _meta(path)
    render_mode = meta.get("render_mode") or "dialect"
    if render_mode not in RENDER_MODES:
        raise ServeConfigError(f"adapter {name!r}: unknown render mode {render_mode!r} in its {ADAPTER_META}")
    template = (meta.get("chat_template") or {}).get("text")
    return ServedModel(name, name, _dialect(trained or default, f"adapter {name!r}"), str(path),
                       render_mode, template if isinstance(template, str) else None, _demos(name, meta, path))


def _demos(name: str, meta: dict, path: str | Path) -> Demos | None:
    """The demonstrations an adapter was trained with, its pool checked against the recorded hash."""
    try:
        recorded = trained_demos(meta, path)
    except (AttributeError, KeyError, TypeError, ValueError) as e:  # a hand-edited or damaged meta
        raise ServeConfigError(f"adapter {name!r}: the demos record in its {ADAPTER_META} is not "
                               f'{{"pool": FILE, "sha256": HEX, "k": N}}: {type(e).__name__}: {e}') from None
    if recorded is None:
        return None
    if recorded["k"] < 0:  # a slice [:k] would show all but the last -k tasks; eval refuses it too
        raise ServeConfigError(f"adapter {name!r}: its {ADAPTER_META} records {recorded['k']} demonstrations; "
                               "the number must be 0 or more")
    try:
        return Demos(load_pool(recorded["pool"], recorded["sha256"]), recorded["k"])
    except (OSError, ValueError) as e:
        raise ServeConfigError(f"adapter {name!r} was trained with retrieved demonstrations: {e}") from None


def _dialect(name: str, where: str):
    if name == "openai":  # a wire format for API tool_calls, not text a local model writes
        raise ServeConfigError(f"{where}: dialect 'openai' is what this server answers in; the model "
                               "itself needs a text dialect (hermes, qwen3_xml, ...)")
    try:
        return get_dialect(name)
    except KeyError as e:
        raise ServeConfigError(f"{where}: {e.args[0]}") from None
