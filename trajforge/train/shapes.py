"""A model's shape (from ``config.json`` or a known name) and its exact parameter count.

``trajforge plan`` needs no weights: a decoder-only transformer's memory follows from a handful of
numbers in its config. ``model_shape(name)`` reads them from a local folder's ``config.json``, the
embedded model's cached config (else the copy of its numbers shipped here), or the table of
known models below, whose numbers are copied from each model's ``config.json`` on the Hugging Face
hub (the ``source`` of every entry). Pure Python: no torch, no transformers.

Parameters are counted from the shape, module by module, as transformers builds the model:
token embeddings (V × H), the LM head (V × H unless tied to the embeddings), per layer the
attention projections with grouped-query attention (q and o: H × heads·head_dim, k and v: H ×
kv_heads·head_dim, plus biases where the config has them: Qwen2's q/k/v), the gated MLP (gate, up:
H × I; down: I × H) and the RMSNorm weights (two per layer; Gemma-2 has four; Qwen3, Gemma-3 and
OLMo-2 add norms on the queries and keys), plus the final norm. A mixture-of-experts config is
refused (counted as dense it would be a fraction of the model), as is a config field that is not a
positive integer (an error naming the file and the field).
``tests/train/test_plan.py`` checks the totals against the published ones (Qwen2.5-7B
7,615,616,512; Llama-3.1-8B 8,030,261,248; ...).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict


class Shape(BaseModel):
    """The numbers of a decoder-only transformer that its memory depends on."""

    model_config = ConfigDict(frozen=True)

    name: str
    """What the shape was looked up by."""
    source: str
    """Where the numbers come from (a config file, a hub page, or a note)."""
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    tied: bool
    """LM head shares the token embedding matrix."""
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    norms_per_layer: int = 2
    qk_norm: int = 0
    """RMSNorm weights on the queries and keys, per layer (Qwen3 and Gemma-3: head_dim each;
    OLMo-2: the whole q and k projections)."""
    fused: bool = False
    """q/k/v in one ``qkv_proj`` and gate/up in one ``gate_up_proj`` (Phi-3)."""
    eager_attention: bool = False
    """Attention that SDPA cannot run (Gemma-2's logit soft-capping): scores are materialised."""
    architecture: str = "LlamaForCausalLM"

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def linears(self) -> dict[str, tuple[int, int]]:
        """Each decoder layer's linear modules by name: (in features, out features)."""
        h, i = self.hidden, self.intermediate
        if self.fused:
            return {"qkv_proj": (h, self.q_dim + 2 * self.kv_dim), "o_proj": (self.q_dim, h),
                    "gate_up_proj": (h, 2 * i), "down_proj": (i, h)}
        return {"q_proj": (h, self.q_dim), "k_proj": (h, self.kv_dim), "v_proj": (h, self.kv_dim),
                "o_proj": (self.q_dim, h), "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    def params(self) -> ParamCount:
        h = self.hidden
        embedding = self.vocab * h
        lm_head = 0 if self.tied else self.vocab * h
        lin = self.linears()
        attn_names = [n for n in lin if n in ("q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj")]
        attention = sum(lin[n][0] * lin[n][1] for n in attn_names)
        if self.qkv_bias:
            attention += self.q_dim + 2 * self.kv_dim
        if self.o_bias:
            attention += h
        mlp = sum(a * b for n, (a, b) in lin.items() if n not in attn_names)
        if self.mlp_bias:
            mlp += sum(b for n, (_, b) in lin.items() if n not in attn_names)
        norms = self.layers * (self.norms_per_layer * h + self.qk_norm) + h
        return ParamCount(embedding, lm_head, self.layers * attention, self.layers * mlp, norms)

    def lora_params(self, r: int, targets: list[str], top: int = 0) -> int:
        """Trainable LoRA parameters: r × (in + out) for every targeted linear of every adapted
        layer (``top``: the top N layers only, as ``--lora-layers``; 0: all)."""
        lin = self.linears()
        return self.adapted_layers(top) * sum(r * (a + b) for n, (a, b) in lin.items() if n in targets)

    def adapted_layers(self, top: int = 0) -> int:
        """How many layers ``--lora-layers top`` adapts (0: all), refused past the model's depth."""
        if top > self.layers:
            raise ValueError(f"lora_layers={top}, but {self.name} has {self.layers} decoder layers")
        return top or self.layers

    def kv_bytes_per_token(self, bytes_per_value: float) -> float:
        """KV cache per token: keys and values of every layer's KV heads."""
        return 2 * self.layers * self.kv_dim * bytes_per_value


class ParamCount(NamedTuple):
    embedding: int
    lm_head: int
    attention: int
    mlp: int
    norms: int

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.attention + self.mlp + self.norms

    @property
    def linear(self) -> int:
        """Parameters in the decoder layers' linear modules (what 4/8-bit loading quantizes)."""
        return self.attention + self.mlp


def _hub(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


_QWEN = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}
_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}

KNOWN: dict[str, dict] = {
    "qwen2.5-0.5b": {**_QWEN, "source": _hub("Qwen/Qwen2.5-0.5B"), "vocab_size": 151936, "hidden_size": 896,
                     "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
                     "num_key_value_heads": 2, "tie_word_embeddings": True},
    "qwen2.5-1.5b": {**_QWEN, "source": _hub("Qwen/Qwen2.5-1.5B"), "vocab_size": 151936, "hidden_size": 1536,
                     "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
                     "num_key_value_heads": 2, "tie_word_embeddings": True},
    "qwen2.5-3b": {**_QWEN, "source": _hub("Qwen/Qwen2.5-3B"), "vocab_size": 151936, "hidden_size": 2048,
                   "intermediate_size": 11008, "num_hidden_layers": 36, "num_attention_heads": 16,
                   "num_key_value_heads": 2, "tie_word_embeddings": True},
    "qwen2.5-7b": {**_QWEN, "source": _hub("Qwen/Qwen2.5-7B"), "vocab_size": 152064, "hidden_size": 3584,
                   "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
                   "num_key_value_heads": 4, "tie_word_embeddings": False},
    "qwen2.5-14b": {**_QWEN, "source": _hub("Qwen/Qwen2.5-14B"), "vocab_size": 152064, "hidden_size": 5120,
                    "intermediate_size": 13824, "num_hidden_layers": 48, "num_attention_heads": 40,
                    "num_key_value_heads": 8, "tie_word_embeddings": False},
    "qwen2.5-32b": {**_QWEN, "source": _hub("Qwen/Qwen2.5-32B"), "vocab_size": 152064, "hidden_size": 5120,
                    "intermediate_size": 27648, "num_hidden_layers": 64, "num_attention_heads": 40,
                    "num_key_value_heads": 8, "tie_word_embeddings": False},
    "llama-3.1-8b": {**_LLAMA, "source": _hub("meta-llama/Llama-3.1-8B"), "vocab_size": 128256,
                     "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "tie_word_embeddings": False},
    "llama-3.2-1b": {**_LLAMA, "source": _hub("meta-llama/Llama-3.2-1B"), "vocab_size": 128256,
                     "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
                     "tie_word_embeddings": True},
    "llama-3.2-3b": {**_LLAMA, "source": _hub("meta-llama/Llama-3.2-3B"), "vocab_size": 128256,
                     "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 28,
                     "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128,
                     "tie_word_embeddings": True},
    "mistral-7b": {"model_type": "mistral", "architectures": ["MistralForCausalLM"],
                   "source": _hub("mistralai/Mistral-7B-v0.3"), "vocab_size": 32768, "hidden_size": 4096,
                   "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "tie_word_embeddings": False},
    "gemma-2-9b": {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"],
                   "source": _hub("google/gemma-2-9b"), "vocab_size": 256000, "hidden_size": 3584,
                   "intermediate_size": 14336, "num_hidden_layers": 42, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "head_dim": 256, "tie_word_embeddings": True,
                   "attn_logit_softcapping": 50.0},
    "phi-3-mini": {"model_type": "phi3", "architectures": ["Phi3ForCausalLM"],
                   "source": _hub("microsoft/Phi-3-mini-4k-instruct"), "vocab_size": 32064, "hidden_size": 3072,
                   "intermediate_size": 8192, "num_hidden_layers": 32, "num_attention_heads": 32,
                   "num_key_value_heads": 32, "tie_word_embeddings": False},
    # Not a released model: the dense 17B of the budget in issue 12 ("17B in BF16 = 34 GB of
    # weights"). Qwen2.5-14B's attention (hidden 5120, 40 heads, 8 KV heads of 128) and vocabulary,
    # 48 layers and an MLP width chosen so the total is 17.0B parameters.
    "dense-17b": {**_QWEN, "source": "a generic dense 17B (Qwen2.5-14B's attention and vocabulary, 48 layers, "
                                     "intermediate 16896): the issue-12 example", "vocab_size": 152064,
                  "hidden_size": 5120, "intermediate_size": 16896, "num_hidden_layers": 48,
                  "num_attention_heads": 40, "num_key_value_heads": 8, "tie_word_embeddings": False},
    # The embedded model (SmolLM2-135M-Instruct), used when its converted copy is not cached yet.
    "smollm2-135m": {**_LLAMA, "source": _hub("HuggingFaceTB/SmolLM2-135M-Instruct"), "vocab_size": 49152,
                     "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                     "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64,
                     "tie_word_embeddings": True},
}
ALIASES = {"17b": "dense-17b", "mistral-7b-v0.3": "mistral-7b", "phi-3-mini-4k": "phi-3-mini",
           "meta-llama-3.1-8b": "llama-3.1-8b"}


_MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
"""Config fields that give a mixture-of-experts model away (Mixtral, Qwen2/3-MoE, DeepSeek)."""


def _count(cfg: dict, key: str, source: str, fallback: int | None = None) -> int:
    """A positive integer field of a config (``fallback`` when it is absent or null): a hand-edited
    or foreign config.json is an error naming the file and field, never a traceback."""
    value = cfg.get(key)
    if value is None:
        if fallback is None:
            raise ValueError(f"{source}: config has no {key!r}; is it a decoder-only language model?")
        return fallback
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{source}: {key!r} must be a positive integer, got {value!r:.60}")
    return value


def shape_from_config(config: dict, name: str, source: str) -> Shape:
    """A ``Shape`` from a transformers ``config.json`` (its ``text_config`` for multimodal ones)."""
    cfg = config.get("text_config") or config if isinstance(config, dict) else config
    if not isinstance(cfg, dict):
        raise ValueError(f"{source}: a model config must be a JSON object, got {type(cfg).__name__}")
    for key in _MOE_KEYS:
        experts = cfg.get(key)
        if isinstance(experts, (int, float)) and not isinstance(experts, bool) and experts > 1:
            # Counted as dense, an 8-expert MLP would be an eighth of the model: refuse, not mislead.
            raise ValueError(f"{source}: a mixture-of-experts model ({key} = {experts}); plan counts dense "
                             f"decoder-only models only")
    hidden, heads = _count(cfg, "hidden_size", source), _count(cfg, "num_attention_heads", source)
    kind = str(cfg.get("model_type") or config.get("model_type") or "")
    arch = (cfg.get("architectures") or config.get("architectures") or [kind or "llama"])[0]
    head_dim = _count(cfg, "head_dim", source, hidden // heads or None)
    kv_heads = _count(cfg, "num_key_value_heads", source, heads)
    qk_norm = {"qwen3": 2 * head_dim, "gemma3": 2 * head_dim, "gemma3_text": 2 * head_dim,
               "olmo2": (heads + kv_heads) * head_dim}.get(kind, 0)
    return Shape(
        name=name, source=source, vocab=_count(cfg, "vocab_size", source), hidden=hidden,
        layers=_count(cfg, "num_hidden_layers", source), heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        intermediate=_count(cfg, "intermediate_size", source),
        # transformers' default is tied for the Gemma family and untied for the others.
        tied=bool(cfg.get("tie_word_embeddings", kind.startswith("gemma"))),
        qkv_bias=kind == "qwen2" or bool(cfg.get("attention_bias", False)),
        o_bias=bool(cfg.get("attention_bias", False)), mlp_bias=bool(cfg.get("mlp_bias", False)),
        norms_per_layer=4 if kind in ("gemma2", "gemma3", "gemma3_text") else 2, qk_norm=qk_norm,
        fused=kind == "phi3", eager_attention=cfg.get("attn_logit_softcapping") is not None,
        architecture=arch)


def _key(name: str) -> str:
    key = name.strip().lower().rstrip("/").split("/")[-1]
    for suffix in ("-instruct", "-it", "-chat"):
        key = key.removesuffix(suffix)
    return ALIASES.get(key, key)


def model_shape(model: str) -> Shape:
    """The shape of ``model``: a local folder with ``config.json``, the embedded model (its cached
    config, else its shipped numbers) or a known name (``known_names()``; a hub id such as
    ``Qwen/Qwen2.5-7B-Instruct`` matches its entry). Raises ValueError for anything else."""
    from trajforge.policies.models import is_embedded, model_dir

    folder = model_dir(model) if is_embedded(model) else Path(model)
    config = folder / "config.json"
    if config.is_file():
        try:
            data = json.loads(config.read_text(encoding="utf-8"))
        except (ValueError, RecursionError) as e:  # torn, not UTF-8, nested too deeply
            raise ValueError(f"{config}: not valid JSON ({e})") from None
        return shape_from_config(data, model, str(config))
    key = _key(model)
    if key in KNOWN:
        entry = dict(KNOWN[key])
        source = entry.pop("source")
        return shape_from_config(entry, model, source)
    raise ValueError(f"no config.json in {model!r} and not a known model; pass a folder with a config.json "
                     f"or one of: {', '.join(known_names())}")


def known_names() -> list[str]:
    return sorted(KNOWN) + sorted(ALIASES)
