"""Dialect: renders tools, calls and results into text and parses model text back, as one object.

The same Dialect instance renders SFT samples and parses rollouts and evaluation episodes, so the
metrics are computed with the parser the model was trained against.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from trajforge.schema import CallError, Message, Repair, ToolCall, Toolset


class ParseResult(BaseModel):
    """What one assistant text contained."""

    text: str = ""
    """Text outside the calls (reasoning)."""
    calls: list[ToolCall] = Field(default_factory=list)
    """Calls that passed validation, in order."""
    errors: list[CallError] = Field(default_factory=list)
    """Typed problems; an errored call is never dispatched."""
    repairs: list[Repair] = Field(default_factory=list)
    """Repairs applied to the accepted calls."""

    @property
    def strictly_valid(self) -> bool:
        return bool(self.calls) and not self.errors and not self.repairs

    @property
    def valid(self) -> bool:
        return bool(self.calls) and not self.errors


class Dialect:
    """Base: subclasses implement the text format; chat assembly is shared."""

    name: str = ""

    def system_prompt(self, toolset: Toolset, instructions: str = "") -> str:
        raise NotImplementedError  # abstract

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        raise NotImplementedError  # abstract

    def render_tool_results(self, results: list[Message]) -> str:
        raise NotImplementedError  # abstract

    def parse(self, text: str, toolset: Toolset) -> ParseResult:
        raise NotImplementedError  # abstract

    @classmethod
    def for_model(cls, name_or_template: str) -> "Dialect":
        """The dialect for a model name or chat template (see ``trajforge.parse.detect``)."""
        from trajforge.parse import dialect_for_model  # the registry imports this module

        return dialect_for_model(name_or_template)

    tool_role: str = "user"
    """Chat role that carries tool results for models whose template has no ``tool`` role."""

    def to_chat(self, messages: list[Message], toolset: Toolset) -> list[dict[str, Any]]:
        """Plain ``{"role", "content"}`` messages ready for a chat template.

        The first system message gets the tool block appended; consecutive tool messages are merged
        into one turn, as Qwen2.5/Hermes templates do.
        """
        chat: list[dict[str, Any]] = []
        pending: list[Message] = []

        def flush() -> None:
            if pending:
                chat.append({"role": self.tool_role, "content": self.render_tool_results(pending)})
                pending.clear()

        for m in messages:
            if m.role == "tool":
                pending.append(m)
                continue
            flush()
            if m.role == "system":
                chat.append({"role": "system", "content": self.system_prompt(toolset, m.content)})
            elif m.role == "assistant":
                text = m.raw if m.raw is not None else self.render_assistant(m.content, m.tool_calls)
                chat.append({"role": "assistant", "content": text})
            else:
                chat.append({"role": m.role, "content": m.content})
        flush()
        return chat
