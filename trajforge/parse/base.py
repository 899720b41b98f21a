"""Dialect: renders tools, calls and results into text and parses model text back, as one object.

The same Dialect instance renders SFT samples and parses rollouts and evaluation episodes, so the
metrics are computed with the parser the model was trained against.

Parsing is total: ``Dialect.parse`` returns a ``ParseResult`` for any input whatever, in time
linear in its length, and everything in it is valid UTF-8 JSON. The pieces: the reply is admitted
first (``limits``: clean text, the size cap), each dialect reads it (``_parse``) with linear-time
scanners, and arguments are settled by validation; an exception a dialect still raises is a bug,
turned into a typed error (``internal parser error``, which the hostile-input tests look for) so
that one reply never ends a collection.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel, Field

from trajforge.parse.detect import TemplateTraits, template_supports_tools, template_traits  # noqa: F401 (0.1 name)
from trajforge.parse.limits import MAX_ERRORS, MAX_REPLY_CHARS, as_text, start_repair_budget
from trajforge.parse.special import TextGuard, text_guard
from trajforge.schema import CallError, Message, Repair, ToolCall, Toolset

RENDER_MODES = ("dialect", "template")
"""How a prompt is rendered: the dialect's tool block, or the model's chat template with ``tools``."""


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


INTERNAL_ERROR = "internal parser error"
"""Words every backstop error message carries: a test that finds them has found a parser bug."""


def over_cap(length: int, cap: int) -> ParseResult:
    """The result for a reply longer than the cap: one ``truncated`` error, nothing read."""
    return ParseResult(errors=[CallError(kind="truncated", message=(
        f"The reply is {length:,} characters long, over the {cap:,}-character limit, and was not read. "
        "Reply with shorter tool calls."))])


def guarded(read: Callable[[], ParseResult]) -> ParseResult:
    """Run one parse under a fresh json-repair budget (``limits.REPAIR_BUDGET``), turning an exception
    into a typed ``malformed`` error rather than the end of the caller's run. (An OpenAI response
    read as text is parsed through ``parse_tool_calls``, which starts the budget again: at most
    twice the budget for one reply.)"""
    start_repair_budget()
    try:
        return few_errors(read())
    except Exception as e:  # noqa: BLE001 - the backstop of a total parser: typed, counted, never silent
        return backstop(e)


def backstop(e: Exception) -> ParseResult:
    """The result of a parse that raised: one ``malformed`` error naming the exception's type."""
    return ParseResult(errors=[CallError(kind="malformed", message=(
        f"The tool call could not be read ({INTERNAL_ERROR}: {type(e).__name__}). "
        "Rewrite it in the documented format."))])


def few_errors(result: ParseResult) -> ParseResult:
    """At most ``MAX_ERRORS`` errors: the rest are folded into the last one listed."""
    if len(result.errors) > MAX_ERRORS:
        rest = result.errors[MAX_ERRORS - 1:]
        result.errors[MAX_ERRORS - 1:] = [CallError(kind=rest[0].kind, tool=rest[0].tool, message=(
            f"{rest[0].message} ({len(rest) - 1:,} more tool-call errors after this one are not listed.)"))]
    return result


