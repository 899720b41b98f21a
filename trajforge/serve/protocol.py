"""The OpenAI chat-completions wire format, as ``trajforge serve`` reads and writes it.

Requests are validated into ``ChatRequest`` (unknown fields are ignored, as OpenAI clients send
many); OpenAI messages become dialect-neutral ``Message``s; responses and stream chunks are built
here, with vLLM's extensions for token-level training data: ``return_token_ids`` adds
``prompt_token_ids`` (top level; first chunk when streaming) and ``choices[].token_ids``, and
``logprobs`` adds ``choices[].logprobs.content[]`` entries, one per sampled token.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trajforge.schema import Message, ToolCall


class ServeError(Exception):
    """A request the server refuses; ``body()`` is the OpenAI-style error object."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param,
                          "code": self.code or self.status}}


class ChatRequest(BaseModel):
    """The fields of ``POST /v1/chat/completions`` this server acts on."""

    model_config = ConfigDict(extra="ignore")

    model: str
    """Served model name: the base model or an adapter."""
    messages: list[dict[str, Any]] = Field(min_length=1)
    """OpenAI chat messages."""
    tools: list[dict[str, Any]] | None = None
    """OpenAI function tools; rendered into the prompt by the model's dialect."""
    tool_choice: str | dict[str, Any] | None = None
    """auto (default with tools), none, required, or one named function."""
    temperature: float | None = Field(None, ge=0, le=2)
    """0 is greedy; unset is 1, as OpenAI's default."""
    top_p: float | None = Field(None, gt=0, le=1)
    """Nucleus sampling mass; unset is 1."""
    max_tokens: int | None = Field(None, ge=1)
    """Most completion tokens (``max_completion_tokens`` is read too)."""
    max_completion_tokens: int | None = Field(None, ge=1)
    """Newer name of ``max_tokens``."""
    seed: int | None = None
    """Sampling seed."""
    stop: str | list[str] | None = None
    """Strings that end the completion (not included in it)."""
    n: int | None = Field(None, ge=1, le=1)
    """Only one choice per request."""
    stream: bool | None = False
    """Answer as server-sent events."""
    stream_options: dict[str, Any] | None = None
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
        raise ServeError(400, "request body must be a JSON object")
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ServeError(400, f"{where}: {first['msg']}", param=where) from None


def chat_messages(raw: list[dict[str, Any]]) -> list[Message]:
    """OpenAI messages → dialect-neutral messages; tool results get the name of the call they answer."""
    out: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(raw):
        role = m.get("role") if isinstance(m, dict) else None
        role = "system" if role == "developer" else role
        if role not in ("system", "user", "assistant", "tool"):
            raise ServeError(400, f"messages[{i}].role must be system, developer, user, assistant or "
                             f"tool, got {role!r}", param=f"messages[{i}].role")
        content = _text(m.get("content"), f"messages[{i}].content")
        if role == "assistant":
            calls = [_call(c, f"messages[{i}].tool_calls[{k}]") for k, c in enumerate(m.get("tool_calls") or [])]
            names.update({c.id: c.name for c in calls if c.id})
            # A turn without calls is rendered as written (dialects may normalize re-rendered text).
            out.append(Message(role="assistant", content=content, tool_calls=calls,
                               raw=None if calls else content))
        elif role == "tool":
            call_id = m.get("tool_call_id")
            out.append(Message(role="tool", content=content, tool_call_id=call_id,
                               name=m.get("name") or names.get(call_id)))
        else:
            out.append(Message(role=role, content=content))
    return out


def _text(content: Any, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text"):
                raise ServeError(400, f"{where}: only text content parts are supported", param=where)
            parts.append(str(part.get("text", "")))
        return "".join(parts)
    raise ServeError(400, f"{where} must be a string or a list of text parts", param=where)


def _call(raw: Any, where: str) -> ToolCall:
    fn = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise ServeError(400, f"{where} needs function.name", param=where)
    args = fn.get("arguments") or {}
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as e:
            raise ServeError(400, f"{where}.function.arguments is not JSON: {e}", param=where) from None
    if not isinstance(args, dict):
        raise ServeError(400, f"{where}.function.arguments must be a JSON object", param=where)
    return ToolCall(name=fn["name"], arguments=args, id=raw.get("id"))


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
