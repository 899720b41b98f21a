"""Replay of general data against forgetting, made offline by self-distillation.

Fine-tuning a small model on one toolset's episodes pulls it away from everything else it could
do. Mixing in samples of its *own* earlier behaviour anchors it: the base model answers a shipped
set of general prompts (greedy), and those answers become SFT/DPO replay samples. No external
data is needed, and the samples are by construction what the model already did.

The shipped prompts are split: the first ``REPLAY_PROMPTS`` feed replay, the rest are held out to
measure forgetting as the mean per-token NLL of the base model's answers under a model (lower is
closer to the base model; its rise after training is the forgetting).
"""

from __future__ import annotations

import hashlib
import json
import random
from importlib import resources
from pathlib import Path

from trajforge.train.data import Sample

REPLAY_PROMPTS = 80


def general_prompts() -> tuple[list[str], list[str]]:
    """(replay prompts, held-out prompts) shipped with trajforge."""
    data = json.loads(resources.files("trajforge.train").joinpath("assets/general_prompts.json").read_text())
    prompts = data["prompts"]
    return prompts[:REPLAY_PROMPTS], prompts[REPLAY_PROMPTS:]


def render_answer(tokenizer, prompt: str, answer_ids: list[int]) -> Sample:
    """A one-turn chat sample: the prompt (no loss) then the answer + end-of-turn (loss)."""
    text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                         add_generation_prompt=True)
    prefix = tokenizer(text, add_special_tokens=False)["input_ids"]
    answer = list(answer_ids)
    if not answer or answer[-1] != tokenizer.eos_token_id:
        answer.append(tokenizer.eos_token_id)
    return Sample(prefix + answer, [0] * len(prefix) + [1] * len(answer))


def self_distill(net, tokenizer, prompts: list[str], max_new_tokens: int = 96,
                 batch_size: int = 16) -> list[Sample]:
    """The model's own greedy answers to ``prompts``, as training samples."""
    import torch

    samples = []
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    for i in range(0, len(prompts), batch_size):
        chunk = prompts[i: i + batch_size]
        texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                               add_generation_prompt=True) for p in chunk]
        enc = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        width = max(map(len, enc))
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in enc], device=net.device)
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc], device=net.device)
        with torch.no_grad():
            out = net.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                               do_sample=False, pad_token_id=pad, eos_token_id=eos)
        for prompt, row in zip(chunk, out[:, width:].tolist()):
            answer = row[: row.index(eos) + 1] if eos in row else row
            samples.append(render_answer(tokenizer, prompt, answer))
    return samples


def cached_replay(model_path: str, net, tokenizer, prompts: list[str], cache_dir: str | Path,
                  max_new_tokens: int = 96, lineage: list[str] | None = None) -> list[Sample]:
    """``self_distill`` cached on disk by (model path, adapters merged into it, prompts, length):
    it costs a minute on CPU."""
    key = hashlib.sha256(json.dumps([str(model_path), *(lineage or []), prompts, max_new_tokens])
                         .encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"replay-{key}.jsonl"
    if path.exists():
        return [Sample(*json.loads(line)) for line in path.read_text().splitlines() if line]
    samples = self_distill(net, tokenizer, prompts, max_new_tokens)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps([s.input_ids, s.loss_mask]) + "\n" for s in samples))
    tmp.replace(path)
    return samples


def starting_model_replay(net, tokenizer, model_path: str, init_adapter: str | None = None) -> list[Sample]:
    """Replay samples from the model training starts from: ``net`` (a peft model) with its new
    adapter disabled, i.e. the base with ``init_adapter``'s lineage merged. Reusing the training
    model instead of loading a second copy keeps a 7B run to one set of weights on the GPU."""
    from trajforge.policies.models import home

    lineage = []
    if init_adapter:
        from trajforge.policies.hf import adapter_lineage

        lineage = [str(Path(a).resolve()) for a in adapter_lineage(init_adapter)]
    with net.disable_adapter():
        net.eval()
        return cached_replay(model_path, net, tokenizer, general_prompts()[0], home() / "replay",
                             lineage=lineage)


def mix_replay(replay: list[Sample], n_task: int, share: float, seed: int) -> list[Sample]:
    """Replay samples to add to ``n_task`` task samples so they make up ``share`` of the mix."""
    if not replay or share <= 0:
        return []
    if not 0 < share < 1:
        raise ValueError(f"replay share must be in [0, 1), got {share}")
    return draw_replay(replay, round(n_task * share / (1 - share)), seed)


def draw_replay(replay: list[Sample], k: int, seed: int) -> list[Sample]:
    """``k`` replay samples drawn with replacement (the pool is small; reuse is expected)."""
    rng = random.Random(seed)
    return [replay[rng.randrange(len(replay))] for _ in range(k)] if replay else []


def answer_nll(net, samples: list[Sample], pad_id: int) -> float:
    """Mean per-token NLL of the samples' answer tokens under ``net`` (the forgetting measure)."""
    import torch

    from trajforge.train.losses import masked_lm_loss
    from trajforge.train.sequences import collate

    total, count = 0.0, 0
    with torch.no_grad():
        for s in samples:
            b = collate([s], pad_id, device=net.device, multiple=1)
            n = sum(s.loss_mask[1:])  # the first token has no predecessor in the window
            total += float(masked_lm_loss(net, b["input_ids"], b["attention_mask"], b["labels"],
                                          share_prefix=False)) * n
            count += n
    return total / max(1, count)
