"""Tool-call dialects: render and parse with one object.

    dialect = get_dialect("qwen3_xml")            # or dialect_for_model("Qwen/Qwen3-Coder-30B")
    text = dialect.render_assistant("Let me look.", [ToolCall(name="run_sql", arguments={...})])
    result = dialect.parse(text, toolset)         # ParseResult: calls, errors, repairs, text
"""

from __future__ import annotations

from trajforge.parse.base import Dialect, ParseResult
from trajforge.parse.deepseek import DeepSeekDialect
from trajforge.parse.detect import dialect_name_for_model, guess_dialect_name
from trajforge.parse.hermes import HermesDialect
from trajforge.parse.llama3_json import Llama3JSONDialect
from trajforge.parse.mistral import MistralDialect
from trajforge.parse.pythonic import PythonicDialect
from trajforge.parse.qwen3_xml import Qwen3XMLDialect
from trajforge.parse.react import ReActDialect
from trajforge.parse.stream import StreamParser

DIALECTS: dict[str, type[Dialect]] = {
    d.name: d
    for d in (HermesDialect, Qwen3XMLDialect, Llama3JSONDialect, MistralDialect, PythonicDialect,
              DeepSeekDialect, ReActDialect)
}


def get_dialect(name: str) -> Dialect:
    if name not in DIALECTS:
        raise KeyError(f"unknown dialect {name!r}; known: {sorted(DIALECTS)}")
    return DIALECTS[name]()


def dialect_for_model(name_or_template: str) -> Dialect:
    """The dialect for a model name (``Qwen/Qwen3-8B``) or its chat template; hermes by default."""
    return get_dialect(dialect_name_for_model(name_or_template))


def guess_dialect(text: str) -> Dialect:
    """The dialect whose call markers appear in a model output; hermes when none do."""
    return get_dialect(guess_dialect_name(text))


__all__ = [
    "DIALECTS", "DeepSeekDialect", "Dialect", "HermesDialect", "Llama3JSONDialect", "MistralDialect",
    "ParseResult", "PythonicDialect", "Qwen3XMLDialect", "ReActDialect", "StreamParser",
    "dialect_for_model", "get_dialect", "guess_dialect",
]
