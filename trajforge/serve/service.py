"""Chat completions over a token backend: render with the dialect, generate, parse into tool_calls.

The request's ``model`` picks a served model (the base model or one adapter). Its dialect renders the
request's tools into the prompt exactly as training rendered them (``Dialect.chat_text`` with the
adapter's recorded render mode and chat template, as ``HFPolicy`` renders) and parses the output back: valid calls become OpenAI ``tool_calls``
with ``finish_reason: tool_calls``, the text around them is the ``content``. When the output had a
call the parser rejected (bad JSON, unknown tool, invalid arguments), the raw output is returned as
the content so the client sees what the model wrote. An adapter trained with retrieved
demonstrations shows them above the first user message of each request, from the pool it
recorded (``harness/demos.py``; the block a client already put there is replaced); a request
without ``tools`` (a text dialect's client renders them itself) draws on the whole pool, which is
what training drew on unless the pool mixes environments.

Streaming: without tools, content streams token by token as it is sampled. With tools, the server
streams once the completion is parsed: call markup differs per dialect, and streaming it
as content would hand clients half-written markup; the chunks then carry the same result as the
non-streamed answer (content, then each call's name and arguments as ``tool_calls`` deltas).
"""

from __future__ import annotations

from contextlib import closing
from typing import Any, Iterator, NamedTuple

from trajforge.harness.demos import Demos
from trajforge.parse import Dialect
from trajforge.schema import Message, Toolset
from trajforge.serve.backend import Backend, Sampling, Token
from trajforge.serve.protocol import (ChatRequest, ServeError, chat_messages, chunk, completion_id,
                                      logprob_entries, now, openai_tool_calls, read_request,
                                      request_toolset, usage)

DEFAULT_MAX_TOKENS = 1024
"""Completion budget when a request names none (bounded also by the model's context)."""
_NORMALIZER_MARGIN = 2
"""Slack in the characters-per-token bound for tokenizers whose normalizer drops characters
(accents, runs of spaces) before the vocabulary sees them."""
CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
"""Error code of a prompt past the model's context, OpenAI's: clients (``OpenAIPolicy``) tell it
from a bad request by it."""


class ServedModel(NamedTuple):
    """One name a client can ask for."""

    name: str
    adapter: str | None
    """Adapter name in the backend; None for the base model."""
    dialect: Dialect
    """Renders tools and parses calls for this model."""
    source: str
    """Where the weights came from (model id or adapter folder)."""
    render_mode: str = "dialect"
    """How prompts with tools are rendered (``Dialect.chat_text``); an adapter's is the one it was trained with."""
    chat_template: str | None = None
    """The template text an adapter was trained with (its meta); None: the backend tokenizer's."""
    demos: Demos | None = None
    """The retrieved demonstrations an adapter was trained with (its meta, ``harness/demos.py``):
    shown above the first user message of every request, as training showed them."""


class Prepared(NamedTuple):
    """A validated request, rendered to prompt ids."""

    request: ChatRequest
    model: ServedModel
    toolset: Toolset | None
    """Tools to parse calls against; None when the request has none (or tool_choice is none)."""
    prompt_ids: list[int]
    sampling: Sampling
    stops: tuple[str, ...]


class Completion(NamedTuple):
    """What one generation produced."""

    tokens: list[Token]
    text: str
    """Decoded text, end-of-turn token and stop string excluded."""
    finish: str
    """stop or length."""


