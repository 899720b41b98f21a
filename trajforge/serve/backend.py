"""Token backends for ``trajforge serve``: one base model, several LoRA adapters, one token at a time.

The server renders a request into prompt ids and asks a backend for the completion, token by token;
the backend owns the weights and the sampling. ``HFBackend`` keeps ONE base model in memory and
loads every adapter into it with peft (``load_adapter``); a request picks its adapter with
``set_adapter``, or runs with adapters disabled for the base model. N adapters therefore cost N
small LoRA weight sets, not N models. Switching adapters mutates the model, so generation holds a
lock from the first token to the last: correctness over throughput (this is a CPU server).

Decoding is a plain loop over the KV cache rather than ``generate()``: it yields each token as it is
sampled (streaming) with its log-probability, and what it yields is exactly what a full forward pass
over prompt + completion scores (the tests check this). Log-probs are those of the raw model
distribution, before temperature and top-p, as vLLM reports them by default
(``--logprobs-mode raw_logprobs``).
"""

from __future__ import annotations

import random
import threading
from contextlib import contextmanager
from typing import Any, Iterator, NamedTuple, Protocol


class Sampling(NamedTuple):
    """How one completion is sampled."""

    temperature: float = 1.0
    """0 is greedy."""
    top_p: float = 1.0
    """Nucleus mass kept before sampling."""
    max_tokens: int = 256
    """Most tokens to generate, the end-of-turn token included."""
    seed: int | None = None
    """Sampling seed; None draws a fresh one."""
    top_logprobs: int = 0
    """How many alternatives to report per position."""
    stop_ids: frozenset[int] = frozenset()
    """End-of-turn ids of this request besides the backend's (an adapter trained with a template
    that ends turns with another token)."""


class Token(NamedTuple):
    """One sampled token."""

    id: int
    logprob: float
    """Log-probability under the model's raw distribution."""
    top: tuple[tuple[int, float], ...] = ()
    """(token id, log-prob) of the most likely tokens at this position, best first."""


class Backend(Protocol):
    tokenizer: Any
    adapters: tuple[str, ...]
    """Adapter names this backend can generate with (besides the base model, ``None``)."""
    stop_ids: frozenset[int]
    """End-of-turn token ids; the backend yields one of them last, then stops."""
    context: int
    """Most positions (prompt + completion) the model takes."""

    def tokens(self, adapter: str | None, prompt_ids: list[int], sampling: Sampling) -> Iterator[Token]:
        """Sampled tokens for ``prompt_ids`` with ``adapter`` (None: the base model). Callers close
        the iterator when they stop early (it may hold a lock)."""
        ...


