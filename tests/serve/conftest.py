"""Fixtures for the server tests: the tiny model, two LoRA adapters on it, and a scripted backend."""

import pytest

from tests.tiny import build_tiny_adapter, build_tiny_model
from trajforge.serve.backend import Token


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """(base model folder, {adapter name: folder}) built once per session."""
    root = tmp_path_factory.mktemp("serve-tiny")
    base = build_tiny_model(root / "base")
    adapters = {"alpha": build_tiny_adapter(base, root / "alpha", seed=1),
                "beta": build_tiny_adapter(base, root / "beta", seed=2)}
    return base, {k: str(v) for k, v in adapters.items()}


class ScriptedBackend:
    """Stand-in at the model boundary: each request is answered with ``reply(adapter, prompt_ids)``,
    tokenized by the real tokenizer, one token at a time with made-up log-probs."""

    adapters = ("alpha", "beta")
    context = 4096

    def __init__(self, tokenizer, reply):
        self.tokenizer = tokenizer
        self.stop_ids = frozenset({tokenizer.eos_token_id})
        self.reply = reply
        self.calls = []

    def tokens(self, adapter, prompt_ids, sampling):
        self.calls.append((adapter, list(prompt_ids), sampling))
        text = self.reply(adapter, prompt_ids)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        for k, tid in enumerate(ids[: sampling.max_tokens]):
            yield Token(tid, -0.25 * (k + 1), ((tid, -0.25 * (k + 1)), (0, -9.0)))
