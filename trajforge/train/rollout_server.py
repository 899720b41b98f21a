"""GRPO rollouts from an OpenAI-compatible server: vLLM (or ``trajforge serve``) samples, the
trainer learns.

Each rollout step the trainer publishes its current policy as ONE LoRA adapter — the starting
lineage (SFT, DPO, ...) and the adapter being trained, stacked exactly (``train/lora_stack``) —
loads it into the server under a fresh name with vLLM's runtime LoRA API
(``POST /v1/load_lora_adapter``; vLLM needs ``--enable-lora --max-lora-rank R`` with R ≥ the
stacked rank and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``; ``trajforge serve`` needs
``--allow-adapter-updates``), unloads the previous step's, and rolls out through ``OpenAIPolicy``
with ``return_token_ids``, so the loss trains on the token ids the server sampled. The server
reads the adapter folder itself: it must see the trainer's file system (same machine, or a
shared mount).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import httpx

from trajforge.train.lora_stack import stack_loras


class RolloutServerError(RuntimeError):
    """The rollout server refused or failed an adapter update."""


class RolloutServer:
    """One or more rollout servers that load every published adapter (requests are then spread
    over them by ``OpenAIPolicy``)."""

    def __init__(self, base_url: str | list[str], prefix: str = "grpo", timeout_s: float = 120.0):
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        self.base_urls = [u.rstrip("/") for u in urls]
        self.prefix = prefix
        self.client = httpx.Client(timeout=timeout_s)
        self.loaded: str | None = None

    def _post(self, route: str, body: dict) -> None:
        for base in self.base_urls:
            url = f"{base}/{route}"
            try:
                resp = self.client.post(url, json=body)
            except httpx.HTTPError as e:
                raise RolloutServerError(f"{url}: {type(e).__name__}: {e}") from None
            if resp.status_code != 200:
                raise RolloutServerError(f"{url} answered {resp.status_code}: {resp.text[:300]} (vLLM needs "
                                         "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora; trajforge "
                                         "serve needs --allow-adapter-updates)")

    def publish(self, net, lineage: list[str], meta: dict, work_dir: Path, step: int) -> str:
        """Stack ``lineage`` + the live adapter of ``net`` into one folder, load it as
        ``PREFIX-step-N``, unload the previous one; returns the model name to request."""
        name = self.name_at(step)
        live = work_dir / "live"
        net.save_pretrained(live)  # the trainable adapter only
        folder = stack_loras([*lineage, live], work_dir / f"step-{step}")
        from trajforge.policies.hf import ADAPTER_META

        (folder / ADAPTER_META).write_text(json.dumps(meta, indent=2))  # the server reads the dialect
        self._post("load_lora_adapter", {"lora_name": name, "lora_path": str(folder.resolve())})
        previous, self.loaded = self.loaded, name
        if previous is not None:
            self._post("unload_lora_adapter", {"lora_name": previous})
        return name

    def name_at(self, step: int) -> str:
        """The model name the adapter of rollout step ``step`` is served under."""
        return f"{self.prefix}-step-{step}"

    def close(self) -> None:
        if self.loaded is not None:
            try:
                self._post("unload_lora_adapter", {"lora_name": self.loaded})
            except RolloutServerError as e:  # training is done; say what may be left on the server
                warnings.warn(f"could not unload rollout adapter {self.loaded!r}: {e}", stacklevel=2)
            self.loaded = None
        self.client.close()
