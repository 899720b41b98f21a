"""The vLLM command line that serves the same model and adapters as ``trajforge serve``.

    trajforge serve --model smollm2-135m --adapter sql=runs/adapter --print-vllm

The launch sizes come from ``trajforge plan`` (``train/plan.py``'s serving estimate):
``--tensor-parallel-size`` (the fewest GPUs whose share of weights + KV cache + buffers fits),
``--gpu-memory-utilization`` (exactly that share of one GPU) and ``--max-model-len``; flags given
to ``serve`` win over the plan's (``planned_launch``).

vLLM runs one tool-call parser per server, so every adapter must have been trained with the same
dialect; the parser is that dialect's vLLM name, and ``--max-lora-rank`` is the largest rank among
the adapters (vLLM refuses adapters above it; its default is 16).

Tools reach the model differently there: vLLM hands ``tools`` to the model's chat template, while
trajforge renders them with the dialect. Where the chat template does not render tools (SmolLM2's
does not), pass a ``--chat-template`` that does, or keep vLLM's parser out of it and point
``OpenAIPolicy(native_tools=False)`` at the server: the dialect then renders and parses client-side,
exactly as in training.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import NamedTuple

from trajforge.policies.models import is_embedded, model_dir
from trajforge.serve.adapters import ServeConfigError, adapter_dialect, adapter_rank, check_adapter_dir

VLLM_TOOL_PARSERS = {
    "hermes": "hermes",
    "llama3_json": "llama3_json",
    "mistral": "mistral",
    "pythonic": "pythonic",
    "qwen3_xml": "qwen3_xml",
    "deepseek": "deepseek_v3",
}
"""trajforge dialect → vLLM ``--tool-call-parser`` (vLLM's ``ToolParserManager`` names)."""


class VllmCommand(NamedTuple):
    """A ``vllm serve`` invocation."""

    argv: list[str]
    notes: list[str]
    """What the command cannot carry by itself (printed as comments)."""

    @property
    def line(self) -> str:
        return shlex.join(self.argv)


class VllmLaunch(NamedTuple):
    """How big a server to start: ``vllm serve``'s sizing flags."""

    tensor_parallel_size: int | None = None
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None

    def argv(self) -> list[str]:
        out = []
        if self.tensor_parallel_size is not None:
            out += ["--tensor-parallel-size", str(self.tensor_parallel_size)]
        if self.gpu_memory_utilization is not None:
            out += ["--gpu-memory-utilization", f"{self.gpu_memory_utilization:g}"]
        if self.max_model_len is not None:
            out += ["--max-model-len", str(self.max_model_len)]
        return out


def planned_launch(model: str, given: VllmLaunch = VllmLaunch(), concurrency: int | None = None,
                   gpu_gb: float | None = None, lora_r: int = 0) -> tuple[VllmLaunch, str | None]:
    """``given``'s flags, the rest from the plan's serving estimate for ``model`` at
    ``concurrency`` sequences of ``max_model_len`` (default: ``train sft``'s ``max_len``) on GPUs
    of ``gpu_gb``; plus a note when the model's shape is unknown and only ``given`` is used."""
    from trajforge.train.plan import GPU_GB, SERVE_CONCURRENCY, serve_memory
    from trajforge.train.sft import SFTConfig
    from trajforge.train.shapes import model_shape

    try:
        shape = model_shape(model)
    except ValueError:
        return given, (f"no config.json for {model} and not a known model: --tensor-parallel-size, "
                       "--gpu-memory-utilization and --max-model-len are only the ones given")
    defaults = SFTConfig()
    length = given.max_model_len or defaults.max_len
    planned = serve_memory(shape, "bfloat16", length, concurrency or SERVE_CONCURRENCY, gpu_gb or GPU_GB,
                           lora_r, defaults.targets)
    return VllmLaunch(
        given.tensor_parallel_size or planned.tensor_parallel_size,
        given.gpu_memory_utilization or planned.gpu_memory_utilization, length), None


def vllm_command(model: str, adapters: dict[str, str], dialect: str | None = None,
                 chat_template: str | None = None, launch: VllmLaunch | None = None) -> VllmCommand:
    """``vllm serve`` argv for the base model and LoRA adapters; raises ServeConfigError when the
    adapters' dialects disagree or a dialect has no vLLM parser."""
    trained = {name: adapter_dialect(check_adapter_dir(name, path)) for name, path in adapters.items()}
    chosen = {d for d in trained.values() if d} | ({dialect} if dialect else set())
    if len(chosen) > 1:
        listing = ", ".join(f"{n}={d or 'unrecorded'}" for n, d in trained.items())
        raise ServeConfigError(f"adapters disagree on the tool-call dialect ({listing}"
                               f"{f'; --dialect={dialect}' if dialect else ''}); vLLM runs one "
                               "tool-call parser per server: serve them from separate servers")
    name = chosen.pop() if chosen else "hermes"
    if name not in VLLM_TOOL_PARSERS:
        raise ServeConfigError(f"dialect {name!r} has no vLLM tool-call parser (known: "
                               f"{sorted(VLLM_TOOL_PARSERS)}); use OpenAIPolicy(native_tools=False) "
                               "against a plain vLLM server instead")
    weights = str(model_dir(model)) if is_embedded(model) else model
    argv, notes = ["vllm", "serve", weights], []
    if adapters:
        argv += ["--enable-lora", "--lora-modules", *(f"{n}={p}" for n, p in adapters.items()),
                "--max-lora-rank", str(max(adapter_rank(p) for p in adapters.values()))]
    argv += ["--enable-auto-tool-choice", "--tool-call-parser", VLLM_TOOL_PARSERS[name]]
    if chat_template:
        argv += ["--chat-template", chat_template]
    elif not _template_renders_tools(Path(weights)):
        notes.append(f"the chat template of {weights} does not render tools: pass --chat-template, "
                         "or use OpenAIPolicy(native_tools=False) so the dialect renders them")
    for n, p in adapters.items():
        demos = _recorded_demos(p)
        if demos:
            notes.append(f"adapter {n} was trained with {demos['k']} retrieved demonstrations, which vLLM does not "
                         f"show: run the client in trajforge's harness with --demos {demos['k']} --demo-pool {p}")
    if launch is not None:
        argv += launch.argv()
    if is_embedded(model):
        notes.append(f"{weights} is created by `trajforge models pull {model}`")
    return VllmCommand(argv, notes)


def _recorded_demos(path: str) -> dict | None:
    from trajforge.policies.hf import ADAPTER_META, read_adapter_meta, trained_demos

    return trained_demos(read_adapter_meta(path), path) if (Path(path) / ADAPTER_META).is_file() else None


def _template_renders_tools(folder: Path) -> bool:
    """Whether a local model's chat template mentions tools; True when it cannot be read (a hub id)."""
    texts = []
    if (folder / "chat_template.jinja").is_file():
        texts.append((folder / "chat_template.jinja").read_text())
    if (folder / "tokenizer_config.json").is_file():
        texts.append(str(json.loads((folder / "tokenizer_config.json").read_text()).get("chat_template", "")))
    if not texts:
        return True
    return any("tools" in t for t in texts)