class ChatService:
    def __init__(self, backend: Backend, models: dict[str, ServedModel]):
        self.backend = backend
        self.models = models
        self.tokenizer = backend.tokenizer
        self.max_token_chars = _max_token_chars(backend.tokenizer)
        self._renderers: dict[str, Any] = {}

    def load_adapter(self, body: Any) -> str:
        """vLLM's runtime LoRA API: ``{"lora_name", "lora_path"}`` → a new served model whose
        dialect is the one the adapter records (else the base model's)."""
        from trajforge.serve.adapters import ServeConfigError, served_adapter

        name, path = _lora_fields(body, ("lora_name", "lora_path"))
        if name in self.models:
            raise ServeError(400, f"The lora adapter '{name}' has already been loaded.", param="lora_name")
        base = next(m for m in self.models.values() if m.adapter is None)
        try:
            served = served_adapter(name, path, base.dialect.name)
        except ServeConfigError as e:
            raise ServeError(400, str(e), param="lora_path") from None
        except (OSError, ValueError) as e:  # a path too long to stat, an unreadable adapter meta file
            raise ServeError(400, f"cannot read adapter {name!r} at {path[:200]!r}: {type(e).__name__}: "
                             f"{str(e)[:200]}", param="lora_path") from None
        try:
            self.backend.load_adapter(name, path)
        except Exception as e:  # noqa: BLE001 - a broken adapter folder is the caller's error
            raise ServeError(400, f"could not load adapter {name!r} from {path}: {type(e).__name__}: {e}",
                             param="lora_path") from None
        self.models[name] = served
        return f"Success: LoRA adapter '{name}' added successfully."

    def unload_adapter(self, body: Any) -> str:
        (name,) = _lora_fields(body, ("lora_name",))
        model = self.models.get(name)
        if model is None or model.adapter is None:
            raise ServeError(404, f"The lora adapter '{name[:200]}' cannot be found.", param="lora_name",
                             code="not_found")
        del self.models[name]
        # Its renderer too: an adapter loaded later under this name may record another template.
        self._renderers.pop(name, None)
        self.backend.unload_adapter(name)
        return f"Success: LoRA adapter '{name}' removed successfully."

    def models_list(self) -> dict[str, Any]:
        created = now()
        base = next(m.name for m in self.models.values() if m.adapter is None)
        return {"object": "list", "data": [
            {"id": m.name, "object": "model", "created": created, "owned_by": "trajforge",
             "root": m.source, "parent": None if m.adapter is None else base}
            for m in self.models.values()]}

    # ---- request → prompt -----------------------------------------------------------------------

    def prepare(self, body: Any) -> Prepared:
        """Validate and render a request; raises ServeError naming what was wrong."""
        req = read_request(body)
        model = self.models.get(req.model)
        if model is None:
            raise ServeError(404, f"The model `{req.model[:200]}` does not exist; served: {sorted(self.models)}",
                             param="model", code="model_not_found")
        # More turns than the context has positions is no conversation; refused before rendering, a
        # 30 MB list of empty turns costs a second, not the template's and tokenizer's many.
        if len(req.messages) > self.backend.context:
            raise ServeError(400, f"messages holds {len(req.messages)} turns; {req.model} takes at most "
                             f"{self.backend.context} tokens", param="messages", code=CONTEXT_LENGTH_EXCEEDED)
        toolset = _toolset(req)
        messages = chat_messages(req.messages)
        if toolset is not None and messages[0].role != "system":
            messages.insert(0, Message(role="system"))  # the dialect puts the tools in the system turn
        if model.demos is not None:  # without tools (a text dialect's client): candidates unfiltered
            messages = model.demos.in_messages(messages, tools=toolset.names if toolset is not None else None)
        self._check_fits(sum(len(m.content) for m in messages), req.model)
        renderer = self.renderer(model)
        text = _prompt_text(renderer, model, messages, toolset)
        self._check_fits(len(text), req.model)
        prompt = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        room = self.backend.context - len(prompt)
        if room < 1:
            raise ServeError(400, f"the prompt is {len(prompt)} tokens; {req.model} takes at most "
                             f"{self.backend.context}", param="messages", code=CONTEXT_LENGTH_EXCEEDED)
        wanted = req.max_completion_tokens or req.max_tokens or DEFAULT_MAX_TOKENS
        sampling = Sampling(
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p, max_tokens=min(wanted, room),
            seed=req.seed, top_logprobs=(req.top_logprobs or 0) if req.logprobs else 0,
            stop_ids=frozenset({renderer.eos_token_id} - self.backend.stop_ids - {None}))
        stops = (req.stop,) if isinstance(req.stop, str) else tuple(s for s in req.stop or () if s)
        return Prepared(req, model, toolset, prompt, sampling, stops)

    def renderer(self, model: ServedModel):
        """The tokenizer that renders ``model``'s prompts: the backend's, or for an adapter trained
        with another chat template, the tokenizer saved with it (same vocabulary, its template
        and end-of-turn token)."""
        if model.chat_template is None or model.chat_template == self.tokenizer.chat_template:
            return self.tokenizer
        if model.name not in self._renderers:
            from trajforge.policies.loading import load_tokenizer

            self._renderers[model.name] = load_tokenizer(model.source, model.chat_template)
        return self._renderers[model.name]

    def _check_fits(self, chars: int, model: str) -> None:
        """Refuse, before tokenizing, a prompt too long to fit the context however it tokenizes: a
        token covers at most ``max_token_chars`` characters, so a 30 MB body is refused at once
        instead of costing seconds of tokenization first."""
        most = self.backend.context * self.max_token_chars * _NORMALIZER_MARGIN
        if chars > most:
            raise ServeError(400, f"the prompt is {chars} characters; {model} takes at most "
                             f"{self.backend.context} tokens (at most {most} characters)", param="messages",
                             code=CONTEXT_LENGTH_EXCEEDED)

    # ---- generation -----------------------------------------------------------------------------

    def _tokens(self, prep: Prepared) -> Iterator[Token]:
        with closing(self.backend.tokens(prep.model.adapter, prep.prompt_ids, prep.sampling)) as it:
            yield from it

    def _decode(self, tokens: list[Token], extra_stops: frozenset[int] = frozenset()) -> str:
        ids = [t.id for t in tokens if t.id not in self.backend.stop_ids and t.id not in extra_stops]
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def _generate(self, prep: Prepared) -> Iterator[tuple[Token, str, str | None]]:
        """(token, text so far, finish reason or None) per sampled token."""
        tokens: list[Token] = []
        for tok in self._tokens(prep):
            tokens.append(tok)
            text = self._decode(tokens, prep.sampling.stop_ids)
            hit = _first_stop(text, prep.stops)
            if hit is not None:
                yield tok, text[:hit], "stop"
                return
            if tok.id in self.backend.stop_ids or tok.id in prep.sampling.stop_ids:
                yield tok, text, "stop"
                return
            yield tok, text, "length" if len(tokens) >= prep.sampling.max_tokens else None

    def generate(self, prep: Prepared) -> Completion:
        tokens, text, finish = [], "", "length"
        for tok, text, done in self._generate(prep):
            tokens.append(tok)
            finish = done or finish
        return Completion(tokens, text, finish)

    def _message(self, prep: Prepared, text: str) -> tuple[str | None, list[dict[str, Any]]]:
        """(content, tool_calls) for a finished text."""
        if prep.toolset is None:
            return text, []
        parsed = prep.model.dialect.parse(text, prep.toolset)
        if any(e.kind != "no_call" for e in parsed.errors):
            content = text  # a call was attempted and rejected: show the client what was written
        else:
            content = parsed.text
        return content or None, openai_tool_calls(parsed.calls)

    def _token_extras(self, prep: Prepared, tokens: list[Token]) -> dict[str, Any]:
        req = prep.request
        extra: dict[str, Any] = {}
        if req.logprobs:
            extra["logprobs"] = {"content": logprob_entries(
                self.tokenizer, tokens, bool(req.top_logprobs), bool(req.return_tokens_as_token_ids))}
        if req.return_token_ids:
            extra["token_ids"] = [t.id for t in tokens]
        return extra

    # ---- answers --------------------------------------------------------------------------------

    def complete(self, prep: Prepared) -> dict[str, Any]:
        """The whole ``chat.completion`` object."""
        done = self.generate(prep)
        content, calls = self._message(prep, done.text)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        choice = {"index": 0, "message": message, "logprobs": None,
                  "finish_reason": "tool_calls" if calls else done.finish,
                  **self._token_extras(prep, done.tokens)}
        body = {"id": completion_id(), "object": "chat.completion", "created": now(),
                "model": prep.model.name, "choices": [choice],
                "usage": usage(len(prep.prompt_ids), len(done.tokens))}
        if prep.request.return_token_ids:
            body["prompt_token_ids"] = prep.prompt_ids
        return body

    def stream(self, prep: Prepared) -> Iterator[dict[str, Any]]:
        """``chat.completion.chunk`` objects (the HTTP layer adds ``data:`` and ``[DONE]``)."""
        cid, created, name = completion_id(), now(), prep.model.name
        first = chunk(cid, name, created, {"role": "assistant", "content": ""})
        if prep.request.return_token_ids:
            first["prompt_token_ids"] = prep.prompt_ids
        yield first
        if prep.toolset is None:
            tokens, finish = yield from self._stream_text(prep, cid, created)
            calls: list[dict[str, Any]] = []
        else:
            tokens, finish, calls = yield from self._stream_parsed(prep, cid, created)
        yield chunk(cid, name, created, {}, "tool_calls" if calls else finish)
        opts = prep.request.stream_options
        if opts is not None and opts.include_usage:
            yield {"id": cid, "object": "chat.completion.chunk", "created": created, "model": name,
                   "choices": [], "usage": usage(len(prep.prompt_ids), len(tokens))}

    def _stream_text(self, prep: Prepared, cid: str, created: int):
        tokens: list[Token] = []
        sent, finish = "", "length"
        for tok, text, done in self._generate(prep):
            tokens.append(tok)
            finish = done or finish
            ready = text if done else _settled(text, prep.stops)
            delta, sent = ready[len(sent):], ready
            yield chunk(cid, prep.model.name, created, {"content": delta}, **self._token_extras(prep, [tok]))
        return tokens, finish

    def _stream_parsed(self, prep: Prepared, cid: str, created: int):
        done = self.generate(prep)
        content, calls = self._message(prep, done.text)
        yield chunk(cid, prep.model.name, created, {"content": content or ""},
                    **self._token_extras(prep, done.tokens))
        for k, call in enumerate(calls):
            head = {"index": k, "id": call["id"], "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": ""}}
            yield chunk(cid, prep.model.name, created, {"tool_calls": [head]})
            args = {"index": k, "function": {"arguments": call["function"]["arguments"]}}
            yield chunk(cid, prep.model.name, created, {"tool_calls": [args]})
        return done.tokens, done.finish, calls


