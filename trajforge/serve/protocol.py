"""The OpenAI chat-completions wire format, as ``trajforge serve`` reads and writes it.

Requests are validated into ``ChatRequest`` (unknown fields are ignored, as OpenAI clients send
many); OpenAI messages become dialect-neutral ``Message``s; responses and stream chunks are built
here, with vLLM's extensions for token-level training data: ``return_token_ids`` adds
``prompt_token_ids`` (top level; first chunk when streaming) and ``choices[].token_ids``, and
``logprobs`` adds ``choices[].logprobs.content[]`` entries, one per sampled token.

Anyone who can reach the port writes the request, so reading one never raises anything but
``ServeError`` (a 4xx answer naming what was wrong): ``load_json`` turns invalid UTF-8, numbers past
the int-string limit, NaN, nesting past ``MAX_DEPTH`` and lone surrogates (which no tokenizer
encodes) into errors, and every field is checked for its JSON type (strict: ``"yes"`` is not a
boolean, ``1.0`` is not an integer).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trajforge.schema import Message, ToolCall, ToolSpec, Toolset

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a request may have (tool schemas need a handful)."""
MAX_STOPS = 16
"""Most stop strings per request: each one is searched for after every sampled token."""
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_UNION_TAG = re.compile(r"^(str|int|bool|float|none|list\[.*\]|dict\[.*\]|literal\[.*\]|function-.*)$")
_EXPECTED = {
    "stop": "must be a string or a list of strings",
    "tool_choice": 'must be auto, none, required or {"type": "function", "function": {"name": ...}}',
}
"""Messages for union-typed fields, whose pydantic errors name every member of the union."""


class ServeError(Exception):
    """A request the server refuses; ``body()`` is the OpenAI-style error object."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param,
                          "code": self.code or self.status}}


# ---- reading JSON a client wrote --------------------------------------------------------------


def load_json(raw: bytes | str, where: str, field: str = "") -> Any:
    """Parse JSON from the wire; anything the rest of the server could choke on is a 400 naming
    ``where``. ``field`` is the request field the text came from (prefixes paths into it).
    Linear in the input: one parse, one walk."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ServeError(400, f"{where} is not valid UTF-8 (byte {e.start}: {e.reason})") from None
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise ServeError(400, f"{where} is not valid JSON: {e}", param=field or None) from None
    except RecursionError:
        raise ServeError(400, f"{where} is nested deeper than {MAX_DEPTH} levels", param=field or None) from None
    except ValueError as e:  # an integer past sys.get_int_max_str_digits(), NaN, Infinity
        raise ServeError(400, f"{where} is not valid JSON: {e}", param=field or None) from None
    _check_tree(value, where, field, surrogates=_SURROGATE_ESCAPE.search(raw) is not None)
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _check_tree(value: Any, where: str, field: str, surrogates: bool) -> None:
    """Refuse nesting past MAX_DEPTH and (when the text had a surrogate escape at all) strings or
    keys holding a lone surrogate. Iterative: the depth check must not itself recurse."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise ServeError(400, f"{where} is nested deeper than {MAX_DEPTH} levels",
                             param=_path(path[:1], field) or None)
        if isinstance(node, dict):
            for k, v in node.items():
                if surrogates and _SURROGATE.search(k):
                    raise _surrogate_error(_path(path + (k,), field) or where)
                stack.append((v, path + (k,)))
        elif isinstance(node, list):
            stack.extend((v, path + (i,)) for i, v in enumerate(node))
        elif surrogates and isinstance(node, str) and _SURROGATE.search(node):
            raise _surrogate_error(_path(path, field) or where)


def _surrogate_error(at: str) -> ServeError:
    return ServeError(400, f"{at} holds a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair); "
                      "text must be valid Unicode", param=at)


def _path(path: tuple[str | int, ...], prefix: str = "") -> str:
    """``("messages", 0, "content")`` → ``messages[0].content``; keys shown as ASCII."""
    out = prefix
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            key = p.encode("ascii", "backslashreplace").decode()[:64]
            out += f".{key}" if out else key
    return out


# ---- the request ------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class FunctionName(_Strict):
    name: str
    """The function a named ``tool_choice`` forces."""


class NamedToolChoice(_Strict):
    type: Literal["function"] = "function"
    """Always ``function``."""
    function: FunctionName
    """Which function."""


class StreamOptions(_Strict):
    include_usage: bool = False
    """Add a usage chunk at the end of the stream."""


class ChatRequest(_Strict):
    """The fields of ``POST /v1/chat/completions`` this server acts on."""

    model: str
    """Served model name: the base model or an adapter."""
    messages: list[dict[str, Any]] = Field(min_length=1)
    """OpenAI chat messages."""
    tools: list[dict[str, Any]] | None = None
    """OpenAI function tools; rendered into the prompt by the model's dialect."""
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    """auto (default with tools), none, required, or one named function."""
    temperature: float | None = Field(None, ge=0, le=2, allow_inf_nan=False)
    """0 is greedy; unset is 1, as OpenAI's default."""
    top_p: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    """Nucleus sampling mass; unset is 1."""
    max_tokens: int | None = Field(None, ge=1)
    """Most completion tokens (``max_completion_tokens`` is read too)."""
    max_completion_tokens: int | None = Field(None, ge=1)
    """Newer name of ``max_tokens``."""
    seed: int | None = Field(None, ge=-(2**63), le=2**64 - 1)
    """Sampling seed (what torch's generators take)."""
    stop: str | list[str] | None = Field(None, max_length=MAX_STOPS)
    """Strings that end the completion (not included in it)."""
    n: int | None = Field(None, ge=1, le=1)
    """Only one choice per request."""
    stream: bool | None = False
    """Answer as server-sent events."""
    stream_options: StreamOptions | None = None
    """``{"include_usage": true}`` adds a usage chunk at the end."""
    logprobs: bool | None = False
    """Return the log-prob of each completion token."""
    top_logprobs: int | None = Field(None, ge=0, le=20)
    """Alternatives per position, with ``logprobs``."""
    return_token_ids: bool | None = False
    """vLLM extension: return prompt and completion token ids."""
    return_tokens_as_token_ids: bool | None = False
    """vLLM extension: logprob entries name tokens ``token_id:N``."""