class HFBackend:
    """A local transformers model with LoRA adapters loaded side by side through peft."""

    def __init__(self, model: str, adapters: dict[str, str] | None = None, dtype: str = "auto",
                 device: str | None = None, chat_template: str | None = None):
        from trajforge.policies.hf import load_model

        # chat_template (text): the base model's; adapters trained with another render with theirs.
        net, self.tokenizer = load_model(model, None, dtype, device, chat_template)
        adapters = dict(adapters or {})
        if adapters:
            from peft import PeftModel

            (first, path), *rest = adapters.items()
            net = PeftModel.from_pretrained(net, path, adapter_name=first)
            for name, path in rest:
                net.load_adapter(path, adapter_name=name)
            net.eval()
        self.model = net
        self.adapters = tuple(adapters)
        self.paths = dict(adapters)
        self.stop_ids = _stop_ids(net, self.tokenizer)
        config = net.config if not adapters else net.get_base_model().config
        self.context = int(getattr(config, "max_position_embeddings", 0) or 4096)
        self._lock = threading.Lock()

    def tokens(self, adapter: str | None, prompt_ids: list[int], sampling: Sampling) -> Iterator[Token]:
        import torch

        from trajforge.policies.hf import _cache_kw

        if adapter is not None and adapter not in self.adapters:
            raise KeyError(f"no adapter {adapter!r} loaded; loaded: {list(self.adapters)}")
        seed = sampling.seed if sampling.seed is not None else random.getrandbits(63)
        device = self.model.device
        gen = torch.Generator(device=device).manual_seed(seed)  # sample where the logits are
        with self._lock, torch.no_grad(), self._active(adapter):
            out = self.model(input_ids=torch.tensor([prompt_ids], device=device), use_cache=True,
                             logits_to_keep=1)  # one row of logits, not prompt x vocab
            cache = getattr(out, "cache", None) or out.past_key_values
            for _ in range(sampling.max_tokens):
                token = pick(out.logits[0, -1].float(), sampling, gen)
                yield token
                if token.id in self.stop_ids or token.id in sampling.stop_ids:
                    return
                step = torch.tensor([[token.id]], device=device)
                out = self.model(input_ids=step, use_cache=True, **{_cache_kw(): cache})

    def load_adapter(self, name: str, path: str) -> None:
        """Load one more LoRA adapter at runtime (vLLM's ``/v1/load_lora_adapter``). Waits for
        the generation in progress: adapters are swapped only between requests."""
        from peft import PeftModel

        with self._lock:
            if name in self.adapters:
                raise ValueError(f"adapter {name!r} is already loaded (from {self.paths[name]})")
            if self.adapters:
                self.model.load_adapter(path, adapter_name=name)
            else:
                self.model = PeftModel.from_pretrained(self.model, path, adapter_name=name)
            self.model.eval()
            self.adapters += (name,)
            self.paths[name] = path

    def unload_adapter(self, name: str) -> None:
        """Drop a runtime-loaded or start-up adapter (vLLM's ``/v1/unload_lora_adapter``)."""
        with self._lock:
            if name not in self.adapters:
                raise KeyError(f"no adapter {name!r} loaded; loaded: {list(self.adapters)}")
            if len(self.adapters) == 1:  # the last one: back to the plain base model
                self.model = self.model.unload()
            else:
                if self.model.active_adapter == name:
                    self.model.set_adapter(next(a for a in self.adapters if a != name))
                self.model.delete_adapter(name)
            self.adapters = tuple(a for a in self.adapters if a != name)
            del self.paths[name]

    @contextmanager
    def _active(self, adapter: str | None):
        if not self.adapters:
            yield
        elif adapter is None:
            with self.model.disable_adapter():
                yield
        else:
            self.model.set_adapter(adapter)
            yield


def pick(logits, sampling: Sampling, gen) -> Token:
    """Sample (or take the argmax of) one position's logits; report raw log-probs."""
    import torch

    logp = torch.log_softmax(logits, -1)
    if sampling.temperature <= 0:
        tid = int(torch.argmax(logits))
    else:
        # Best logit shifted to 0, in float64: a temperature float32 cannot divide by (1e-40 is
        # in range) made inf - inf = nan there, and multinomial refused it; this samples the best.
        probs = torch.softmax((logits.double() - logits.max()) / sampling.temperature, -1)
        if sampling.top_p < 1.0:
            sorted_p, order = probs.sort(descending=True)
            keep = sorted_p.cumsum(0) - sorted_p < sampling.top_p  # the best token always stays
            probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
        tid = int(torch.multinomial(probs, 1, generator=gen))
    top: tuple[tuple[int, float], ...] = ()
    if sampling.top_logprobs:
        vals, idx = logp.topk(min(sampling.top_logprobs, logp.numel()))
        top = tuple(zip(idx.tolist(), vals.tolist()))
    return Token(tid, float(logp[tid]), top)


def _stop_ids(model, tokenizer) -> frozenset[int]:
    """The tokenizer's eos plus whatever the generation config lists (Llama 3 has several)."""
    ids = {tokenizer.eos_token_id}
    cfg_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(cfg_eos if isinstance(cfg_eos, (list, tuple)) else [cfg_eos])
    return frozenset(i for i in ids if i is not None)
