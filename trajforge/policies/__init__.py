"""Who acts: ``make_policy(SPEC)`` builds a policy from a CLI spec.

SPEC is ``expert``, ``hf:MODEL``, ``hf:MODEL@ADAPTER_DIR`` or ``openai:BASE_URL#MODEL``; MODEL is
``smollm2-135m`` (the embedded default), a local path, or a hub id.
"""

from __future__ import annotations

from typing import Any

from trajforge.policies.base import Generation, Policy, TurnRequest


def make_policy(spec: str, name: str | None = None, **options: Any) -> Policy:
    kind, _, rest = spec.partition(":")
    if spec == "expert":
        from trajforge.policies.expert import ExpertPolicy

        return ExpertPolicy(name=name or "expert")
    if kind == "hf" and rest:
        from trajforge.policies.hf import HFPolicy

        model, _, adapter = rest.partition("@")
        return HFPolicy(model, adapter=adapter or None, name=name, **options)
    if kind == "openai" and "#" in rest:
        from trajforge.policies.openai import OpenAIPolicy

        url, _, model = rest.rpartition("#")
        return OpenAIPolicy(url, model, name=name, **options)
    raise ValueError(
        f"bad policy spec {spec!r}: use expert, hf:MODEL, hf:MODEL@ADAPTER_DIR or openai:BASE_URL#MODEL"
    )


__all__ = ["Generation", "Policy", "TurnRequest", "make_policy"]
