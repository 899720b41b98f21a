"""Outcome tiers and the fail_reason taxonomy.

- ``success``: the verifier accepted the answer and nothing went wrong on the way.
- ``recovered``: accepted, but a format error or a tool error happened first.
- ``failed``: with the first-cause ``fail_reason``.
- ``env_fault``: the infrastructure failed (crashed tool, timeout of ours); such episodes are
  retried and never used as negatives.

An episode the harness ended on an exception while handling the model's turn (``end`` is
``harness_error``) is ``failed`` with that reason: what the model wrote is never infrastructure
(``trajforge.harness.faults``).

A fail reason is the name of what went wrong, one name per concept: a parse error's own kind
(``no_call``, ``malformed``, ``truncated``, ``unknown_tool``, ``invalid_args``), a tool error's
kind (``sql_error``, ...), ``wrong_answer``, ``max_turns``, the fault that ended an episode.
The outcome holds only the grade; what the environment concluded stays in ``traj.verdict``.
"""

from __future__ import annotations

from trajforge._compat import moved_names
from trajforge.harness.faults import HARNESS_ERROR, NOTES
from trajforge.schema import Outcome, Trajectory, Verdict


def _last_problem(traj: Trajectory) -> str | None:
    """fail_reason of the last turn that had a problem (parse error first, then tool error)."""
    for step in reversed(traj.steps):
        if step.errors:
            return step.errors[0].kind
        bad = [r for r in step.results if not r.ok]
        if bad:
            return bad[0].error or "tool_error"
    return None


def _failed_role(traj: Trajectory, reason: str) -> str | None:
    """The pipeline role whose turn holds the failure (None without role tags): the turn with the
    last parse or tool problem when that is the reason, else the last turn (it submitted the wrong
    answer, or was still going when turns ran out)."""
    if not any(s.role_name for s in traj.steps):
        return None
    if reason not in ("wrong_answer", "max_turns"):
        for step in reversed(traj.steps):
            if step.errors or any(not r.ok for r in step.results):
                return step.role_name
    return traj.steps[-1].role_name


def grade(traj: Trajectory) -> Outcome:
    v = traj.verdict or Verdict()
    faults = [r for s in traj.steps for r in s.results if r.fault]
    if faults or traj.end == "env_fault":
        # The fault that ended it: the harness records it last and not retried (tool_timeout,
        # http_503, episode_timeout...); records without harness faults name the tool's error.
        # Notes (a degraded record, a grading error) ended nothing.
        ending = [f.kind for f in traj.faults if not f.retried and f.kind not in NOTES]
        reason = ending[-1] if ending else faults[0].error if faults else "env_fault"
        return Outcome(tier="env_fault", fail_reason=reason)
    if traj.end == HARNESS_ERROR:
        return Outcome(tier="failed", fail_reason=HARNESS_ERROR, failed_role=_failed_role(traj, HARNESS_ERROR))
    if v.correct:
        troubled = any(s.errors or any(not r.ok for r in s.results) for s in traj.steps)
        return Outcome(tier="recovered" if troubled else "success")
    if v.submitted:
        reason = "wrong_answer"
    elif traj.end == "max_turns":
        reason = "max_turns"
    else:
        reason = _last_problem(traj) or traj.end or "no_answer"
    return Outcome(tier="failed", fail_reason=reason, failed_role=_failed_role(traj, reason))


__getattr__ = moved_names(__name__, {"PARSE_REASON": "trajforge.grade.outcome:_PARSE_REASON"})
_PARSE_REASON = {k: k for k in ("no_call", "malformed", "truncated", "unknown_tool", "invalid_args")}
"""0.1 renamed parse error kinds into fail reasons with this table; they are the same names now."""
