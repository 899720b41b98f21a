"""Policy protocol: who acts. A policy turns a batch of turn requests into assistant texts."""

from __future__ import annotations

from typing import NamedTuple, Protocol

from trajforge.parse import Dialect
from trajforge.schema import Message, Task, Toolset


class TurnRequest(NamedTuple):
    """One episode waiting for its next assistant turn."""

    task: Task
    messages: list[Message]
    toolset: Toolset
    turn: int
    temperature: float | None = None
    """Per-request sampling temperature (guided exploration lowers it); None: the policy's own."""
    sample: int = 0
    """Which sample of the task this episode is (several per task: ``collect --samples``)."""


class Generation(NamedTuple):
    """One assistant turn as produced; token ids where the policy exposes them."""

    text: str
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    native_calls: list | None = None
    """Structured calls when the backend returned them natively (OpenAI ``tool_calls``)."""
    finish_reason: str | None = None
    """Why generation stopped, where the backend says (OpenAI ``finish_reason``; ``length``: cut
    by the token limit, so an unfinished native call is ``truncated``)."""
    completion_logprobs: list[float] | None = None
    """Log-probability of each sampled token, where the backend returns them (aligned with
    ``completion_ids``)."""
    mistake: str | None = None
    """The kind of mistake this turn makes on purpose (the repair policy's demonstrations); the
    harness stores it as ``Step.mistake``."""


class RequestFault(Exception):
    """A model request failed because of the infrastructure (server, network, deadline), never
    because of what the model wrote; the harness retries it when ``retryable``."""

    def __init__(self, kind: str, message: str, retryable: bool, retry_after_s: float | None = None):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        """``http_<status>``, ``connection``, ``request_timeout`` or ``bad_response``."""
        self.message = message
        self.retryable = retryable
        """True for 429, 5xx, connection reset/refused and timeouts."""
        self.retry_after_s = retry_after_s
        """The server's ``Retry-After``, when it sent one."""


class ContextExceeded(Exception):
    """The server refused a prompt past the model's context, and the prompt holds the model's own
    turns (its replies, the tool results it asked for): the conversation the model built outgrew
    the context. The model's failure, never an infrastructure fault; the harness ends the episode
    ``context_exceeded``. A first prompt that does not fit (the task, the instructions, a
    ``max_tokens`` too large) is the setup's, and stays a ``RequestFault``."""


class Policy(Protocol):
    name: str
    dialect: Dialect
    batch_size: int

    def act(self, requests: list[TurnRequest]) -> list[Generation]: ...
