"""Tool-call dialects: render and parse with one object.

    dialect = get_dialect("qwen3_xml")            # or Dialect.for_model("Qwen/Qwen3-Coder-30B", chat_template)
    text = dialect.render_assistant("Let me look.", [ToolCall(name="run_sql", arguments={...})])
    result = dialect.parse(text, toolset)         # ParseResult: calls, errors, repairs, text
    prompt = dialect.chat_text(tokenizer, messages, toolset, render_mode="template")  # policy = SFT = serve

Parsing is total (any input: a result, in linear time, storable as UTF-8 JSON; ``limits``), and
rendering keeps text text (control tokens inside content are escaped; ``special``).
"""

from __future__ import annotations

from trajforge.parse.base import RENDER_MODES, Dialect, ParseResult
from trajforge.parse.deepseek import DeepSeekDialect
from trajforge.parse.detect import dialect_name_for_model, guess_dialect_name
from trajforge.parse.hermes import HermesDialect
from trajforge.parse.llama3_json import Llama3JSONDialect
from trajforge.parse.mistral import MistralDialect
from trajforge.parse.openai import DeltaAccumulator, OpenAIDialect
from trajforge.parse.pythonic import PythonicDialect
from trajforge.parse.qwen3_xml import Qwen3XMLDialect
from trajforge.parse.react import ReActDialect
from trajforge.parse.special import escape_control_tokens
from trajforge.parse.stream import StreamParser

DIALECTS: dict[str, type[Dialect]] = {
    d.name: d
    for d in (HermesDialect, OpenAIDialect, Qwen3XMLDialect, Llama3JSONDialect, MistralDialect, PythonicDialect,
              DeepSeekDialect, ReActDialect)
}


def get_dialect(name: str, **options) -> Dialect:
    """A dialect by name; ``options`` go to its constructor (``max_chars``: the reply size cap)."""
    if name not in DIALECTS:
        raise KeyError(f"unknown dialect {name!r}; known: {sorted(DIALECTS)}")
    return DIALECTS[name](**options)


def dialect_for_model(name_or_path: str, chat_template: str | dict | None = None) -> Dialect:
    """The dialect for a model name or path (``Qwen/Qwen3-8B``), its chat template deciding when
    given; hermes by default."""
    return get_dialect(dialect_name_for_model(name_or_path, chat_template))


def guess_dialect(text: str) -> Dialect:
    """The dialect whose call markers appear in a model output; hermes when none do."""
    return get_dialect(guess_dialect_name(text))


__all__ = [
    "DIALECTS", "DeepSeekDialect", "DeltaAccumulator", "Dialect", "HermesDialect", "Llama3JSONDialect",
    "MistralDialect", "OpenAIDialect", "ParseResult", "PythonicDialect", "Qwen3XMLDialect", "RENDER_MODES",
    "ReActDialect", "StreamParser", "dialect_for_model", "escape_control_tokens", "get_dialect", "guess_dialect",
]