def read_request(body: Any) -> ChatRequest:
    if not isinstance(body, dict):
        raise ServeError(400, f"request body must be a JSON object, not {_json_type(body)}")
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as e:
        raise _validation_error(e) from None


def _validation_error(e: ValidationError) -> ServeError:
    first = e.errors(include_url=False, include_input=False)[0]
    loc = first["loc"]
    field = str(loc[0]) if loc else "body"
    if field in _EXPECTED and first["type"] not in ("too_long", "missing"):
        return ServeError(400, f"{field} {_EXPECTED[field]}", param=field)
    where = _path(tuple(p for i, p in enumerate(loc) if i == 0 or not _UNION_TAG.match(str(p))))
    return ServeError(400, f"{where}: {first['msg']}", param=field)


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def request_toolset(tools: list[dict[str, Any]]) -> Toolset:
    """A request's ``tools`` as a Toolset, each schema checked: the parser validates the model's
    calls against these schemas, so a schema jsonschema cannot use is refused here, up front."""
    specs: list[ToolSpec] = []
    for i, entry in enumerate(tools):
        where = f"tools[{i}]"
        if entry.get("type", "function") != "function":
            raise ServeError(400, f"{where}.type must be 'function'", param=where)
        fn = entry.get("function")
        if not isinstance(fn, dict):
            raise ServeError(400, f"{where}.function must be an object with a name", param=where)
        name, description = fn.get("name"), fn.get("description", "")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise ServeError(400, f"{where}.function.name must be 1-64 letters, digits, _ . or -", param=where)
        if any(s.name == name for s in specs):
            raise ServeError(400, f"{where}.function.name {name!r} is given twice", param=where)
        if not isinstance(description, str):
            raise ServeError(400, f"{where}.function.description must be a string", param=where)
        params = fn.get("parameters")
        if params is None:
            params = {"type": "object", "properties": {}}
        _check_parameters(params, f"{where}.function.parameters")
        specs.append(ToolSpec(name=name, description=description, parameters=params))
    return Toolset(tools=tuple(specs))