class Dialect:
    """Base: subclasses implement the text format (``_parse`` and the renderers); admission of a
    reply and chat assembly are shared."""

    name: str = ""

    def __init__(self, max_chars: int | None = MAX_REPLY_CHARS):
        self.max_chars = max_chars
        """Longest reply ``parse`` reads, in characters; None reads any length (benchmarks do)."""

    def system_prompt(self, toolset: Toolset, instructions: str = "") -> str:
        raise NotImplementedError  # abstract

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        raise NotImplementedError  # abstract

    def render_tool_results(self, results: list[Message]) -> str:
        raise NotImplementedError  # abstract

    def parse(self, text: str, toolset: Toolset) -> ParseResult:
        """Calls, errors, repairs and the text outside the calls of one assistant reply.

        Total: any input gives a result. Bytes are decoded as UTF-8 (invalid sequences become
        U+FFFD), lone surrogates are replaced, and a reply over ``max_chars`` is one ``truncated``
        error without being read.
        """
        if type(text) is not str or not text.isascii():
            text = as_text(text)
        if self.max_chars is not None and len(text) > self.max_chars:
            return over_cap(len(text), self.max_chars)
        # ``guarded``, written out: this is every turn's hot path.
        start_repair_budget()
        try:
            result = self._parse(text, toolset)
        except Exception as e:  # noqa: BLE001 - see guarded
            return backstop(e)
        return result if len(result.errors) <= MAX_ERRORS else few_errors(result)

    def _parse(self, text: str, toolset: Toolset) -> ParseResult:
        """The dialect's reading of an admitted reply (clean text, within the cap)."""
        raise NotImplementedError  # abstract

    @classmethod
    def for_model(cls, name_or_path: str, chat_template: str | dict | None = None) -> "Dialect":
        """The dialect for a model: its chat template's call markers when given, else its name
        (see ``trajforge.parse.detect``); hermes when neither says."""
        from trajforge.parse import dialect_for_model  # the registry imports this module

        return dialect_for_model(name_or_path, chat_template)

    tool_role: str = "user"
    """Chat role that carries tool results for models whose template has no ``tool`` role."""

    markers: tuple[str, ...] = ()
    """What this dialect writes itself that a tokenizer may hold as tokens (its call and result
    tags): kept in its own text — the tool prompt, an assistant turn, the result wrappers — and
    escaped in anything a model, a user or a tool wrote (``trajforge.parse.special``)."""

    def guard(self, tokenizer: Any) -> TextGuard | None:
        """The escapers for rendering through ``tokenizer``; None without one (nothing escaped)."""
        return None if tokenizer is None else text_guard(tokenizer, self.markers)

    def assistant_text(self, message: Message, tokenizer: Any = None) -> str:
        """An assistant turn exactly as prompts show it (and training learns it): what the model
        wrote (``raw``), else the rendering of its text and calls; with a tokenizer, control tokens
        in it escaped except this dialect's markers, which are the model's own format. The same
        rule for both forms, so a trajectory imported without its raw text (its turns re-rendered
        from calls) trains on the same tokens as the original.

        The SFT sequence builder must use this for the assistant text it appends, so that the
        next turn's prompt (``chat_text``, which renders history with it) extends it exactly.
        """
        guard = self.guard(tokenizer)
        if message.raw is not None:
            return guard.turn(message.raw) if guard else message.raw
        if guard is None:
            return self.render_assistant(message.content, message.tool_calls)
        calls = [c.model_copy(update={"arguments": guard.turn.value(c.arguments)}) for c in message.tool_calls]
        return self.render_assistant(guard.turn(message.content), calls)

    def to_chat(self, messages: list[Message], toolset: Toolset, tokenizer: Any = None) -> list[dict[str, Any]]:
        """Plain ``{"role", "content"}`` messages ready for a chat template.

        The first system message gets the tool block appended; consecutive tool messages are merged
        into one turn, as Qwen2.5/Hermes templates do. With ``tokenizer``, the control tokens in
        what a user, a tool or the model wrote are escaped (see ``markers``).
        """
        guard = self.guard(tokenizer)
        text = guard.content if guard else _unchanged
        chat: list[dict[str, Any]] = []
        pending: list[Message] = []

        def flush() -> None:
            if pending:
                chat.append({"role": self.tool_role, "content": self.render_tool_results(pending)})
                pending.clear()

        for m in messages:
            if m.role == "tool":
                pending.append(m.model_copy(update={"content": text(m.content), "name": text(m.name or "") or m.name})
                               if guard else m)
                continue
            flush()
            if m.role == "system":
                prompt = self.system_prompt(toolset, text(m.content))
                chat.append({"role": "system", "content": guard.turn(prompt) if guard else prompt})
            elif m.role == "assistant":
                chat.append({"role": "assistant", "content": self.assistant_text(m, tokenizer)})
            else:
                chat.append({"role": m.role, "content": text(m.content)})
        flush()
        return chat

    def template_chat(self, messages: list[Message], tokenizer: Any = None,
                      tool_role: bool = True) -> list[dict[str, Any]]:
        """Messages for a chat template that shows the tools itself (``render_mode="template"``).

        The system message keeps only its instructions (the template renders the ``tools``
        argument), each tool result is its own ``tool`` message (the template wraps them), and an
        assistant turn is this dialect's text as plain content — what the model wrote, or the
        rendering of its calls — so the template cannot re-serialize earlier calls differently
        from what the model sees and learns. With ``tokenizer``, control tokens are escaped as in
        ``to_chat``. ``tool_role=False`` (a template that drops or refuses ``tool`` messages):
        consecutive results are this dialect's result text in one user turn, as ``to_chat`` puts them.
        """
        guard = self.guard(tokenizer)
        text = guard.content if guard else _unchanged
        chat: list[dict[str, Any]] = []
        pending: list[Message] = []
        for m in messages:
            if m.role == "tool" and not tool_role:
                pending.append(m.model_copy(update={"content": text(m.content)}))
                continue
            if pending:
                chat.append({"role": "user", "content": self.render_tool_results(pending)})
                pending = []
            if m.role == "assistant":
                chat.append({"role": "assistant", "content": self.assistant_text(m, tokenizer)})
            elif m.role == "tool":
                entry = {"role": "tool", "content": text(m.content)}
                if m.name:
                    entry["name"] = text(m.name)
                if m.tool_call_id:
                    entry["tool_call_id"] = text(m.tool_call_id)
                chat.append(entry)
            else:
                chat.append({"role": m.role, "content": text(m.content)})
        if pending:
            chat.append({"role": "user", "content": self.render_tool_results(pending)})
        return chat

    def chat_text(self, tokenizer, messages: list[Message], toolset: Toolset, render_mode: str = "dialect") -> str:
        """The prompt for the next assistant turn through ``tokenizer``'s chat template.

        The one rendering path of the hf policy (inference), the SFT renderer (training) and
        ``serve``, so they cannot drift. ``render_mode``: ``dialect`` puts this dialect's tool block
        in the system message; ``template`` passes the tools to a chat template that renders them
        itself (``apply_chat_template(..., tools=...)``, for models trained on their own tool prompt).

        Templates that cannot take a part of the conversation (``TemplateTraits``, found by probing
        the template once) get a fixed rendering instead of an error or a dropped message:

        - no system role (Gemma; Mistral v0.3, which moves it): the system text — instructions and,
          in ``dialect`` mode, the tool block — opens the first user turn (``fold_system``);
        - no ``tools`` argument (Gemma, Phi-3.5, most base-model templates): ``template`` mode
          renders exactly as ``dialect`` mode, the tools in the dialect's tool block;
        - no ``tool`` role (Phi-3.5 drops it, Gemma refuses it): tool results are the dialect's
          result text in a user turn.

        Text stays text: every control token of ``tokenizer`` (and of the known template families)
        inside what a user, a tool or the model wrote is escaped, so the only control tokens in the
        prompt are the ones the template and the dialect's format put there
        (``trajforge.parse.special``). Tokenize the result with special tokens parsed, as usual.
        """
        if render_mode not in RENDER_MODES:
            raise ValueError(f"unknown render mode {render_mode!r}; use one of {', '.join(RENDER_MODES)}")
        traits = template_traits(tokenizer)
        if render_mode == "dialect" or not traits.tools:
            return self.apply_template(tokenizer, self.to_chat(messages, toolset, tokenizer), traits=traits)
        tools = self.guard(tokenizer).content.value(toolset.openai())
        return self.apply_template(tokenizer, self.template_chat(messages, tokenizer, traits.tool_role),
                                   tools=tools, traits=traits)

    def apply_template(self, tokenizer, chat: list[dict[str, Any]], tools: list | None = None,
                       traits: TemplateTraits | None = None) -> str:
        """``tokenizer.apply_chat_template`` on ready chat messages (with the generation prompt),
        the system text folded into the user turn for a template without a system role."""
        traits = traits or template_traits(tokenizer)
        if not traits.system:
            chat = fold_system(chat)
        extra = {"tools": tools} if tools is not None else {}
        return tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True, **extra)


def fold_system(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """System messages folded into the next user turn (the system text, a blank line, the user
    text), for templates without a system role; one left at the end becomes a user turn of its
    own. Nothing is dropped."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for m in chat:
        if m["role"] == "system":
            if m["content"]:
                pending.append(m["content"])
            continue
        if pending and m["role"] == "user":
            m = {**m, "content": "\n\n".join([*pending, m["content"]] if m["content"] else pending)}
            pending = []
        out.append(m)
    if pending:
        out.append({"role": "user", "content": "\n\n".join(pending)})
    return out


def _unchanged(text: str) -> str:
    return text
