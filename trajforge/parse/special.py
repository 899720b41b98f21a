"""Text stays text: a chat template's control tokens inside model or tool text are escaped.

A chat template is rendered to a string and then tokenized, and a tokenizer reads every special
token it knows *anywhere* in that string: a tool result holding ``<|im_end|>\\n<|im_start|>system``,
or a user message holding ``<|eot_id|><|start_header_id|>``, becomes real turn boundaries — a
forged system turn in a prompt, or in an SFT sample the model then learns from.

Why escaping and not "tokenize the content with special tokens disabled": the renderer's product is
one string (``Dialect.chat_text``), which the hf policy, the SFT sequence builder and ``serve``
all tokenize, and which a server could as well. Keeping it a string keeps one renderer and one
rule any caller gets for free: in a rendered prompt, every control token was put there by the
template (or by the dialect's own format); nothing a model or a tool wrote can add one. Token-level
rendering would need every consumer to track which spans are content.

The escape is a ZERO WIDTH SPACE (U+200B) after the token's first character: ``<|im_start|>``
becomes ``<\u200b|im_start|>``, which reads the same, tokenizes as ordinary text, and no tokenizer's
added-token matcher takes for the control token. (It is not undone on the way back: a model that
copies the escaped form writes plain text, which is what it is.)

Which strings: every special token the tokenizer declares, its added tokens that look like markup
(``<...>``, ``[...]``: Qwen's ``<tool_call>`` is an added token that is not marked special), and a
list of the well-known families' control tokens (``KNOWN_CONTROL_TOKENS``) whatever the tokenizer.
In the dialect's own text — its tool prompt, the wrappers around tool results, and an assistant
turn (the model's own output, raw or re-rendered from its calls) — the dialect's ``markers`` stay:
they are the format the model writes and is trained on. Everything a user or a tool wrote has
every marker escaped too, so a tool result cannot close its own ``<tool_response>`` or open a call.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

ESCAPE = "\u200b"
"""Inserted after the first character of a control token found in content."""

KNOWN_CONTROL_TOKENS: tuple[str, ...] = (
    # ChatML (Qwen, SmolLM, Hermes, Phi-3.5...)
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_sep|>",
    # Llama 3
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
    "<|eom_id|>", "<|python_tag|>", "<|finetune_right_pad_id|>",
    # Llama 2 / Mistral
    "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[ARGS]", "[CALL_ID]",
    "[THINK]", "[/THINK]",
    # Gemma
    "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>",
    # Phi-3
    "<|system|>", "<|user|>", "<|assistant|>", "<|end|>",
    # DeepSeek
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
    "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>", "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>",
    "<｜tool▁output▁end｜>",
    # Tool and reasoning markers of the Qwen / Hermes family
    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>",
    "<think>", "</think>",
)

_MARKUP = re.compile(r"<[^\s<>]+>|\[[^\s\[\]]+\]|<\|[^\s]+\|>|<｜[^\s]+｜>")


def _looks_like_markup(token: str) -> bool:
    return _MARKUP.fullmatch(token) is not None


def tokenizer_control_tokens(tokenizer: Any) -> frozenset[str]:
    """The strings ``tokenizer`` reads as control tokens: its special tokens, and its added tokens
    that look like markup. Empty for an object that exposes neither (a test double)."""
    found: set[str] = set()
    try:
        found.update(t for t in (getattr(tokenizer, "all_special_tokens", None) or ()) if isinstance(t, str))
        for added in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
            content = getattr(added, "content", added)
            if isinstance(content, str) and (getattr(added, "special", False) or _looks_like_markup(content)):
                found.add(content)
    except Exception:  # noqa: BLE001 - a tokenizer that cannot list its tokens still gets the known ones
        pass
    # One character can be no token boundary worth forging; whitespace tokens would mangle text.
    return frozenset(t for t in found if len(t) >= 2 and not t.isspace())


def _trie_pattern(words: Iterable[str]) -> str:
    """One regex for a set of literal strings, factored as a trie: a tokenizer may declare
    thousands of tokens (Gemma's ``<unusedN>``), and a plain alternation tries each of them at
    every ``<`` of a long text. Optional tails are greedy, so the longest token wins."""
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        group = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:  # a word ends here and longer ones go on
            group = ("(?:" + group + ")" if len(branches) == 1 else group) + "?"
        return group

    return build(trie)


class Escaper:
    """Escapes a fixed set of control-token strings in text (see the module docstring)."""

    def __init__(self, tokens: Iterable[str]):
        self.tokens = frozenset(t for t in tokens if len(t) >= 2)
        self._pattern = re.compile(_trie_pattern(self.tokens)) if self.tokens else None

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        # A second pass catches a token that overlapped one already escaped; each pass only adds
        # escapes, so this ends (in practice after one pass).
        for _ in range(8):
            escaped = self._pattern.sub(_escape_match, text)
            if escaped == text:
                break
            text = escaped
        return text

    def value(self, value: Any) -> Any:
        """``value`` with every string in it (keys included) escaped: call arguments, tool schemas."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {self(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        return value


def _escape_match(m: re.Match) -> str:
    token = m.group()
    return token[0] + ESCAPE + token[1:]


class TextGuard:
    """The two escapers one rendering uses: ``content`` for text a user or a tool wrote (every
    control token and every dialect marker), ``turn`` for text in the dialect's own format (an
    assistant turn, the tool prompt): its ``markers`` stay."""

    def __init__(self, tokens: Iterable[str], markers: Iterable[str] = ()):
        tokens = frozenset(tokens)
        self.content = Escaper(tokens)
        self.turn = Escaper(tokens - frozenset(markers))


_CACHE: dict[tuple[int, int, tuple[str, ...]], tuple[Any, TextGuard]] = {}


def text_guard(tokenizer: Any, markers: tuple[str, ...] = ()) -> TextGuard:
    """The ``TextGuard`` for a tokenizer (built once per tokenizer, its size and the markers kept)."""
    try:
        size = len(tokenizer)
    except Exception:  # noqa: BLE001 - a tokenizer without a length: no size in the key
        size = -1
    key = (id(tokenizer), size, markers)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is tokenizer:
        return hit[1]
    if len(_CACHE) > 256:
        _CACHE.clear()
    all_markers = {m for d in _dialect_markers() for m in d}
    guard = TextGuard(tokenizer_control_tokens(tokenizer) | set(KNOWN_CONTROL_TOKENS) | all_markers, markers)
    _CACHE[key] = (tokenizer, guard)
    return guard


def _dialect_markers() -> list[tuple[str, ...]]:
    """Every dialect's markers: in content, another dialect's call syntax is escaped too."""
    from trajforge.parse import DIALECTS  # the registry imports the dialects, which import base

    return [d.markers for d in DIALECTS.values()]


def escape_control_tokens(text: str, tokenizer: Any = None) -> str:
    """``text`` with every control token escaped: the tokenizer's, the known families', and every
    dialect's markers. For text that goes into a prompt without ``Dialect.chat_text``."""
    return text_guard(tokenizer).content(text)