def _check_parameters(schema: Any, where: str) -> None:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ServeError(400, f'{where} must be a JSON Schema with "type": "object"', param=where)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        raise ServeError(400, f"{where} is not a valid JSON Schema: {e.message}", param=where) from None
    # A $ref outside the schema would be looked up when the model's arguments are validated.
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref", "#")
            if not isinstance(ref, str) or not ref.startswith("#"):
                raise ServeError(400, f"{where}: $ref must point inside the schema ('#/...'), got {ref!r}",
                                 param=where)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def chat_messages(raw: list[dict[str, Any]]) -> list[Message]:
    """OpenAI messages → dialect-neutral messages; tool results get the name of the call they answer."""
    out: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        role = m.get("role")
        role = "system" if role == "developer" else role
        if role not in ("system", "user", "assistant", "tool"):
            shown = role if isinstance(role, str) or role is None else _json_type(role)
            raise ServeError(400, f"{where}.role must be system, developer, user, assistant or "
                             f"tool, got {shown!r}", param=f"{where}.role")
        content = _text(m.get("content"), f"{where}.content")
        if role == "assistant":
            raw_calls = m.get("tool_calls") or []
            if not isinstance(raw_calls, list):
                raise ServeError(400, f"{where}.tool_calls must be an array", param=f"{where}.tool_calls")
            calls = [_call(c, f"{where}.tool_calls[{k}]") for k, c in enumerate(raw_calls)]
            names.update({c.id: c.name for c in calls if c.id})
            # A turn without calls is rendered as written (dialects may normalize re-rendered text).
            out.append(Message(role="assistant", content=content, tool_calls=calls,
                               raw=None if calls else content))
        elif role == "tool":
            call_id = _optional_str(m, "tool_call_id", where)
            name = _optional_str(m, "name", where)
            out.append(Message(role="tool", content=content, tool_call_id=call_id,
                               name=name or names.get(call_id or "")))
        else:
            out.append(Message(role=role, content=content))
    return out


def _optional_str(m: dict[str, Any], key: str, where: str) -> str | None:
    value = m.get(key)
    if value is not None and not isinstance(value, str):
        raise ServeError(400, f"{where}.{key} must be a string", param=f"{where}.{key}")
    return value


def _text(content: Any, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = []
        for k, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") == "text"):
                raise ServeError(400, f"{where}: only text content parts are supported", param=where)
            text = part.get("text", "")
            if not isinstance(text, str):
                raise ServeError(400, f"{where}[{k}].text must be a string", param=where)
            parts.append(text)
        return "".join(parts)
    raise ServeError(400, f"{where} must be a string or a list of text parts", param=where)


def _call(raw: Any, where: str) -> ToolCall:
    fn = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise ServeError(400, f"{where} needs function.name", param=where)
    call_id = raw.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise ServeError(400, f"{where}.id must be a string", param=f"{where}.id")
    args = fn.get("arguments") or {}
    if isinstance(args, str):
        at = f"{where}.function.arguments"
        args = load_json(args, at, field=at) if args.strip() else {}
    if not isinstance(args, dict):
        at = f"{where}.function.arguments"
        raise ServeError(400, f"{at} must be a JSON object", param=at)
    return ToolCall(name=fn["name"], arguments=args, id=call_id)


# ---- responses ------------------------------------------------------------------------------------


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def tool_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def openai_tool_calls(calls: list[ToolCall]) -> list[dict[str, Any]]:
    """Parsed calls as OpenAI ``tool_calls`` (arguments as a JSON string, fresh ``call_`` ids)."""
    return [{"id": tool_call_id(), "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
            for c in calls]


def logprob_entries(tokenizer, tokens, top: bool, as_ids: bool) -> list[dict[str, Any]]:
    """``logprobs.content`` entries for sampled tokens."""
    def entry(tid: int, lp: float) -> dict[str, Any]:
        text = f"token_id:{tid}" if as_ids else tokenizer.decode([tid], skip_special_tokens=False)
        return {"token": text, "logprob": lp, "bytes": list(text.encode("utf-8"))}

    out = []
    for t in tokens:
        e = entry(t.id, t.logprob)
        e["top_logprobs"] = [entry(i, lp) for i, lp in t.top] if top else []
        out.append(e)
    return out


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def chunk(cid: str, model: str, created: int, delta: dict[str, Any], finish: str | None = None,
          **extra: Any) -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``extra`` goes into the choice (``logprobs``, ``token_ids``)."""
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, **extra}
    return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [choice]}


def now() -> int:
    return int(time.time())
