"""Who acts: ``make_policy(SPEC)`` builds a policy from a CLI spec.

SPEC is ``expert``, ``hf:MODEL``, ``hf:MODEL@ADAPTER_DIR`` or ``openai:BASE_URL#MODEL``; MODEL is
``smollm2-135m`` (the embedded default), a local path, or a hub id. Options follow a ``?``:
``dialect=NAME`` overrides the tool-call dialect the policy would pick for itself (for ``openai:``,
a text dialect means the server returns raw text that the dialect parses), and for ``hf:``
``render=template`` lets the model's chat template show the tools:
``hf:Qwen/Qwen3-8B?dialect=hermes&render=template``, and ``chat_template=FILE`` renders with the
Jinja template in FILE (a model without one gets a default; an adapter renders with the template
it was trained with, recorded in its meta): ``hf:./gemma-3-270m?chat_template=chat.jinja``. A spec
with options is also the policy's default name, so two dialects of one model are two policies in a
store.
"""

from __future__ import annotations

from typing import Any

from trajforge.parse import get_dialect
from trajforge.policies.base import Generation, Policy, TurnRequest


_SPEC_OPTIONS = {"dialect": "dialect", "render": "render_mode", "chat_template": "chat_template",
                 "max_tokens": "max_new_tokens"}


def _spec_options(spec: str) -> tuple[str, dict[str, Any]]:
    """``SPEC?dialect=NAME&render=MODE&chat_template=FILE&max_tokens=N`` → (SPEC, {"dialect": Dialect,
    "render_mode": MODE, "chat_template": FILE, "max_new_tokens": N})."""
    base, sep, query = spec.rpartition("?")
    # No options: a '?' inside a URL is not ours (an hf: option may name a file, so '/' is fine there).
    if not sep or "#" in query or ("/" in query and not base.startswith("hf:")):
        return spec, {}
    options: dict[str, Any] = {}
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if key not in _SPEC_OPTIONS or not value:
            raise ValueError(f"bad policy option {pair!r} in {spec!r}: use dialect=NAME, render=dialect|template, "
                             "max_tokens=N or chat_template=FILE")
        options[_SPEC_OPTIONS[key]] = value
    if "dialect" in options:
        try:
            options["dialect"] = get_dialect(options["dialect"])
        except KeyError as e:
            raise ValueError(f"policy spec {spec!r}: {e.args[0]}") from None
    if "max_new_tokens" in options:
        if not options["max_new_tokens"].isdigit() or int(options["max_new_tokens"]) < 1:
            raise ValueError(f"policy spec {spec!r}: max_tokens= takes a positive whole number")
        options["max_new_tokens"] = int(options["max_new_tokens"])
    for key, flag in (("render_mode", "render="), ("chat_template", "chat_template="), ("max_new_tokens", "max_tokens=")):
        if key in options and not base.startswith("hf:"):
            raise ValueError(f"policy spec {spec!r}: {flag} applies to hf: policies only")
    return base, options


def make_policy(spec: str, name: str | None = None, **options: Any) -> Policy:
    base, spec_options = _spec_options(spec)
    if spec_options:
        name = name or spec
    spec, options = base, {**options, **spec_options}
    kind, _, rest = spec.partition(":")
    if spec == "expert":
        from trajforge.policies.expert import ExpertPolicy

        return ExpertPolicy(name=name or "expert", dialect=options.get("dialect"))
    if kind == "hf" and rest:
        from trajforge.policies.hf import HFPolicy

        model, _, adapter = rest.partition("@")
        return HFPolicy(model, adapter=adapter or None, name=name, **options)
    if kind == "openai" and "#" in rest:
        from trajforge.policies.openai import OpenAIPolicy

        url, _, model = rest.rpartition("#")
        return OpenAIPolicy(url, model, name=name, **options)
    raise ValueError(
        f"bad policy spec {spec!r}: use expert, hf:MODEL, hf:MODEL@ADAPTER_DIR or openai:BASE_URL#MODEL, "
        "optionally followed by ?dialect=NAME"
    )


__all__ = ["Generation", "Policy", "TurnRequest", "make_policy"]
