"""Tiny random models of four architectures, each with its family's real chat template and special
tokens — the "bring your own model" fixtures. No download.

The templates are the official ones, copied into ``tests/fixtures/chat_templates/`` (see its
SOURCES.md). Each model starts from the small byte-level BPE tokenizer of ``tests/tiny.py``; the
family's special tokens are then added to it (``add_special_tokens``) and the model's embeddings
resized to match, the way a real family's tokenizer carries them. eos is what the family's
``tokenizer_config.json`` says (Gemma's ``<eos>``, Phi-3.5's ``<|endoftext|>``), not the
end-of-turn token: finding that one is the loader's job.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

TEMPLATES = Path(__file__).parent.parent / "fixtures" / "chat_templates"


class Family(NamedTuple):
    template: str
    """File in tests/fixtures/chat_templates."""
    bos: str | None
    eos: str
    pad: str | None
    extra: tuple[str, ...]
    """The family's other control tokens (added as special tokens)."""
    plain: tuple[str, ...] = ()
    """Tokens the family adds as ordinary (non-special) added tokens."""


FAMILIES: dict[str, Family] = {
    "llama": Family("llama-3.3-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", None,
                    ("<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|python_tag|>")),
    "qwen2": Family("qwen2.5-instruct.jinja", None, "<|im_end|>", "<|endoftext|>", ("<|im_start|>",),
                    ("<tool_call>", "</tool_call>")),
    "gemma2": Family("gemma-2-it.jinja", "<bos>", "<eos>", "<pad>", ("<start_of_turn>", "<end_of_turn>")),
    "phi3": Family("phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>", "<|endoftext|>",
                   ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>")),
}


def template_text(family: str) -> str:
    return (TEMPLATES / FAMILIES[family].template).read_text()


def family_tokenizer(family: str):
    """tests/tiny.py's BPE tokenizer with the family's special tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from tests.tiny import CORPUS

    spec = FAMILIES[family]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(CORPUS * 3, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<unk>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>")
    named = {"eos_token": spec.eos}
    if spec.bos:
        named["bos_token"] = spec.bos
    if spec.pad:
        named["pad_token"] = spec.pad
    tok.add_special_tokens({**named, "additional_special_tokens": list(spec.extra)})
    if spec.plain:
        tok.add_tokens(list(spec.plain))
    tok.chat_template = template_text(family)
    return tok


def build_family_model(family: str, path: Path, seed: int = 0) -> Path:
    """A 2-layer random model of ``family``'s architecture with its tokenizer, saved as a model folder."""
    import torch
    from transformers import AutoModelForCausalLM

    tok = family_tokenizer(family)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(_config(family, base_vocab=400))
    model.resize_token_embeddings(len(tok))  # the family's tokens were added after the base vocabulary
    model.config.eos_token_id = tok.eos_token_id
    model.config.bos_token_id = tok.bos_token_id
    model.config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.bos_token_id = tok.bos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _config(family: str, base_vocab: int):
    from transformers import Gemma2Config, LlamaConfig, Phi3Config, Qwen2Config

    common = dict(vocab_size=base_vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                  tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    if family == "llama":
        return LlamaConfig(**common)
    if family == "qwen2":
        return Qwen2Config(**common)
    if family == "gemma2":
        return Gemma2Config(**common, head_dim=8, sliding_window=4096)
    if family == "phi3":
        return Phi3Config(**common)
    raise KeyError(family)