def _lora_fields(body: Any, names: tuple[str, ...]) -> tuple[str, ...]:
    if not isinstance(body, dict):
        raise ServeError(400, "the request body must be a JSON object")
    values = []
    for name in names:
        value = body.get(name)
        if not isinstance(value, str) or not value:
            raise ServeError(400, f"'{name}' is required and must be a non-empty string", param=name)
        values.append(value)
    return tuple(values)


def _toolset(req: ChatRequest) -> Toolset | None:
    """The tools to render and parse against, after ``tool_choice``."""
    if not req.tools:
        return None
    toolset = request_toolset(req.tools)
    choice = req.tool_choice
    if choice in (None, "auto", "required"):  # required is not enforced: no constrained decoding
        return toolset
    if choice == "none":
        return None
    spec = toolset.get(choice.function.name)
    if spec is None:
        raise ServeError(400, f"tool_choice names {choice.function.name!r}, which is not in tools "
                         f"({toolset.names})", param="tool_choice")
    return Toolset(tools=(spec,))


def _prompt_text(tokenizer, model: ServedModel, messages: list[Message], toolset: Toolset | None) -> str:
    """With tools: ``Dialect.chat_text`` in the model's render mode, the renderer the hf policy and
    SFT use. Without: the system turns stay as written (no empty tool block) and the rest is
    rendered by the dialect, through the same template adaptations (``Dialect.apply_template``).
    Either way control-token strings inside user, tool and assistant text are escaped, so a message
    cannot forge a turn."""
    dialect = model.dialect
    if toolset is not None:
        return dialect.chat_text(tokenizer, messages, toolset, model.render_mode)
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    # System turns are the caller's own (a text dialect's client puts its tool block there, markers
    # and all), so they stay as written; user, tool and assistant text is escaped as chat_text does.
    chat = [{"role": "system", "content": m.content} for m in messages[:lead]]
    chat += dialect.to_chat(messages[lead:], Toolset(tools=()), tokenizer)
    return dialect.apply_template(tokenizer, chat)


def _max_token_chars(tokenizer) -> int:
    """Most characters one token can stand for: the longest vocabulary entry (byte-level BPE writes
    one character per byte, SentencePiece one per character, so an entry is never shorter than the
    text it decodes to)."""
    vocab = tokenizer.get_vocab()
    return max(map(len, vocab), default=1) or 1


def _settled(text: str, stops: tuple[str, ...]) -> str:
    """The part of a growing text that can be sent: not a half-decoded multi-byte character at the
    end (decoded as U+FFFD), not a tail that may yet become a stop string."""
    text = text.rstrip("\ufffd")
    for stop in stops:
        for k in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:k]):
                text = text[: len(text) - k]
                break
    return text


def _first_stop(text: str, stops: tuple[str, ...]) -> int | None:
    hits = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(hits) if hits else None
