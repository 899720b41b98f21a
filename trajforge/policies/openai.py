"""Policy over any OpenAI-compatible ``/v1/chat/completions`` server (vLLM, SGLang, DeepSeek API,
``trajforge serve``).

By default the policy speaks the ``openai`` dialect: tools go in the request's ``tools`` field and
structured ``tool_calls`` come back (parsed, repaired and typed like any dialect's calls; a call
cut by ``finish_reason: length`` is ``truncated``). With a text dialect (``dialect=``, or
``native_tools=False`` for the model's own, ``Dialect.for_model(model)``) that dialect renders the
tools into the system prompt and parses the raw text (servers started without a tool-call
parser). The API key is read from the environment variable named by ``api_key_env``; it is never
stored.

``act`` serves the batched loop (a thread per request); ``act_one`` is the async path the
collection harness uses, one episode's turn at a time, over one ``httpx.AsyncClient`` per event
loop. It turns every failure into a ``RequestFault`` that says whether a retry can help (429, 5xx,
connection reset/refused, timeouts) or not (other 4xx, a body that is not a chat completion).
Both paths raise ``ContextExceeded`` instead when the server refuses a prompt past the model's
context after the first turn: the model's own turns made it that long (``CONTEXT_ERRORS``).
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
from concurrent.futures import ThreadPoolExecutor

import httpx

from trajforge.parse import Dialect, get_dialect
from trajforge.policies.base import ContextExceeded, Generation, RequestFault, TurnRequest


POOL_SHARDS = 16
"""Async HTTP clients per policy and event loop (see ``OpenAIPolicy._async_client``)."""

CONTEXT_ERRORS = ("context_length_exceeded", "context length", "context size", "context window",
                  "maximum model length", "prompt is too long")
"""How servers say, in a 400's body (lower-cased), that the prompt is past the model's context:
OpenAI's code ``context_length_exceeded`` (also ``trajforge serve``'s), vLLM's and DeepSeek's
"maximum context length is N tokens", vLLM's "longer than the maximum model length", SGLang's
"longer than the model's context length", llama.cpp's "exceeds the available context size"."""


