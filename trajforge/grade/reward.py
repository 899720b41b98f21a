"""Composite reward: R = l1*completion + l2*step + l3*efficiency - l4*violation.

- completion: 1 if the verifier accepted the answer; ``guess_credit`` (0 by default) when the
  environment marked the accepted answer ``guessed`` (no result the agent saw held it).
- step: ``milestone_bonus`` per process milestone reached (dense signal for partial progress).
- efficiency: reference turns / turns used, for accepted answers only (fewer turns is better,
  never above 1).
- violation: share of turns that contained a malformed or invalid call.

Why a guess earns no completion by default: GRPO and DPO rank a group's episodes by this total,
and an SQL model that submits a plausible number straight after an error is right often enough
(small counts) that a paid guess would outrank an honest failed lookup and teach guessing.
Efficiency goes with completion (a guess's one short turn is not efficient work); milestones and
violations are scored as for any episode.

Weights per environment or task type (``RewardConfig.per``): an SQL answer is one number and its
milestones are few, a travel booking has many; one set of λ for both under-rewards one of them.
A rule's key is ``ENV`` (``sql``), ``ENV/TIER`` (``sql/hard``) or ``*/TIER`` (``*/hard``); the
most specific key that matches an episode chooses its weights and milestone bonus (``ENV/TIER``
over ``ENV`` over ``*/TIER`` over the defaults), and what a rule leaves unset comes from the
defaults. Tiers stand for task types because every trajectory records its task's tier (templates
are not stored on trajectories). Each ``RewardBreakdown`` stores the weights, the bonus and the
rule that chose them, so a store says how its rewards were computed.
"""

from __future__ import annotations

import math
from typing import Annotated, NamedTuple

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from trajforge.schema import Outcome, RewardBreakdown, Trajectory

Weights = tuple[float, float, float, float]
DEFAULT_RULE = "default"
"""``RewardBreakdown.rule`` of an episode no ``per`` key matched."""


def _checked_weights(weights: Weights) -> Weights:
    """Weights as given, each finite and at least 0: a NaN or inf makes every total NaN (and every
    GRPO advantage with it), and a negative λ turns its component around — ``violation`` is already
    subtracted, so ``-0.1`` for it would pay the model for malformed calls."""
    if not all(math.isfinite(w) and w >= 0 for w in weights):
        raise ValueError(f"reward weights must be finite numbers >= 0 (the violation weight is subtracted "
                         f"already), got {tuple(weights)}")
    return weights


def _checked_bonus(bonus: float) -> float:
    """A milestone bonus as given, finite and at least 0 (see ``_checked_weights``)."""
    if not (math.isfinite(bonus) and bonus >= 0):
        raise ValueError(f"milestone bonus must be a finite number >= 0, got {bonus}")
    return bonus


CheckedWeights = Annotated[Weights, AfterValidator(_checked_weights)]
Bonus = Annotated[float, AfterValidator(_checked_bonus)]


class RewardRule(BaseModel):
    """Weights for the episodes of one environment or task type (unset: the defaults)."""

    # A misspelt key (``weight =`` in ``[rewards.per.sql]``) must not leave a rule that silently
    # uses the defaults.
    model_config = ConfigDict(extra="forbid")

    weights: CheckedWeights | None = None
    """(l1 completion, l2 step, l3 efficiency, l4 violation); None keeps the default weights."""
    milestone_bonus: Bonus | None = None
    """Step component added per milestone reached; None keeps the default bonus."""


class Resolved(NamedTuple):
    """What one episode's reward is computed with, and which rule chose it."""

    weights: Weights
    milestone_bonus: float
    rule: str


class RewardConfig(BaseModel):
    """Weights of the composite reward, with optional rules per environment or task type."""

    weights: CheckedWeights = (0.5, 0.3, 0.1, 0.1)
    """(l1 completion, l2 step, l3 efficiency, l4 violation)."""
    milestone_bonus: Bonus = 0.1
    """Step component added per milestone reached."""
    per: dict[str, RewardRule] = Field(default_factory=dict)
    """Rules by ``ENV``, ``ENV/TIER`` or ``*/TIER`` key; the most specific match wins."""
    guess_credit: float = Field(0.0, ge=0.0, le=1.0)
    """Completion (and efficiency) credit of an accepted answer graded ``guessed``: 0 pays a lucky
    guess nothing for being right, 1 pays it as an earned answer (the reward before guesses were
    told apart)."""

    @field_validator("per")
    @classmethod
    def _keys(cls, per: dict[str, RewardRule]) -> dict[str, RewardRule]:
        for key in per:
            parts = key.split("/")
            env_only = len(parts) == 1 and parts[0] not in ("", "*")
            if not (env_only or (len(parts) == 2 and all(parts))):
                raise ValueError(f"reward rule key {key!r} must be ENV, ENV/TIER or */TIER")
        return per

    def resolve(self, env: str, tier: str) -> Resolved:
        """The weights, bonus and rule for an episode of ``env`` on a task of ``tier``."""
        for key in (f"{env}/{tier}", env, f"*/{tier}"):
            rule = self.per.get(key)
            if rule is not None:
                return Resolved(rule.weights if rule.weights is not None else self.weights,
                                rule.milestone_bonus if rule.milestone_bonus is not None else self.milestone_bonus,
                                key)
        return Resolved(self.weights, self.milestone_bonus, DEFAULT_RULE)

    def resolve_for(self, traj: Trajectory) -> Resolved:
        return self.resolve(traj.env, traj.tier)


def reward(traj: Trajectory, outcome: Outcome, cfg: RewardConfig | None = None) -> RewardBreakdown:
    cfg = cfg or RewardConfig()
    chosen = cfg.resolve_for(traj)
    l1, l2, l3, l4 = chosen.weights
    turns = max(1, len(traj.steps))
    completion = (cfg.guess_credit if outcome.guessed else 1.0) if outcome.correct else 0.0
    step = chosen.milestone_bonus * len(traj.verdict.milestones if traj.verdict else ())
    efficiency = completion * min(1.0, traj.reference_turns / turns) if traj.reference_turns else 0.0
    violation = sum(1 for s in traj.steps if s.errors) / turns
    total = l1 * completion + l2 * step + l3 * efficiency - l4 * violation
    return RewardBreakdown(completion=completion, step=step, efficiency=efficiency,
                           violation=violation, weights=chosen.weights, milestone_bonus=chosen.milestone_bonus,
                           rule=chosen.rule, total=round(total, 6))
