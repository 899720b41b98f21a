"""Reward weights on the command line: ``--reward-weights`` and ``--milestone-bonus`` for ``grade``,
``collect`` and ``train grpo``, applied over the ``[rewards]`` table of ``--config``.

    trajforge grade store/ --reward-weights sql=0.6,0.3,0.05,0.05 --milestone-bonus travel=0.2
    trajforge collect ... --reward-weights 0.7,0.2,0.05,0.05          # no key: the default weights
    trajforge grade store/ --config rewards.toml

    # rewards.toml                      (RewardConfig; keys ENV, ENV/TIER or */TIER)
    [rewards]
    weights = [0.5, 0.3, 0.1, 0.1]
    guess_credit = 0.0                  # completion credit of a right but ``guessed`` answer
    [rewards.per.sql]
    weights = [0.6, 0.3, 0.05, 0.05]
    [rewards.per."travel/hard"]
    milestone_bonus = 0.2

A flag's ``KEY=`` names the rule it sets (``grade/reward.py`` says which rule an episode gets);
without a key it sets the defaults. Flags win over the file, the file over the built-in defaults.
"""

from __future__ import annotations

import typer
from pydantic import ValidationError

from trajforge.cli.options import Options
from trajforge.grade.reward import RewardConfig, RewardRule

REWARD_WEIGHTS = typer.Option([], "--reward-weights", help="[KEY=]l1,l2,l3,l4: completion, step, efficiency and "
                              "violation weights for KEY (ENV, ENV/TIER or */TIER; none: the default); repeatable")
MILESTONE_BONUS = typer.Option([], "--milestone-bonus", help="[KEY=]BONUS: step reward per milestone for KEY "
                               "(none: the default); repeatable")
REWARDS = Options(RewardConfig, only=(), file_only=("weights", "milestone_bonus", "per", "guess_credit"))
"""The ``[rewards]`` section of ``--config`` (no flags of its own: see ``with_reward_flags``)."""


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _split(spec: str, flag: str) -> tuple[str | None, str]:
    key, eq, value = spec.rpartition("=")
    if eq and not key.strip():
        _fail(f"{flag} {spec!r}: nothing before '='")
    return (key.strip() or None), value.strip()


def _numbers(text: str, flag: str, spec: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        _fail(f"{flag} {spec!r}: expected numbers separated by commas")
        raise AssertionError("unreachable") from None


def with_reward_flags(cfg: RewardConfig, weights: list[str], bonus: list[str]) -> RewardConfig:
    """``cfg`` with the ``--reward-weights`` and ``--milestone-bonus`` values applied."""
    data = cfg.model_dump()
    for flag, specs, field in (("--reward-weights", weights, "weights"), ("--milestone-bonus", bonus,
                                                                         "milestone_bonus")):
        for spec in specs:
            key, text = _split(spec, flag)
            values = _numbers(text, flag, spec)
            if field == "weights" and len(values) != 4:
                _fail(f"{flag} {spec!r}: expected 4 weights (completion, step, efficiency, violation), "
                      f"got {len(values)}")
            if field == "milestone_bonus" and len(values) != 1:
                _fail(f"{flag} {spec!r}: expected one number")
            value = values if field == "weights" else values[0]
            if key is None:
                data[field] = value
            else:
                data["per"].setdefault(key, RewardRule().model_dump())[field] = value
    try:
        return RewardConfig.model_validate(data)
    except ValidationError as e:
        _fail("; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" if err["loc"] else err["msg"]
                        for err in e.errors()))
        raise AssertionError("unreachable") from None
