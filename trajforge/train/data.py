"""Token-level rendering of trajectories for training, with assistant-only loss masks.

A sample is rendered segment by segment with the same dialect and chat template the policy uses
at inference: for each assistant turn, the text the chat template adds before it (system prompt,
user turn, tool results, the ``assistant`` header) is a mask-0 segment, and the assistant's own
text plus its end-of-turn token is a mask-1 segment. Tool results and prompts therefore never
carry loss. Where the policy recorded the exact sampled token ids, those are used instead of
re-tokenizing the text. The prompt text comes from ``Dialect.chat_text``, the very function the hf
policy renders its prompts with (``render_mode`` included), so the two cannot drift.
"""

from __future__ import annotations

from typing import NamedTuple

from trajforge.parse import Dialect, get_dialect
from trajforge.schema import Toolset, Trajectory


class Sample(NamedTuple):
    input_ids: list[int]
    loss_mask: list[int]


class TemplateError(ValueError):
    """The chat template does not extend earlier turns' text, so turns cannot be masked apart."""


def training_dialect(trajs: list[Trajectory], model: str, tokenizer, name: str | None = None) -> Dialect:
    """The one dialect a model is trained in (and its adapter then acts in): ``name`` when given;
    else the text dialect all the trajectories were collected in (their raw texts and sampled
    tokens are then learned verbatim); else the model's own (``Dialect.for_model``)."""
    if name:
        return get_dialect(name)
    names = {t.dialect for t in trajs}
    if len(names) == 1 and (only := names.pop()) != "openai":
        return get_dialect(only)
    return Dialect.for_model(model, getattr(tokenizer, "chat_template", None))


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []


def render_sample(traj: Trajectory, tokenizer, toolset: Toolset, dialect: Dialect | None = None,
                  only_turn: int | None = None, render_mode: str = "dialect") -> Sample:
    """Render one trajectory into (input_ids, loss_mask).

    ``only_turn``: render up to that assistant turn (0-based) and put loss on it alone; earlier
    turns become context. Per-turn DPO pairs are rendered this way. ``render_mode`` as for the hf
    policy (``Dialect.chat_text``). A ``dialect`` other than the one the trajectory was collected
    in re-renders every assistant turn from its calls: the raw texts and sampled tokens are in the
    other format.
    """
    dialect = dialect or get_dialect(traj.dialect)
    messages, steps = traj.messages, traj.steps
    if dialect.name != traj.dialect:
        messages, steps = [m.model_copy(update={"raw": None}) for m in messages], []
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    mask: list[int] = []
    covered = ""  # template text already turned into tokens
    turn = 0
    for i, msg in enumerate(messages):
        if msg.role != "assistant":
            continue
        prefix = dialect.chat_text(tokenizer, messages[:i], toolset, render_mode)
        if not prefix.startswith(covered):
            raise TemplateError(
                f"chat template of {getattr(tokenizer, 'name_or_path', 'tokenizer')} rewrites earlier "
                f"turns (turn {turn} of {traj.task_id}); cannot mask assistant tokens"
            )
        delta = _encode(tokenizer, prefix[len(covered):])
        ids += delta
        mask += [0] * len(delta)
        step = steps[turn] if turn < len(steps) else None
        text = msg.raw if msg.raw is not None else dialect.render_assistant(msg.content, msg.tool_calls)
        if step is not None and step.completion_ids:
            completion = list(step.completion_ids)  # exact sampled tokens, never re-tokenized
        else:
            completion = _encode(tokenizer, text) + [eos]
        if completion[-1] != eos:
            completion.append(eos)
        ids += completion
        learn = only_turn is None or turn == only_turn
        mask += [int(learn)] * len(completion)
        covered = prefix + text + tokenizer.eos_token
        if turn == only_turn:
            break
        turn += 1
    return Sample(ids, mask)
