"""The one sequence builder: trajectories → token sequences with loss masks, for SFT, DPO and GRPO.

Two ways to turn an episode into tokens, and one rule that picks:

- **Stored tokens (the default).** A policy that tokenized its own prompts (the hf policy, a vLLM
  server returning token ids) stored each turn's ``prompt_ids`` and ``completion_ids``. Those are
  the exact tokens the model saw and sampled; training on them cannot drift from inference. A
  turn's ids are used when they decode to exactly the text the renderer produces for that turn
  now — the proof that they come from this tokenizer and chat template (data collected by another
  model, a migrated record whose ids were dropped, or an import fails it and is re-rendered).
  Consecutive turns whose prompt ids extend the previous prompt + completion are packed into one
  sequence, each completion a loss span (``pack_spans``); otherwise a new sequence starts, so a
  completion is always scored in exactly the context it was sampled in.
- **Rendering.** Segment by segment with ``Dialect.chat_text`` — the very function the hf policy
  renders its prompts with — so text the policy never tokenized (the expert, imports, another
  dialect) is trained exactly as the policy will later see it. Template text before each
  assistant turn (system prompt, user turn, tool results, the assistant header) is mask 0; the
  assistant's text plus its end-of-turn token is mask 1.

Plug-in points for the rest of the loop: ``rules`` rewrite a trajectory before it is built
(canonicalised calls, migrated records, another dialect); a rule that returns a changed
trajectory makes its stored ids void, so it is rendered. ``learn(traj, turn)`` says which
assistant turns carry loss (a recovered episode's failed turns can be masked). ``toolset_of``
maps a trajectory to the toolset it was shown (by fingerprint), so mixed pools render each
sample with its own tools. The loss mask is computed here, once, and ``collate`` is the one
batch builder every recipe uses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Protocol, Sequence

from trajforge.parse import Dialect, get_dialect
from trajforge.schema import Toolset, Trajectory

IGNORE = -100
PAD_MULTIPLE = 8
"""Batches are padded to a multiple of this many positions (tensor-core friendly shapes)."""


class Sample(NamedTuple):
    input_ids: list[int]
    loss_mask: list[int]


class TemplateError(ValueError):
    """The chat template does not extend earlier turns' text, so turns cannot be masked apart."""


class RenderRule(Protocol):
    """Rewrites a trajectory before it becomes tokens. Return the input unchanged to leave it."""

    def __call__(self, traj: Trajectory) -> Trajectory: ...


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []


def default_toolset(traj: Trajectory) -> Toolset:
    """The toolset of the trajectory's environment as registered now."""
    from trajforge.envs import env_class

    return env_class(traj.env).toolset()


