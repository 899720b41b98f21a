"""Pick a dialect from a model name, a chat template, or a piece of model output.

Markers are checked before names: a chat template (or an output) that contains a family's call
tokens settles the question even when the model was renamed or fine-tuned under another name.
Nothing here imports torch or transformers: callers pass the template string.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

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

# (name pattern, dialect) searched in the lower-cased name, first match wins. Qwen3-Coder and the
# Qwen3.5/3.6 generation write the XML format (vLLM's ``qwen3_coder`` parser); every other Qwen
# (Qwen2.5, Qwen3-8B, Qwen3-*-2507, QwQ) writes Hermes-style JSON in <tool_call> (vLLM's
# ``hermes`` parser; the Qwen docs recommend Hermes-style tool use for Qwen3). DeepSeek's own
# template comes before "qwen" so a DeepSeek-R1-Distill-Qwen model gets its DeepSeek format.
_NAMES: tuple[tuple[re.Pattern, str], ...] = tuple((re.compile(p), d) for p, d in (
    (r"qwen3[-_]?coder|qwen3[._][5-9]", "qwen3_xml"),
    (r"deepseek", "deepseek"),
    (r"qwen|qwq|hermes|smollm", "hermes"),
    (r"llama[-_]?[34]", "llama3_json"),  # vLLM reads Llama 4 with the same JSON parser (llama4_json)
    (r"mistral|mixtral|magistral|devstral|ministral|codestral", "mistral"),
))

_LLAMA_CALL = re.compile(r"\{\s*\"name\"\s*:\s*\"[^\"]+\"\s*,\s*\"(?:parameters|arguments)\"")
# A pythonic call list opens with "[name(" and has a ")" somewhere after: the two are found apart,
# since "[^)]*\)" from every "[name(" rescans the rest of a text that has no ")".
_PY_CALL = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")
# The JSON of an API response, choice, message or tool_calls list (the openai dialect's text form).
_OPENAI = re.compile(r'\s*(?:\{\s*"(?:id|object|created|model|choices|index|message|role|content|tool_calls|'
                     r'finish_reason)"\s*:|\[\s*\{\s*"(?:id|type|index|function)"\s*:)')


def _template_text(chat_template: str | dict | None) -> str:
    """A tokenizer's ``chat_template``: one string, or several named ones (``{"default": ...,
    "tool_use": ...}``), read together."""
    if isinstance(chat_template, dict):
        return "\n".join(t for t in chat_template.values() if isinstance(t, str))
    return chat_template or ""


def template_supports_tools(chat_template: str | dict | None) -> bool:
    """True when a chat template's text mentions ``tools`` at all (a guess from the text alone, for
    callers without a tokenizer; ``template_traits`` renders to find out)."""
    return "tools" in _template_text(chat_template)


class TemplateTraits(NamedTuple):
    """What a chat template does with the messages trajforge gives it, found by rendering probe
    conversations through it once (``template_traits``). Each False is a documented adaptation in
    ``Dialect.chat_text``, never a crash and never a dropped message."""

    system: bool
    """A leading system message is rendered first, before the first user turn. Gemma raises on
    one, Mistral v0.3 moves it into the *last* user turn (not prefix-stable across an episode),
    some templates drop it: then the system text is folded into the first user turn."""
    tools: bool
    """The ``tools`` argument reaches the text. Without it, ``render_mode="template"`` renders the
    tools the dialect's way (its tool block in the system text)."""
    tool_role: bool
    """``tool`` messages reach the text in a user, assistant, tool, assistant conversation. Gemma
    raises (roles must alternate), Phi-3.5 drops them silently: then tool results are the
    dialect's text in a user turn, as in ``render_mode="dialect"``."""


_UNADAPTED = TemplateTraits(True, True, True)
_PROBE = "trajforge-probe-"  # sentinels: words no template writes itself
_PROBE_TOOL = {"type": "function", "function": {
    "name": _PROBE + "tool", "description": "probe", "parameters": {"type": "object", "properties": {}}}}
_traits: dict[str, TemplateTraits] = {}


def _probe(tokenizer: Any, chat: list[dict], tools: list | None = None) -> str | None:
    """The probe conversation rendered, or None when the template refuses it."""
    try:
        text = tokenizer.apply_chat_template(chat, tools=tools, tokenize=False, add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - a template's raise_exception is how it says "not this"
        return None
    return text if isinstance(text, str) else None


def template_traits(tokenizer: Any) -> TemplateTraits:
    """The ``TemplateTraits`` of ``tokenizer``'s chat template (cached per template text). A
    template that cannot render even one user turn is reported as needing nothing: the real
    rendering then raises its own error, which says more than a probe could."""
    key = repr(getattr(tokenizer, "chat_template", None))
    if key not in _traits:
        _traits[key] = _find_traits(tokenizer)
    return _traits[key]


def _find_traits(tokenizer: Any) -> TemplateTraits:
    user, system = _PROBE + "user", _PROBE + "system"
    if _probe(tokenizer, [{"role": "user", "content": user}]) is None:
        return _UNADAPTED
    sys_text = _probe(tokenizer, [{"role": "system", "content": system}, {"role": "user", "content": user},
                                  {"role": "assistant", "content": _PROBE + "assistant"},
                                  {"role": "user", "content": _PROBE + "second-user"}])
    has_system = sys_text is not None and -1 < sys_text.find(system) < sys_text.find(user)
    tools_text = _probe(tokenizer, [{"role": "user", "content": user}], [_PROBE_TOOL])
    has_tools = tools_text is not None and _PROBE + "tool" in tools_text
    result, after = _PROBE + "result", _PROBE + "after-result"
    tool_text = _probe(tokenizer, [
        {"role": "user", "content": user}, {"role": "assistant", "content": _PROBE + "assistant"},
        {"role": "tool", "content": result, "name": _PROBE + "tool", "tool_call_id": "call_0"},
        {"role": "assistant", "content": after}, {"role": "user", "content": _PROBE + "second-user"}],
        [_PROBE_TOOL] if has_tools else None)
    has_tool_role = tool_text is not None and result in tool_text and after in tool_text
    return TemplateTraits(has_system, has_tools, has_tool_role)


def _marked(text: str) -> str | None:
    for marker, dialect in _TEMPLATE_MARKERS:
        if marker in text:
            return dialect
    return None


def dialect_name_for_model(name_or_path: str, chat_template: str | dict | None = None) -> str:
    """Dialect name for a model; ``hermes`` when nothing matches.

    The chat template decides when given and it shows a family's call markers (a fine-tune keeps
    its base model's template under any name); then the name (which may itself be a template, as
    older callers pass one); ``hermes`` otherwise, which is also what the embedded SmolLM2 uses.
    """
    found = _marked(_template_text(chat_template)) or _marked(name_or_path)
    if found:
        return found
    lowered = name_or_path.lower()
    for pattern, dialect in _NAMES:
        if pattern.search(lowered):
            return dialect
    return "hermes"


def guess_dialect_name(text: str) -> str:
    """Dialect name whose call markers appear in a model output; ``hermes`` when none do."""
    if _OPENAI.match(text):
        return "openai"
    for marker, dialect in _TEMPLATE_MARKERS:
        if marker in text and marker not in ("[AVAILABLE_TOOLS]", "[func_name1(", "<|start_header_id|>"):
            return dialect
    if re.search(r"^[ \t]*Action:", text, re.M):
        return "react"
    if _LLAMA_CALL.search(text):
        return "llama3_json"
    if (py := _PY_CALL.search(text)) is not None and text.find(")", py.end()) != -1:
        return "pythonic"
    return "hermes"
