"""Which toolset each training trajectory was shown, and what the adapter records about them.

Every trajectory carries the fingerprint of the toolset its model saw. Training renders each
sample with its own toolset, so a pool that mixes environments (sql + travel) or a role's view of
a multi-agent pipeline trains in one run; an adapter records every fingerprint it was trained on,
and the policies accept any of them.
"""

from __future__ import annotations

from typing import Callable

from trajforge.schema import Toolset, Trajectory


def toolset_lookup() -> Callable[[Trajectory], Toolset]:
    """Trajectory → its environment's toolset, built once per environment name."""
    from trajforge.envs import env_class

    cache: dict[str, Toolset] = {}

    def lookup(traj: Trajectory) -> Toolset:
        if traj.env not in cache:
            cache[traj.env] = env_class(traj.env).toolset()
        return cache[traj.env]

    return lookup


def check_fingerprints(trajs: list[Trajectory], allow_mismatch: bool = False) -> list[str]:
    """Every trajectory must match its environment's current toolset; returns the fingerprints
    (sorted). ``allow_mismatch`` trains on data collected with an older toolset anyway."""
    lookup = toolset_lookup()
    stale: dict[str, tuple[str, str]] = {}
    for t in trajs:
        current = lookup(t).fingerprint
        if t.toolset_fingerprint != current:
            stale.setdefault(t.env, (t.toolset_fingerprint, current))
    if stale and not allow_mismatch:
        env, (old, new) = next(iter(stale.items()))
        raise ValueError(f"trajectories were collected with toolset {old} but env {env!r} now has {new}; "
                         "re-collect, or pass allow_mismatch=True to migrate")
    return sorted({t.toolset_fingerprint for t in trajs})


def fingerprint_meta(trajs: list[Trajectory], fingerprints: list[str]) -> dict:
    """The adapter meta's record of the toolsets and environments it was trained on."""
    envs = sorted({t.env for t in trajs})
    return {"toolset_fingerprint": fingerprints[0], "toolset_fingerprints": fingerprints,
            "env": envs[0] if len(envs) == 1 else ",".join(envs)}
