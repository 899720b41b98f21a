"""Pick a dialect from a model name, a chat template, or a piece of model output.

Markers are checked before names: a chat template (or an output) that contains a family's call
tokens settles the question even when the model was renamed or fine-tuned under another name.
"""

from __future__ import annotations

import re

# (marker, dialect), most specific first: Qwen3-Coder templates also mention <tool_call>.
_TEMPLATE_MARKERS: tuple[tuple[str, str], ...] = (
    ("<｜tool▁calls▁begin｜>", "deepseek"),
    ("<｜tool▁call▁begin｜>", "deepseek"),
    ("<function=", "qwen3_xml"),
    ("<parameter=", "qwen3_xml"),
    ("<tool_call>", "hermes"),
    ("[TOOL_CALLS]", "mistral"),
    ("[AVAILABLE_TOOLS]", "mistral"),
    ("[func_name1(", "pythonic"),
    ("<|python_tag|>", "llama3_json"),
    ("<|start_header_id|>", "llama3_json"),
    ("Action Input:", "react"),
)

# (name substring, dialect) on the lower-cased name, first match wins: qwen3 before qwen2.
_NAMES: tuple[tuple[str, str], ...] = (
    ("qwen3", "qwen3_xml"),
    ("qwen2", "hermes"),
    ("hermes", "hermes"),
    ("smollm", "hermes"),
    ("llama-3", "llama3_json"),
    ("llama3", "llama3_json"),
    ("llama_3", "llama3_json"),
    ("mistral", "mistral"),
    ("mixtral", "mistral"),
    ("magistral", "mistral"),
    ("devstral", "mistral"),
    ("deepseek", "deepseek"),
)

_LLAMA_CALL = re.compile(r"\{\s*\"name\"\s*:\s*\"[^\"]+\"\s*,\s*\"(?:parameters|arguments)\"")
_PY_CALL = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\([^)]*\)")


def dialect_name_for_model(name_or_template: str) -> str:
    """Dialect name for a model name or a chat template string; ``hermes`` when nothing matches."""
    for marker, dialect in _TEMPLATE_MARKERS:
        if marker in name_or_template:
            return dialect
    lowered = name_or_template.lower()
    for needle, dialect in _NAMES:
        if needle in lowered:
            return dialect
    return "hermes"


def guess_dialect_name(text: str) -> str:
    """Dialect name whose call markers appear in a model output; ``hermes`` when none do."""
    for marker, dialect in _TEMPLATE_MARKERS:
        if marker in text and marker not in ("[AVAILABLE_TOOLS]", "[func_name1(", "<|start_header_id|>"):
            return dialect
    if re.search(r"^[ \t]*Action:", text, re.M):
        return "react"
    if _LLAMA_CALL.search(text):
        return "llama3_json"
    if _PY_CALL.search(text):
        return "pythonic"
    return "hermes"
