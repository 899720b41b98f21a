"""Trajectory data: messages, steps, parse errors and repairs, verdicts, outcomes and rewards.

Everything a replay, a grader, a trainer or a report needs is stored here; nothing is recomputed
from text later with a different parser.

How a trajectory is stored (``schema/records.py``): every record carries its ``format`` and the
``trajforge_version`` that wrote it; an older record is upgraded when it is read, a newer one is
refused (``NewerFormatError``). In memory a trajectory holds its whole conversation
(``messages``) and its turns (``steps``); on disk each fact is written once: an assistant message
or a tool result that repeats its step's text, calls or result is stored as a reference to it.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trajforge._version import __version__
from trajforge.schema import records
from trajforge.schema.tools import ToolCall

Role = Literal["system", "user", "assistant", "tool"]
ErrorKind = Literal["no_call", "malformed", "unknown_tool", "invalid_args", "truncated"]
OutcomeTier = Literal["success", "recovered", "failed", "env_fault"]


class Message(BaseModel):
    """One conversation message in dialect-neutral form."""

    role: Role
    """Who speaks."""
    content: str = ""
    """Text content (for assistant turns: the text around the calls)."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Calls made in an assistant turn."""
    name: str | None = None
    """Tool name, for role=tool."""
    tool_call_id: str | None = None
    """Id of the call this tool message answers."""
    raw: str | None = None
    """Assistant text exactly as generated; history is rendered from it so the model sees (and
    training replays) its own tokens, not a re-serialization of the parsed calls."""
    role_name: str | None = None
    """Pipeline role that produced or received this message (multi-agent runs); None otherwise."""


class CallError(BaseModel):
    """A typed problem with a model's tool call; its message goes back to the model."""

    kind: ErrorKind
    """Error class; also the grader's fail_reason source."""
    message: str
    """Short model-facing message."""
    tool: str | None = None
    """Tool name involved, if known."""

    @property
    def feedback(self) -> str:
        """The tool message the model sees for this error (the harness feeds it back)."""
        return f"Error ({self.kind}): {self.message}"


class Repair(BaseModel):
    """A tolerated deviation the parser fixed (so metrics can separate strict validity)."""

    kind: str
    """e.g. ``json_repair``, ``coerce_type``, ``unclosed_tag``."""
    detail: str = ""
    """What was changed."""


class ToolResult(BaseModel):
    """What executing one call returned."""

    name: str
    """Tool name."""
    content: str
    """Text fed back to the model."""
    ok: bool = True
    """False when the tool reported an error (bad SQL, unknown table...)."""
    error: str | None = None
    """Error class when not ok (``sql_error``, ``timeout``, ``env_fault``)."""
    fault: bool = False
    """True for infrastructure faults (crashed tool), never the model's doing."""
    elapsed_s: float = 0.0
    """Wall time of the call."""


class Fault(BaseModel):
    """One infrastructure failure met during an episode: a server error, a timeout, a crashed tool.

    Faults are recorded whether or not a retry then succeeded, so reports can count them; an
    episode that ends because of one is ``end="env_fault"`` and is never used as a negative."""

    kind: str
    """``http_429``, ``http_503``, ``connection``, ``request_timeout``, ``bad_response``,
    ``tool_crash``, ``tool_timeout``, ``env_start``, ``env_timeout`` or ``episode_timeout``."""
    message: str = ""
    """What went wrong, as reported by the failing part."""
    attempt: int = 0
    """Which attempt failed (0 is the first try)."""
    elapsed_s: float = 0.0
    """Seconds the failed attempt took."""
    step: int | None = None
    """Turn during which it happened (None: before the first turn or at the end)."""
    retried: bool = False
    """Whether another attempt followed (False: it ended the episode or was not retryable)."""