@dataclass
class SequenceBuilder:
    """Builds samples for one model (tokenizer) in one dialect and render mode; see the module doc."""

    tokenizer: Any
    dialect: Dialect | None = None
    """Dialect to train in; None: each trajectory's own."""
    render_mode: str = "dialect"
    toolset_of: Callable[[Trajectory], Toolset] = default_toolset
    rules: Sequence[RenderRule] = ()
    learn: Callable[[Trajectory, int], bool] | None = None
    """Which assistant turns carry loss (None: all)."""
    stored_ids: bool = True
    """Use stored token ids where they verify (False: always render)."""
    counts: dict[str, int] = field(default_factory=dict)
    """How many trajectories were built from stored ids / rendered, and why."""

    def build(self, traj: Trajectory, only_turn: int | None = None) -> list[Sample]:
        """The trajectory's training sequences (usually one). ``only_turn``: context up to that
        assistant turn (0-based) and loss on it alone — DPO's per-turn pairs."""
        original = traj
        for rule in self.rules:
            traj = rule(traj)
        dialect = self.dialect or get_dialect(traj.dialect)
        toolset = self.toolset_of(traj)
        if self.stored_ids and traj is original and dialect.name == traj.dialect:
            spans = self._stored(traj, dialect, toolset, only_turn)
            if spans is not None:
                self._count("stored_ids")
                return spans
        self._count("rendered")
        return [self._render(traj, dialect, toolset, only_turn)]

    def _count(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def _learns(self, traj: Trajectory, turn: int, only_turn: int | None) -> bool:
        if only_turn is not None:
            return turn == only_turn
        return self.learn is None or self.learn(traj, turn)

    # ---- stored token ids ---------------------------------------------------------------------

    def _stored(self, traj, dialect, toolset, only_turn) -> list[Sample] | None:
        """Samples from the stored ids, or None when any turn's ids do not verify."""
        turns = assistant_positions(traj)
        if not traj.steps or len(traj.steps) != len(turns):
            return None
        for step, at in zip(traj.steps, turns):
            if step.prompt_ids is None or not step.completion_ids:
                return None
            expected = dialect.chat_text(self.tokenizer, traj.messages[:at], toolset, self.render_mode)
            if self.tokenizer.decode(step.prompt_ids, skip_special_tokens=False) != expected:
                return None  # another tokenizer or template: these ids are not this model's
        return self.from_ids(traj, only_turn)

    def from_ids(self, traj: Trajectory, only_turn: int | None = None, close_turns: bool = True) -> list[Sample]:
        """Samples from the stored ids as they are, unverified: for the policy's own fresh
        rollouts (GRPO), whose ids are by construction this model's. Refuses turns without ids.
        ``close_turns`` ends a completion cut at the token limit with the end-of-turn token (a
        demonstration); GRPO passes False to score only what was sampled."""
        return [sample for sample, _ in self.packed(traj, only_turn, close_turns)]

    def packed(self, traj: Trajectory, only_turn: int | None = None, close_turns: bool = True
               ) -> list[tuple[Sample, list[tuple[int, tuple[int, int]]]]]:
        """``from_ids`` with each sample's ``(turn, (start, end))`` completion spans."""
        for s in traj.steps:
            if s.prompt_ids is None or not s.completion_ids:
                raise ValueError(f"rollout {traj.task_id}#{traj.sample} step {s.index} has no token ids; "
                                 "training on exact sampled tokens needs them")
        first = 0 if only_turn is None else only_turn
        steps = traj.steps if only_turn is None else traj.steps[only_turn:only_turn + 1]
        eos = self.tokenizer.eos_token_id
        close = (lambda c: _with_eos(c, eos)) if close_turns else (lambda c: c)
        out = []
        for ids, spans in pack_spans([(list(s.prompt_ids), close(list(s.completion_ids))) for s in steps]):
            mask = [0] * len(ids)
            spans = [(first + turn, span) for turn, span in spans]
            for turn, (start, end) in spans:
                if self._learns(traj, turn, only_turn):
                    mask[start:end] = [1] * (end - start)
            out.append((Sample(ids, mask), spans))
        return out

    # ---- rendering ------------------------------------------------------------------------------

    def _render(self, traj, dialect, toolset, only_turn) -> Sample:
        messages, steps = traj.messages, traj.steps
        if dialect.name != traj.dialect:  # raw texts and sampled tokens are in the other format
            messages, steps = [m.model_copy(update={"raw": None}) for m in messages], []
        tok = self.tokenizer
        eos = tok.eos_token_id
        ids: list[int] = []
        mask: list[int] = []
        covered = ""  # template text already turned into tokens
        turn = 0
        for i, msg in enumerate(messages):
            if msg.role != "assistant":
                continue
            prefix = dialect.chat_text(tok, messages[:i], toolset, self.render_mode)
            if not prefix.startswith(covered):
                raise TemplateError(
                    f"chat template of {getattr(tok, 'name_or_path', 'tokenizer')} rewrites earlier "
                    f"turns (turn {turn} of {traj.task_id}); cannot mask assistant tokens")
            delta = _encode(tok, prefix[len(covered):])
            ids += delta
            mask += [0] * len(delta)
            step = steps[turn] if turn < len(steps) else None
            text = dialect.assistant_text(msg, tok)  # as later prompts show it (control tokens escaped)
            if step is not None and step.completion_ids and self._own_completion(step.completion_ids, text):
                completion = _with_eos(list(step.completion_ids), eos)  # sampled tokens, never re-tokenized
            else:
                completion = _encode(tok, text) + [eos]
            ids += completion
            mask += [int(self._learns(traj, turn, only_turn))] * len(completion)
            covered = prefix + text + tok.eos_token
            if turn == only_turn:
                break
            turn += 1
        return Sample(ids, mask)


    def _own_completion(self, ids, text: str) -> bool:
        """Were these sampled ids produced by this tokenizer for ``text``? (Data from another
        model decodes to something else and is re-tokenized instead.)"""
        eos = self.tokenizer.eos_token_id
        body = [t for t in ids if t != eos]
        return self.tokenizer.decode(body, skip_special_tokens=False) == text


def turn_learns(traj: Trajectory, turn: int) -> bool:
    """The mask rule, ``Trajectory.turn_learns`` (kept in the schema: exports weight turns by it too)."""
    return traj.turn_learns(turn)


def canonical_calls(traj: Trajectory) -> Trajectory:
    """Render rule: a turn whose raw text the parser had to repair (``Step.repairs``, no errors) is
    trained in the dialect's canonical call format, rendered from its parsed calls, so the model
    learns the clean form rather than the one that needed fixing. The stored raw text is left as
    it is; only this copy changes (and so is rendered, not taken from stored ids)."""
    repaired = {i for i, s in enumerate(traj.steps) if s.repairs and not s.errors and s.calls and not s.native}
    if not repaired:
        return traj
    messages, turn = [], -1
    for m in traj.messages:
        if m.role == "assistant":
            turn += 1
            if turn in repaired and m.raw is not None:
                m = m.model_copy(update={"raw": None})
        messages.append(m)
    return traj.model_copy(update={"messages": messages})


def slim_detours(traj: Trajectory) -> Trajectory:
    """Render rule (``SFTConfig.slim``): an accepted episode without its detours, so the model
    learns the direct path it eventually found. A turn goes when

    - it failed (a parse error, a tool error, or no call at all) and a later clean turn achieves
      its intent: calls the same tool (any clean later turn, when the failed one parsed to nothing);
    - or it repeats a call an earlier clean turn already made (its result is already in context).

    With the turn goes everything up to the next assistant message (its tool results, any nudge).
    The final turn always stays. Episodes with a marked mistake (self-repair demonstrations) are
    left whole: they exist to teach the recovery, and their recovery sentence answers the mistake.
    """
    if (traj.outcome is None or traj.outcome.tier not in ("success", "recovered")
            or any(s.mistake for s in traj.steps)):
        return traj

    def clean(step) -> bool:
        return bool(step.calls) and not step.errors and all(r.ok for r in step.results)

    def signature(step) -> tuple:
        return tuple((c.name, json.dumps(c.arguments, sort_keys=True, default=str)) for c in step.calls)

    drop, made = set(), set()
    last = len(traj.steps) - 1
    for i, step in enumerate(traj.steps[:last]):
        later = [s for s in traj.steps[i + 1:] if clean(s)]
        if not clean(step):
            tools = {c.name for c in step.calls}
            if any(not tools or tools & {c.name for c in s.calls} for s in later):
                drop.add(i)
        elif signature(step) in made:
            drop.add(i)
        else:
            made.add(signature(step))
    if not drop:
        return traj
    turns = assistant_positions(traj)
    gone = {j for i in drop for j in range(turns[i], turns[i + 1] if i + 1 < len(turns) else len(traj.messages))}
    return traj.model_copy(update={"messages": [m for j, m in enumerate(traj.messages) if j not in gone],
                                   "steps": [s for i, s in enumerate(traj.steps) if i not in drop]})


def assistant_positions(traj: Trajectory) -> list[int]:
    """Index in ``traj.messages`` of each assistant message (turn k ↔ ``traj.steps[k]``)."""
    return [i for i, m in enumerate(traj.messages) if m.role == "assistant"]


def _with_eos(completion: list[int], eos: int) -> list[int]:
    return completion if completion and completion[-1] == eos else completion + [eos]


def pack_spans(turns: list[tuple[list[int], list[int]]]) -> list[tuple[list[int], list[tuple[int, tuple[int, int]]]]]:
    """(prompt ids, completion ids) per turn → as few sequences as exactness allows, each with its
    ``(turn, (start, end))`` completion spans. A turn joins the previous sequence only when its
    prompt starts with that whole sequence (the chat template is prefix-stable and the sampled
    tokens re-tokenize to themselves); packing a 3-turn episode into one sequence instead of three
    costs a third of the tokens."""
    packed: list[tuple[list[int], list[tuple[int, tuple[int, int]]]]] = []
    for turn, (prompt, completion) in enumerate(turns):
        span = (turn, (len(prompt), len(prompt) + len(completion)))
        if packed and prompt[:len(packed[-1][0])] == packed[-1][0]:
            packed[-1] = (prompt + completion, packed[-1][1] + [span])
        else:
            packed.append((prompt + completion, [span]))
    return packed


def loss_tokens(sample: Sample) -> int:
    """Positions that carry loss (the first token predicts nothing: it has no predecessor)."""
    return sum(sample.loss_mask[1:])


def longest_turn(samples: Sequence[Sample]) -> int:
    """The most tokens one trained turn spans (the longest run of loss positions): what a policy
    acting with the adapter must be allowed to generate in a turn (``HFPolicy``'s default)."""
    # The runs split at bytes: a C-speed pass over every token of a pool (millions for a 7B job's
    # data), where a Python loop over them would add minutes before the first step.
    return max((len(run) for s in samples for run in bytes(s.loss_mask).split(b"\0")), default=0)


def collate(samples: Sequence[Sample], pad_id: int, device=None, multiple: int = PAD_MULTIPLE) -> dict[str, Any]:
    """Right-padded ``input_ids`` / ``attention_mask`` / ``labels`` (IGNORE off the loss mask),
    width rounded up to ``multiple``. ``device``: where to build them (a data loader prepared by
    accelerate moves CPU batches itself; direct callers pass the model's device)."""
    import torch

    longest = max(len(s.input_ids) for s in samples)
    width = -(-longest // multiple) * multiple if multiple > 1 else longest
    ids, att, labels = [], [], []
    for s in samples:
        gap = width - len(s.input_ids)
        ids.append(list(s.input_ids) + [pad_id] * gap)
        att.append([1] * len(s.input_ids) + [0] * gap)
        labels.append([t if m else IGNORE for t, m in zip(s.input_ids, s.loss_mask)] + [IGNORE] * gap)
    return {"input_ids": torch.tensor(ids, device=device), "attention_mask": torch.tensor(att, device=device),
            "labels": torch.tensor(labels, device=device)}


class LengthReport(NamedTuple):
    kept: list[int]
    """Indices of the samples within the limit."""
    too_long: list[int]
    """Indices skipped for length (never cut mid-conversation)."""


def within(samples: Sequence[Sample], max_len: int) -> LengthReport:
    keep = [i for i, s in enumerate(samples) if len(s.input_ids) <= max_len]
    return LengthReport(keep, [i for i, s in enumerate(samples) if len(s.input_ids) > max_len])


def completion_tokens(traj: Trajectory) -> int:
    """Tokens the policy generated in an episode (its turns' stored completion ids)."""
    return sum(len(s.completion_ids or ()) for s in traj.steps)
