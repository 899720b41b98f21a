"""Token-level rendering of trajectories for training, with assistant-only loss masks.

A sample is rendered segment by segment with the same dialect and chat template the policy uses
at inference: for each assistant turn, the text the chat template adds before it (system prompt,
user turn, tool results, the ``assistant`` header) is a mask-0 segment, and the assistant's own
text plus its end-of-turn token is a mask-1 segment. Tool results and prompts therefore never
carry loss. Where the policy recorded the exact sampled token ids, those are used instead of
re-tokenizing the text.
"""

from __future__ import annotations

from typing import NamedTuple

from trajforge.parse import Dialect, get_dialect
from trajforge.schema import Message, Toolset, Trajectory


class Sample(NamedTuple):
    input_ids: list[int]
    loss_mask: list[int]


class TemplateError(ValueError):
    """The chat template does not extend earlier turns' text, so turns cannot be masked apart."""


def _chat_text(tokenizer, dialect: Dialect, messages: list[Message], toolset: Toolset) -> str:
    chat = dialect.to_chat(messages, toolset)
    return tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []


def render_sample(traj: Trajectory, tokenizer, toolset: Toolset, dialect: Dialect | None = None,
                  only_turn: int | None = None) -> Sample:
    """Render one trajectory into (input_ids, loss_mask).

    ``only_turn``: render up to that assistant turn (0-based) and put loss on it alone; earlier
    turns become context. Per-turn DPO pairs are rendered this way.
    """
    dialect = dialect or get_dialect(traj.dialect)
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    mask: list[int] = []
    covered = ""  # template text already turned into tokens
    turn = 0
    for i, msg in enumerate(traj.messages):
        if msg.role != "assistant":
            continue
        prefix = _chat_text(tokenizer, dialect, traj.messages[:i], toolset)
        if not prefix.startswith(covered):
            raise TemplateError(
                f"chat template of {getattr(tokenizer, 'name_or_path', 'tokenizer')} rewrites earlier "
                f"turns (turn {turn} of {traj.task_id}); cannot mask assistant tokens"
            )
        delta = _encode(tokenizer, prefix[len(covered):])
        ids += delta
        mask += [0] * len(delta)
        step = traj.steps[turn] if turn < len(traj.steps) else None
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
