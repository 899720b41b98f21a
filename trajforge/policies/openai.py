"""Policy over any OpenAI-compatible ``/v1/chat/completions`` server (vLLM, SGLang, DeepSeek API,
``trajforge serve``).

By default tools go in the request's ``tools`` field and structured ``tool_calls`` come back; with
``native_tools=False`` the dialect renders tools into the system prompt and the raw text is parsed
by the dialect (for servers started without a tool-call parser). The API key is read from the
environment variable named by ``api_key_env``; it is never stored.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import httpx

from trajforge.parse import Dialect, get_dialect
from trajforge.policies.base import Generation, TurnRequest
from trajforge.schema import Message


def openai_messages(messages: list[Message]) -> list[dict]:
    """Dialect-neutral messages → OpenAI chat messages with ``tool_calls`` and ``tool`` roles."""
    out = []
    for i, m in enumerate(messages):
        if m.role == "assistant" and m.tool_calls:
            calls = [{"id": c.id or f"call_{i}_{k}", "type": "function",
                      "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                     for k, c in enumerate(m.tool_calls)]
            out.append({"role": "assistant", "content": m.content or None, "tool_calls": calls})
        elif m.role == "tool":
            call_id = m.tool_call_id or _answered_id(messages, i)
            if call_id is None:  # feedback on a call that was never made (parse error): plain text
                out.append({"role": "user", "content": m.content})
            else:
                out.append({"role": "tool", "content": m.content, "tool_call_id": call_id})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def _answered_id(messages: list[Message], i: int) -> str | None:
    """Id of the call a tool message answers (the k-th tool message after an assistant turn
    answers its k-th call); None when there is no such call."""
    k, j = 0, i - 1
    while j >= 0 and messages[j].role == "tool":
        k, j = k + 1, j - 1
    calls = messages[j].tool_calls if j >= 0 else []
    if k >= len(calls):
        return None
    return calls[k].id or f"call_{j}_{k}"


class OpenAIPolicy:
    def __init__(self, base_url: str, model: str, name: str | None = None, dialect: Dialect | None = None,
                 native_tools: bool = True, temperature: float = 0.0, max_tokens: int = 512,
                 timeout_s: float = 120.0, batch_size: int = 16, api_key_env: str = "OPENAI_API_KEY"):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = name or f"openai:{base_url}#{model}"
        self.dialect = dialect or get_dialect("hermes")
        self.native_tools = native_tools
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        key = os.environ.get(api_key_env, "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(timeout=timeout_s, headers=headers)

    def _payload(self, req: TurnRequest) -> dict:
        body = {"model": self.model, "temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.native_tools:
            body["messages"] = openai_messages(req.messages)
            body["tools"] = req.toolset.openai()
        else:
            body["messages"] = self.dialect.to_chat(req.messages, req.toolset)
        return body

    def _one(self, req: TurnRequest) -> Generation:
        resp = self.client.post(f"{self.base_url}/chat/completions", json=self._payload(req))
        resp.raise_for_status()
        msg = resp.json()["choices"][0]["message"]
        text = msg.get("content") or ""
        if self.native_tools:
            return Generation(text=text, native_calls=msg.get("tool_calls") or [])
        return Generation(text=text)

    def act(self, requests: list[TurnRequest]) -> list[Generation]:
        with ThreadPoolExecutor(max_workers=min(8, len(requests))) as pool:
            return list(pool.map(self._one, requests))