class SamplingConfig(BaseModel):
    """Sampling settings of a policy; part of an episode's idempotency key."""

    model_config = ConfigDict(frozen=True)

    temperature: float = 0.0
    """Softmax temperature (0: greedy)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_tokens: int | None = None
    """Completion token cap (None: the policy's own default)."""
    seed: int | None = None
    """Sampling seed, where the backend takes one."""


class Step(BaseModel):
    """One assistant turn and everything that followed from it."""

    index: int
    """Turn number, from 0."""
    raw: str
    """Raw model text exactly as generated."""
    calls: list[ToolCall] = Field(default_factory=list)
    """Valid calls parsed from the text (dispatched)."""
    errors: list[CallError] = Field(default_factory=list)
    """Parse/validation errors (those calls were not dispatched)."""
    repairs: list[Repair] = Field(default_factory=list)
    """Repairs the tolerant parser applied."""
    results: list[ToolResult] = Field(default_factory=list)
    """One result per dispatched call."""
    prompt_ids: list[int] | None = None
    """Token ids of the prompt the model saw, when the policy exposes them."""
    completion_ids: list[int] | None = None
    """Token ids the model sampled (loss mask 1 in training)."""
    gen_s: float = 0.0
    """Generation wall time (batch time shared by the batch)."""
    tool_s: float = 0.0
    """Tool execution wall time."""
    retries: int = 0
    """Model requests retried for this turn after transient server errors (see Trajectory.faults)."""
    completion_logprobs: list[float] | None = None
    """Log-probability of each completion token under the sampling model, where the backend
    returns them (vLLM/SGLang/``trajforge serve``); aligned with ``completion_ids``."""
    role_name: str | None = None
    """Pipeline role that took this turn (multi-agent runs); None otherwise."""
    native: bool = False
    """The calls came back structured (OpenAI ``tool_calls``), not inside ``raw``: the history
    renders this turn from its calls (the assistant message's ``raw`` is None)."""
    mistake: str | None = None
    """The kind of mistake this turn made on purpose (``wrong_column``, ``malformed``, ...): a
    self-repair demonstration's mistaken turn (``tasks/repair.py``), executed like any other turn
    and never trained on (loss mask 0); None for a turn that meant what it did."""
    train: bool | None = None
    """Whether this turn carries loss in training, overriding the mask rule
    (``Trajectory.turn_learns``); None: the rule decides."""


class Verdict(BaseModel):
    """What the environment concludes about an episode (``Environment.verify``)."""

    submitted: bool = False
    """Whether the agent submitted a final answer."""
    answer: Any = None
    """The submitted answer."""
    correct: bool = False
    """Whether the answer matches the task's expected answer."""
    milestones: list[str] = Field(default_factory=list)
    """Process milestones reached, in order."""
    detail: str = ""
    """Human-readable explanation."""

    def __getitem__(self, key: str) -> Any:
        """``verdict["correct"]``: the dict access of records before format 2 (deprecated)."""
        warnings.warn("Trajectory.verdict is a Verdict now: use verdict.correct, not verdict['correct']",
                      DeprecationWarning, stacklevel=2)
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        """``verdict.get("answer")``: the dict access of records before format 2 (deprecated)."""
        warnings.warn("Trajectory.verdict is a Verdict now: use its attributes, not .get()",
                      DeprecationWarning, stacklevel=2)
        return getattr(self, key, default)


class Outcome(BaseModel):
    """The grade of a finished episode (``trajforge.grade``); what the environment concluded is the
    trajectory's ``verdict``, stored there once."""

    tier: OutcomeTier
    """success / recovered / failed / env_fault."""
    fail_reason: str | None = None
    """Why it failed: a parse error kind (no_call, malformed, truncated, unknown_tool,
    invalid_args), a tool error kind (sql_error, ...), wrong_answer, max_turns, ..."""
    failed_role: str | None = None
    """Pipeline role whose turn caused the failure, when the trajectory has role tags."""
    guessed: bool = False
    """Accepted, but no tool result the agent saw held the answer (the environment's ``grounded``
    hook said so): a lucky guess. It still counts as completed; it is not a recovery, not a
    positive for training and not kept by RFT."""

    @property
    def correct(self) -> bool:
        """The verifier accepted the episode and no infrastructure fault spoiled it."""
        return self.tier in ("success", "recovered")

    @property
    def positive(self) -> bool:
        """Correct and not guessed: an episode worth learning from (``grade.pools``)."""
        return self.correct and not self.guessed


class RewardBreakdown(BaseModel):
    """R = l1*completion + l2*step + l3*efficiency - l4*violation, every component kept."""

    completion: float
    step: float
    efficiency: float
    violation: float
    weights: tuple[float, float, float, float]
    total: float
    milestone_bonus: float | None = None
    """Step component per milestone this reward used (None in stores written before it was kept)."""
    rule: str | None = None
    """Which ``RewardConfig`` rule chose the weights and bonus: ``default``, or its ``per`` key
    (``sql``, ``sql/hard``, ``*/hard``); None in stores written before it was kept."""


class Rescue(BaseModel):
    """Guided exploration rewound a failing episode to its last good step and resampled."""

    at_turn: int
    """Turn index (0-based) whose failure triggered the rescue."""
    restored_to: int
    """Number of steps kept: the episode resumed after this many."""
    temperature: float
    """Sampling temperature used from the rescue on."""
    discarded: list[Step] = Field(default_factory=list)
    """The failing steps that were rolled back (kept for analysis, not part of ``steps``)."""


class Trajectory(records.StoredRecord):
    """One episode of one policy on one task (stored as one JSON line; see the module docstring)."""

    task_id: str
    """Task this episode attempted."""
    sample: int = 0
    """Sample index when a task is attempted several times."""
    policy: str
    """Policy id (its name)."""
    env: str
    """Environment name."""
    toolset_fingerprint: str
    """Fingerprint of the toolset shown to the model."""
    dialect: str
    """Tool-call dialect used to render and parse."""
    tier: str = ""
    """Task tier, copied for queries."""
    split: str = ""
    """Task split, copied for queries."""
    messages: list[Message] = Field(default_factory=list)
    """The whole conversation, dialect-neutral."""
    steps: list[Step] = Field(default_factory=list)
    """Assistant turns with parse and execution details."""
    outcome: Outcome | None = None
    """Grade (set by grade/)."""
    reward: RewardBreakdown | None = None
    """Reward components (set by grade/)."""
    verdict: Verdict | None = None
    """What the environment concluded (None: the episode never reached ``verify``)."""
    reference_turns: int = 0
    """Turns the verified reference solution needs (for the efficiency reward)."""
    end: str = ""
    """Why the loop stopped: submitted, max_turns, max_errors, repeated, context_exceeded, env_fault."""
    wall_s: float = 0.0
    """Episode wall time."""
    executed: bool = True
    """False for imported conversations that were never run here."""
    faults: list[Fault] = Field(default_factory=list)
    """Infrastructure faults met on the way, retried or not (empty for a clean episode)."""
    sampling: SamplingConfig | None = None
    """Sampling settings the episode ran with; None in stores written before they were recorded."""
    rescues: list[Rescue] = Field(default_factory=list)
    """Guided-exploration rewinds, in order (empty when exploration was off or not needed)."""
    format: int = records.FORMAT
    """Record format version (older records are upgraded when read)."""
    trajforge_version: str = __version__
    """trajforge version that wrote the record ("" when it predates the field)."""

    def turn_learns(self, turn: int) -> bool:
        """The mask rule: whether assistant turn ``turn`` carries loss when this episode is a
        demonstration (training's loss mask, an export's ``weight``).

        A turn marked ``Step.train`` is what it says. Otherwise a marked mistake (``Step.mistake``,
        a self-repair demonstration's) never does, nor, in a ``recovered`` episode, a turn with a
        parse or tool error: the episode teaches its recovery, never the failed turn. Every other
        turn does (a failed episode used as a DPO rejected keeps its errors: they are what is
        rejected)."""
        if turn >= len(self.steps):
            return True
        step = self.steps[turn]
        if step.train is not None:
            return step.train
        if step.mistake:
            return False
        recovered = self.outcome is not None and self.outcome.tier == "recovered"
        return not (recovered and (step.errors or any(not r.ok for r in step.results)))

    # Reading upgrades older formats, refuses newer ones and expands references into messages;
    # the JSON form is stamped and writes each fact of a step once.
    reader = staticmethod(records.read_trajectory)
    writer = staticmethod(records.write_trajectory)
