"""Which dialect a model trains in; the sample builder itself is ``train/sequences.py``.

``render_sample`` stays here for existing callers: it is ``SequenceBuilder`` rendering one
trajectory from its text (never from stored ids).
"""

from __future__ import annotations

from trajforge.parse import Dialect, get_dialect
from trajforge.schema import Toolset, Trajectory
from trajforge.train.sequences import Sample, SequenceBuilder, TemplateError

__all__ = ["Sample", "TemplateError", "render_sample", "training_dialect"]


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


def render_sample(traj: Trajectory, tokenizer, toolset: Toolset, dialect: Dialect | None = None,
                  only_turn: int | None = None, render_mode: str = "dialect") -> Sample:
    """One trajectory rendered into (input_ids, loss_mask) from its text; see ``SequenceBuilder``."""
    builder = SequenceBuilder(tokenizer, dialect, render_mode, toolset_of=lambda _: toolset, stored_ids=False)
    return builder.build(traj, only_turn)[0]
