"""Shared-prefix speedups, measured side by side in one run (these machines are noisy).

    .venv/bin/python benchmarks/shared_prefix.py [--model smollm2-135m] [--reps 3]

Builds real SQL expert trajectories, renders a batch of 8 samples with the inference-time chat
template, and times (1) one SFT step (loss + backward) with and without the shared-prefix KV cache,
and (2) one batched generation turn (prefill + 32 tokens) with and without the shared prefix.
Alternates the two variants rep by rep and prints medians and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trajforge.envs import env_class, make_env
    from trajforge.harness import HarnessConfig, run_episodes
    from trajforge.harness.loop import Episode
    from trajforge.policies.expert import ExpertPolicy
    from trajforge.policies.hf import HFPolicy, load_model
    from trajforge.policies.models import default_dtype, resolve
    from trajforge.tasks import synthesize
    from trajforge.train.data import render_sample
    from trajforge.train.losses import masked_lm_loss
    from trajforge.train.sft import collate

    tasks = [t for t in synthesize("sql", 120, 0).tasks if t.split == "train"][:8]
    trajs = run_episodes(tasks, ExpertPolicy())
    net, tok = load_model(args.model)
    toolset = env_class("sql").toolset()
    rows = [render_sample(t, tok, toolset)._asdict() for t in trajs]
    inputs = collate(rows, tok.pad_token_id)
    tokens = int(inputs["attention_mask"].sum())

    dtype = default_dtype()
    base = AutoModelForCausalLM.from_pretrained(resolve(args.model), dtype=dtype)
    lora = get_peft_model(base, LoraConfig(r=32, lora_alpha=64, lora_dropout=0.05, task_type="CAUSAL_LM",
                                           target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))

    def sft_step(share: bool) -> float:
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            loss = masked_lm_loss(lora, inputs["input_ids"], inputs["attention_mask"], inputs["labels"], share)
        loss.backward()
        lora.zero_grad()
        return time.perf_counter() - t0

    policy = {s: HFPolicy(args.model, max_new_tokens=32, share_prefix=s, loaded=(net, tok)) for s in (False, True)}
    reqs = []
    for t in tasks:
        env = make_env("sql")
        env.reset(t)
        reqs.append(Episode(t, 0, env, policy[True], HarnessConfig()).request())

    def gen_turn(share: bool) -> float:
        t0 = time.perf_counter()
        policy[share].act(reqs)
        return time.perf_counter() - t0

    print(f"model {args.model}, dtype {dtype}, batch 8, {tokens} real tokens, "
          f"shared prefix {int((inputs['input_ids'] == inputs['input_ids'][:1]).all(0).long().cumprod(0).sum())} tokens")
    for label, fn in (("sft step (loss+backward)", sft_step), ("generation turn (prefill+32 tok)", gen_turn)):
        times = {False: [], True: []}
        fn(True)  # warm-up
        for _ in range(args.reps):
            for share in (False, True):
                times[share].append(fn(share))
        plain, shared = statistics.median(times[False]), statistics.median(times[True])
        print(f"{label:34s} plain {plain:6.2f}s  shared-prefix {shared:6.2f}s  speedup x{plain / shared:.2f}")


if __name__ == "__main__":
    main()
