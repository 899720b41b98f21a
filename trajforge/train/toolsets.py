"""Which toolset each training trajectory was shown, and what the adapter records about them.

Every trajectory carries the fingerprint of the toolset its model saw; the toolset itself travels
with the data (``toolsets/<fingerprint>.json`` beside a store or pool, ``envs/toolsets.py``).
Training renders each sample with its own toolset, looked up by that fingerprint, so a pool that
mixes environments (sql + travel) or a role's view of a multi-agent pipeline trains in one run,
and old data is rendered with the tool prompt its model saw, never with today's. An adapter
records every fingerprint it was trained on, and the policies accept any of them.
"""

from __future__ import annotations

from typing import Callable

from trajforge.envs.toolsets import env_toolset, toolset_for
from trajforge.schema import Toolset, Trajectory


class UnknownToolset(ValueError):
    """Training data whose toolset is neither stored with it nor its environment's current one."""


def toolset_of(traj: Trajectory) -> Toolset:
    """The toolset ``traj`` was shown: stored with the data (or built this run) by fingerprint;
    failing that its environment's current toolset, if the fingerprints agree."""
    try:
        return toolset_for(traj.toolset_fingerprint)
    except KeyError:
        pass
    try:
        current = env_toolset(traj.env)
    except (KeyError, ValueError):
        current = None
    if current is not None and current.fingerprint == traj.toolset_fingerprint:
        return current
    now = f"; {traj.env!r} now has {current.fingerprint}" if current is not None else ""
    raise UnknownToolset(
        f"trajectory {traj.task_id}#{traj.sample} was collected with toolset {traj.toolset_fingerprint}, "
        f"which is not stored with the data{now}. Bring the data to today's tools with "
        "`trajforge migrate`, or keep its toolsets/ folder beside the store")


def toolset_lookup() -> Callable[[Trajectory], Toolset]:
    """``toolset_of``, for the sequence builder."""
    return toolset_of


def check_fingerprints(trajs: list[Trajectory]) -> list[str]:
    """Every trajectory's toolset must resolve (``toolset_of``); returns the fingerprints, sorted."""
    seen: set[str] = set()
    for t in trajs:
        if t.toolset_fingerprint not in seen:
            toolset_of(t)
            seen.add(t.toolset_fingerprint)
    return sorted(seen)


def fingerprint_meta(trajs: list[Trajectory], fingerprints: list[str]) -> dict:
    """The adapter meta's record of the toolsets and environments it was trained on."""
    envs = sorted({t.env for t in trajs})
    return {"toolset_fingerprint": fingerprints[0], "toolset_fingerprints": fingerprints,
            "env": envs[0] if len(envs) == 1 else ",".join(envs)}