class OpenAIPolicy:
    def __init__(self, base_url: str | list[str], model: str, name: str | None = None, dialect: Dialect | None = None,
                 native_tools: bool | None = None, temperature: float = 0.0, max_tokens: int = 512,
                 timeout_s: float = 120.0, batch_size: int = 16, api_key_env: str = "OPENAI_API_KEY",
                 token_ids: bool = False):
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            raise ValueError("OpenAIPolicy needs at least one server URL")
        self.base_urls = [u.rstrip("/") for u in urls]
        """Servers the requests are spread over; an episode keeps its server for every turn, so
        the server's prefix cache holds its conversation."""
        self.base_url = self.base_urls[0]
        self.model = model
        self.name = name or f"openai:{urls[0]}#{model}"
        if dialect is None:
            dialect = get_dialect("openai") if native_tools is not False else Dialect.for_model(model)
        if native_tools is not None and native_tools != (dialect.name == "openai"):
            raise ValueError(f"native_tools={native_tools} contradicts dialect {dialect.name!r}: native "
                             "tool calls are the openai dialect; any other dialect parses raw text")
        self.dialect = dialect
        self.native_tools = dialect.name == "openai"
        """Structured ``tools``/``tool_calls`` (the openai dialect) rather than rendered text."""
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.token_ids = token_ids
        """Ask for prompt/completion token ids and log-probs (vLLM's ``return_token_ids`` and
        ``logprobs``); servers that ignore the fields just return none."""
        key = os.environ.get(api_key_env, "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(timeout=timeout_s, headers=headers, verify=_ssl_context())
        self.timeout_s = timeout_s
        self._headers = headers
        self._aclients: list[httpx.AsyncClient | None] = []
        self._aloop: asyncio.AbstractEventLoop | None = None

    def _payload(self, req: TurnRequest) -> dict:
        temperature = self.temperature if req.temperature is None else req.temperature
        body = {"model": self.model, "temperature": temperature, "max_tokens": self.max_tokens}
        body["messages"] = self.dialect.to_chat(req.messages, req.toolset)
        if self.native_tools:
            body["tools"] = req.toolset.openai()
        if self.token_ids:
            body.update(logprobs=True, return_token_ids=True)
        return body

    def server_for(self, req: TurnRequest) -> str:
        """The server a task's requests go to: the same for every turn and sample of a task, so a
        group of rollouts shares one server's prefix cache."""
        if len(self.base_urls) == 1:
            return self.base_url
        return self.base_urls[_stable_hash(req.task.id) % len(self.base_urls)]

    def _one(self, req: TurnRequest) -> Generation:
        resp = self.client.post(f"{self.server_for(req)}/chat/completions", json=self._payload(req))
        _check_context(req, resp)
        resp.raise_for_status()
        return self._generation(resp.json())

    def _generation(self, data: dict) -> Generation:
        choice = data["choices"][0]
        msg = choice["message"]
        text = msg.get("content") or ""
        tokens = _token_fields(data, choice)
        if self.native_tools:
            return Generation(text=text, native_calls=msg.get("tool_calls") or [],
                              finish_reason=choice.get("finish_reason"), **tokens)
        return Generation(text=text, **tokens)

    def _async_client(self, key: str) -> httpx.AsyncClient:
        """The client for episodes keyed ``key``: ``POOL_SHARDS`` clients per event loop (a client
        is bound to the loop that opened its connections), no connection cap (the harness bounds
        concurrency itself).

        Why shards: httpx's pool scans every connection it holds on each request, so one pool
        serving 128 concurrent episodes spent more CPU scanning than sending (profiled: ~60% of
        the process); a task keeps its shard, so its turns reuse one kept-alive connection."""
        loop = asyncio.get_running_loop()
        if self._aloop is not loop:
            self._aclients, self._aloop = [None] * POOL_SHARDS, loop
        i = hash(key) % POOL_SHARDS
        client = self._aclients[i]
        if client is None:
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=512)
            client = self._aclients[i] = httpx.AsyncClient(
                timeout=self.timeout_s, headers=self._headers, limits=limits, verify=_ssl_context())
        return client

    async def act_one(self, req: TurnRequest, timeout_s: float | None = None) -> Generation:
        """One turn of one episode; ``timeout_s`` bounds the whole request (default: the policy's).

        Raises ``RequestFault``; never retries (retrying is the harness's decision)."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        client = self._async_client(req.task.id)
        try:
            async with asyncio.timeout(timeout_s):  # httpx's own timeouts are per phase, not total
                resp = await client.post(f"{self.server_for(req)}/chat/completions", json=self._payload(req),
                                         timeout=timeout_s)
        except (TimeoutError, httpx.TimeoutException) as e:
            raise RequestFault("request_timeout", f"no complete answer within {timeout_s:g}s "
                               f"({type(e).__name__})", retryable=True) from None
        except (httpx.NetworkError, httpx.RemoteProtocolError) as e:
            raise RequestFault("connection", f"{type(e).__name__}: {e}", retryable=True) from None
        except httpx.TransportError as e:  # bad URL, unsupported protocol: retrying cannot help
            raise RequestFault("connection", f"{type(e).__name__}: {e}", retryable=False) from None
        if resp.status_code != 200:
            _check_context(req, resp)
            transient = resp.status_code == 429 or resp.status_code >= 500
            raise RequestFault(f"http_{resp.status_code}", resp.text[:300], retryable=transient,
                               retry_after_s=_retry_after(resp))
        try:
            return self._generation(resp.json())
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise RequestFault("bad_response", f"not a chat completion ({type(e).__name__}: {e}): "
                               f"{resp.text[:200]!r}", retryable=False) from None

    async def aclose(self) -> None:
        """Close the async client of the running loop (the harness calls it when a run ends)."""
        if self._aloop is asyncio.get_running_loop():
            for client in self._aclients:
                if client is not None:
                    await client.aclose()
        self._aclients, self._aloop = [], None

    def act(self, requests: list[TurnRequest]) -> list[Generation]:
        with ThreadPoolExecutor(max_workers=min(8, len(requests))) as pool:
            return list(pool.map(self._one, requests))


def _check_context(req: TurnRequest, resp: httpx.Response) -> None:
    """Raise ``ContextExceeded`` when ``resp`` refuses the prompt for being past the context and
    the prompt holds the model's turns; at the first turn the model wrote nothing yet, so the
    refusal stays the caller's ``RequestFault`` (or ``HTTPStatusError``)."""
    if resp.status_code == 400 and req.turn > 0:
        body = resp.text[:2000].lower()
        if any(marker in body for marker in CONTEXT_ERRORS):
            raise ContextExceeded(resp.text[:300])


def _token_fields(data: dict, choice: dict) -> dict:
    """Token ids and log-probs in vLLM's response shape, None where the server sent none.

    vLLM with ``return_token_ids`` puts ``prompt_token_ids`` at the top level and ``token_ids`` in
    the choice; ``logprobs`` adds ``choice.logprobs.content[i].logprob``, one per sampled token
    (``trajforge serve`` answers the same way)."""
    content = (choice.get("logprobs") or {}).get("content")
    return {"prompt_ids": data.get("prompt_token_ids") or None,
            "completion_ids": choice.get("token_ids") or None,
            "completion_logprobs": [float(e["logprob"]) for e in content] if content else None}


def _stable_hash(key: str) -> int:
    """A hash that is the same in every process (Python's ``hash`` of a str is salted per run)."""
    import zlib

    return zlib.crc32(key.encode())


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every client of the process: loading the CA bundle takes ~0.15 s, which
    httpx would otherwise pay for each new client (each policy, each event loop)."""
    return httpx.create_ssl_context()


def _retry_after(resp: httpx.Response) -> float | None:
    """Seconds from a numeric ``Retry-After`` header (HTTP dates are rare from model servers)."""
    try:
        return max(0.0, float(resp.headers["retry-after"]))
    except (KeyError, ValueError):
        return None
