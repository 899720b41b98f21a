"""The task-writing LLM: where it lives (``LLMConfig``) and a minimal chat client with retries.

The policies' OpenAI client lives above ``tasks`` (in ``policies/``), so synthesis keeps its own:
one ``/chat/completions`` request per proposal, transient failures (connection errors, 429, 5xx)
retried with exponential backoff (a numeric ``Retry-After`` wins, up to 30 s), a refusal (4xx)
fatal at once, an unreachable server fatal after its retries (a reply past ``timeout_s`` is not:
the server is there, that generation was slow).
"""

from __future__ import annotations

import os
import time

import httpx
from pydantic import BaseModel, Field

from trajforge.tasks.dedup import DEFAULT_THRESHOLD


class LLMConfig(BaseModel):
    """Where the task-writing LLM lives and how synthesis uses it."""

    url: str
    """Base URL of an OpenAI-compatible API (``http://127.0.0.1:8000/v1``)."""
    model: str
    """Model name sent with every request."""
    temperature: float = 0.8
    """Sampling temperature; some diversity is the point of synthesis."""
    seed: int = 0
    """Request ``i`` is sent with ``seed + i`` (servers that honour it make runs repeatable)."""
    max_tokens: int = 1024
    """Completion budget per proposal."""
    max_requests: int | None = None
    """Upper bound on requests; None means three per wanted task."""
    retries: int = 3
    """Extra tries for a transient failure (connection error, 429, 5xx)."""
    backoff_s: float = 1.0
    """First retry delay; doubles each try (a numeric ``Retry-After`` wins, up to 30 s)."""
    max_failures_in_row: int = 3
    """Requests in a row that fail even after retries before synthesis gives up."""
    concurrency: int = Field(4, ge=1)
    """Requests in flight at once (servers such as vLLM batch them)."""
    timeout_s: float = 120.0
    """Per-request HTTP timeout."""
    examples: int = 3
    """Verified example tasks shown per request."""
    similarity: float = Field(DEFAULT_THRESHOLD, gt=0, le=1)
    """Token-set Jaccard at or above which a prompt is a near-duplicate (see ``tasks/dedup.py``)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key, if the server wants one (never stored)."""


class ChatFailure(Exception):
    """One request failed for good; ``fatal`` when further requests are pointless."""

    def __init__(self, detail: str, fatal: bool):
        super().__init__(detail)
        self.detail = detail
        self.fatal = fatal


class ChatClient:
    """Minimal ``/chat/completions`` client with retries (the policies' client lives above tasks)."""

    def __init__(self, cfg: LLMConfig):
        self.cfg = cfg
        self.endpoint = cfg.url.rstrip("/") + "/chat/completions"
        key = os.environ.get(cfg.api_key_env, "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = httpx.Client(timeout=cfg.timeout_s, headers=headers)
        self.requests = 0
        """HTTP requests sent, retries included."""
        self._retry_after: str | None = None

    def close(self) -> None:
        self.http.close()

    def complete(self, messages: list[dict], seed: int) -> str:
        body = {"model": self.cfg.model, "messages": messages, "temperature": self.cfg.temperature,
                "max_tokens": self.cfg.max_tokens, "seed": seed}
        problem = ""
        for attempt in range(self.cfg.retries + 1):
            if attempt:
                time.sleep(self._delay(attempt))
            self.requests += 1
            try:
                resp = self.http.post(self.endpoint, json=body)
            except httpx.TransportError as e:
                # A read timeout is a slow reply (a long generation), not an absent server: it is
                # not fatal, so one slow proposal doesn't end the run.
                slow = isinstance(e, httpx.TimeoutException) and not isinstance(e, httpx.ConnectTimeout)
                problem = (f"no reply from {self.endpoint} within {self.cfg.timeout_s} s" if slow
                           else f"cannot reach {self.endpoint}: {type(e).__name__}: {e}")
                self._retry_after = None
                continue
            if resp.status_code == 429 or resp.status_code >= 500:
                problem = f"{self.endpoint} answered HTTP {resp.status_code}: {resp.text[:200]}"
                self._retry_after = resp.headers.get("Retry-After")
                continue
            if resp.status_code >= 400:
                raise ChatFailure(f"{self.endpoint} refused the request with HTTP "
                                  f"{resp.status_code}: {resp.text[:300]}", fatal=True)
            try:
                content = resp.json()["choices"][0]["message"]["content"]
            except (ValueError, KeyError, IndexError, TypeError):
                raise ChatFailure(f"malformed response (no choices[0].message.content): "
                                  f"{resp.text[:200]}", fatal=False) from None
            return content if isinstance(content, str) else ""
        fatal = problem.startswith("cannot reach")
        raise ChatFailure(f"{problem} (after {self.cfg.retries + 1} tries)", fatal=fatal)

    def _delay(self, attempt: int) -> float:
        if self._retry_after and self._retry_after.strip().isdigit():
            return min(float(self._retry_after), 30.0)
        return self.cfg.backoff_s * 2 ** (attempt - 1)


__all__ = ["ChatClient", "ChatFailure", "LLMConfig"]
