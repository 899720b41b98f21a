"""GRPO on a tiny model: group advantages from graded rollouts, exact token ids, masks, golden
losses, and the whole loop with real sampling, curriculum and guided exploration."""

import json

import pytest
import torch

from tests.train.rollouts import TokenScripted
from trajforge.grade import graded
from trajforge.harness import run_episodes
from trajforge.train.grpo import (GRPOConfig, Packed, deciding_groups, drop_solved, grpo_loss, loss_tokens,
                                  micro_batches, micro_loss, pack_steps, rollout_batch, to_rollouts, train_grpo)
from trajforge.train.losses import IGNORE
from trajforge.train.loop import CallBatches, fit
from trajforge.train.model import lora_model


@pytest.fixture(scope="module")
def rollouts(tiny_model, sql_tasks):
    from trajforge.policies.hf import load_model

    net, tok = load_model(tiny_model)
    train = [t for t in sql_tasks if t.split == "train"][:4]
    return [graded(t) for t in run_episodes(train, TokenScripted(tiny_model, net, tok), samples=2)]


def test_group_relative_advantages_and_exact_tokens(rollouts):
    r = to_rollouts(rollouts)
    # each task: one success, one wrong answer → advantages +1 / -1, every group informative
    assert r.stats["groups"] == r.stats["informative_groups"] == r.stats["deciding_groups"] == 4
    # A group whose rollouts all fail decides nothing, whatever their rewards.
    failed = [t if not t.outcome.correct else t.model_copy(update={"outcome": t.outcome.model_copy(
        update={"tier": "failed", "fail_reason": "wrong_answer"})}) for t in rollouts]
    first = [t for t in rollouts if t.task_id == rollouts[0].task_id]
    assert deciding_groups(failed) == 0 and deciding_groups(first) == 1
    assert sorted(r.advantages) == pytest.approx([-1] * 4 + [1] * 4, abs=1e-5)
    # the loss tokens' split by advantage sign, counted from the trajectories' own completions
    down = sum(len(s.completion_ids) for t in rollouts if not t.outcome.correct for s in t.steps)
    every = sum(len(s.completion_ids) for t in rollouts for s in t.steps)
    assert r.stats["down_token_share"] == pytest.approx(down / every)
    assert r.stats["token_advantage_mean"] == pytest.approx((every - 2 * down) / every, abs=1e-5)
    # The template is prefix-stable: one sequence per rollout, ending in its last step's ids
    # verbatim, with one loss span per step over that step's sampled completion.
    assert len(r.sequences) == len(rollouts)
    for seq, t in zip(r.sequences, rollouts):
        last = t.steps[-1]
        assert seq.ids == last.prompt_ids + last.completion_ids
        assert [seq.ids[a:b] for a, b in seq.spans] == [s.completion_ids for s in t.steps]
        for (a, _), s in zip(seq.spans, t.steps):  # each completion sits after its own prompt
            assert seq.ids[:a] == s.prompt_ids


def test_packing_never_changes_a_completion_context(rollouts):
    """A step whose prompt is not a continuation of the previous one starts a new sequence."""
    t = rollouts[0].model_copy(deep=True)
    t.steps[1].prompt_ids = [7] + t.steps[1].prompt_ids  # as if re-tokenized differently
    packed = pack_steps(t)
    assert len(packed) == 2
    assert packed[0][0] == t.steps[0].prompt_ids + t.steps[0].completion_ids
    assert packed[1][0][:len(t.steps[1].prompt_ids)] == t.steps[1].prompt_ids


def test_packed_loss_equals_one_sequence_per_step(rollouts, tiny_model, monkeypatch):
    """Packing is exact: the same tokens in the same contexts give the same loss and gradient."""
    cfg = GRPOConfig(r=4, alpha=8, dropout=0.0, micro_batch=64, kl_beta=0.1, seed=0)
    net, tok = lora_model(tiny_model, cfg)
    torch.manual_seed(0)
    for p in net.parameters():
        if p.requires_grad:
            p.data.normal_(0, 0.05)  # non-zero B: the adapter matters
    packed = to_rollouts(rollouts)
    per_step = packed.model_copy(update={"sequences": [
        Packed(list(s.prompt_ids) + list(s.completion_ids),
               [(len(s.prompt_ids), len(s.prompt_ids) + len(s.completion_ids))], seq.rollout)
        for seq, t in zip(packed.sequences, rollouts) for s in t.steps]})
    grads = []
    for r in (packed, per_step):
        net.zero_grad()
        loss, _ = grpo_loss(net, r, tok.pad_token_id, cfg)
        grads.append((float(loss), torch.cat([p.grad.flatten() for p in net.parameters() if p.requires_grad])))
    # (At ratio 1 the surrogate's value is -mean(advantage) whatever the log-probs; the gradient
    # and the KL term are what depend on the contexts.)
    assert grads[0][0] == pytest.approx(grads[1][0], rel=1e-4)
    assert grads[0][1].abs().max() > 1e-4
    diff = (grads[0][1] - grads[1][1]).abs().max() / grads[1][1].abs().max()
    assert diff < 1e-3, diff


def test_groups_that_agree_carry_no_signal(rollouts):
    solved = [t for t in rollouts if t.outcome.correct]
    assert to_rollouts(solved).sequences == []


def test_env_fault_rollouts_are_never_negatives(rollouts):
    """A rollout the infrastructure ended (``env_fault``) neither trains as a negative nor moves its
    group's mean: the step is the one without it."""
    fault = rollouts[0].model_copy(update={
        "outcome": rollouts[0].outcome.model_copy(update={"tier": "env_fault", "fail_reason": "tool_timeout"}),
        "reward": rollouts[0].reward.model_copy(update={"total": -1.0})})
    with_fault, without = to_rollouts(rollouts + [fault]), to_rollouts(rollouts)
    assert with_fault.advantages == without.advantages and with_fault.sequences == without.sequences
    assert with_fault.stats["groups"] == 4


def test_rollouts_whose_grading_raised_are_never_negatives(rollouts):
    """``grade_error`` rollouts are stored failed with reward 0, though their answer may have been
    right: like env faults, they neither train nor move their group's mean."""
    from trajforge.harness.faults import GRADE_ERROR

    broken = rollouts[0].model_copy(update={
        "outcome": rollouts[0].outcome.model_copy(update={"tier": "failed", "correct": False,
                                                          "fail_reason": GRADE_ERROR}),
        "reward": rollouts[0].reward.model_copy(update={"total": 0.0})})
    with_broken, without = to_rollouts(rollouts + [broken]), to_rollouts(rollouts)
    assert with_broken.advantages == without.advantages and with_broken.sequences == without.sequences


def test_drop_solved_keeps_tasks_with_signal_or_no_measurement(rollouts, sql_tasks):
    train = [t for t in sql_tasks if t.split == "train"]
    ids = sorted({t.task_id for t in rollouts})
    solved_twice = [t.model_copy(update={"task_id": ids[0]}) for t in rollouts if t.outcome.correct][:2]
    measured = [t for t in rollouts if t.task_id != ids[0]] + solved_twice
    kept, dropped = drop_solved(train, measured)
    assert dropped == 1 and ids[0] not in {t.id for t in kept}
    assert set(ids[1:]) <= {t.id for t in kept} and len(kept) == len(train) - 1  # unmeasured stay


def test_prompt_and_tool_result_tokens_never_reach_the_loss(rollouts, tiny_model):
    net, tok = lora_model(tiny_model, GRPOConfig(r=4, alpha=8))
    r = to_rollouts(rollouts)
    ids, att, labels = rollout_batch(r.sequences, tok.pad_token_id)
    for row, seq in zip(labels.tolist(), r.sequences):
        inside = {i for a, b in seq.spans for i in range(a, b)}
        for i, (label, token) in enumerate(zip(row, seq.ids)):  # prompts and every tool result
            assert label == (token if i in inside else IGNORE)
        tool_results = [a for a in range(len(seq.ids)) if a not in inside]
        assert "<tool_response>" in tok.decode([seq.ids[i] for i in tool_results])
    rows = []
    hook = net.get_base_model().lm_head.register_forward_hook(lambda m, i, o: rows.append(i[0].shape[0]))
    grpo_loss(net, r, tok.pad_token_id, GRPOConfig(micro_batch=64), backward=False)
    hook.remove()
    assert sum(rows) == sum(loss_tokens(seq) for seq in r.sequences)  # completion tokens only


# Recorded in fp32 with packed rollouts (one sequence per rollout). The pre-accelerate loop gave
# [-0.0102529, -0.0100862, -0.0090944] on the same machine, which this matches to 1e-7 since the
# accumulation fix (accelerate's backward divides by the micro-batches; our losses are already
# shares of the step's total). Before it, gradients were half-scale and Adam's eps moved the third
# loss by 3e-6: the losses are a constant -mean(A) plus a small KL term, so that is ~3e-4 of it.
GOLDEN = [-0.010252876207232475, -0.010085733840242028, -0.009094363660551608]


@pytest.mark.parametrize("checkpointing", [False, True])
def test_grpo_updates_parameters_with_golden_losses(rollouts, tiny_model, tmp_path, checkpointing):
    cfg = GRPOConfig(r=4, alpha=8, dropout=0.0, lr=5e-2, micro_batch=4, kl_beta=0.1, seed=0,
                     gradient_checkpointing=checkpointing)
    net, tok = lora_model(tiny_model, cfg)
    before = {n: p.detach().clone() for n, p in net.named_parameters() if p.requires_grad}
    r = to_rollouts(rollouts)
    steps = CallBatches(lambda step: micro_batches(r, tok.pad_token_id, cfg, net.device))
    res = fit(net, 3, steps, lambda model, micro, totals: micro_loss(model, micro, totals, cfg, net), cfg,
              tmp_path, progress=False)
    assert res.losses == pytest.approx(GOLDEN, abs=2e-6)
    changed = [n for n, p in net.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert len(changed) == len(before)


def _completion_logp(net, traj) -> torch.Tensor:
    """Log-probability of every sampled completion of ``traj``, each in its own step's prompt: a
    plain forward pass, none of GRPO's packing, batching or masking."""
    total = torch.zeros(())
    for step in traj.steps:
        ids = torch.tensor([step.prompt_ids + step.completion_ids], device=net.device)
        logp = torch.log_softmax(net(input_ids=ids).logits[0, :-1].float(), -1)
        start = len(step.prompt_ids)
        picked = logp[start - 1:].gather(-1, ids[0, start:].unsqueeze(-1))
        total = total + picked.sum()
    return total


def test_an_update_moves_probability_from_failed_rollouts_to_successful_ones(rollouts, tiny_model, tmp_path):
    """The update's direction, measured outside the loss code. Each task here has one success and
    one wrong answer (advantages +1 / -1), so the step's loss is -(1/N)·M with M = Σ log p(success)
    - Σ log p(failure) over the tasks' completions: a small step down the loss must raise M (first
    order: by lr·|∇M|·const > 0 for Adam's first steps). A flipped sign, or advantages handed to the
    wrong rollout in packing or batching, lowers it."""
    cfg = GRPOConfig(r=4, alpha=8, dropout=0.0, lr=1e-3, micro_batch=3, kl_beta=0.0, seed=0)
    net, tok = lora_model(tiny_model, cfg)
    assert sorted(t.outcome.correct for t in rollouts) == [False] * 4 + [True] * 4

    def margin() -> float:
        with torch.no_grad():
            return sum((1 if t.outcome.correct else -1) * float(_completion_logp(net, t)) for t in rollouts)

    before = margin()
    r = to_rollouts(rollouts)
    steps = CallBatches(lambda step: micro_batches(r, tok.pad_token_id, cfg, net.device))
    fit(net, 2, steps, lambda model, micro, totals: micro_loss(model, micro, totals, cfg, net), cfg, tmp_path,
        progress=False)
    after = margin()
    assert after > before + 1e-3, (before, after)


@pytest.mark.parametrize("norm", ["token", "sequence"])
def test_loss_norm_weighs_rollouts_by_length_or_alike(rollouts, tiny_model, norm):
    """The step's gradient against one computed from plain per-rollout forward passes: ``token``
    is Σ_r A_r·Σ_t log p / (all loss tokens) — a rollout weighs by its length —, ``sequence`` is
    the mean over rollouts of A_r·(mean of its log p), every rollout alike. Micro-batches of 3
    split rollouts apart, so the shares must add up across them."""
    cfg = GRPOConfig(r=4, alpha=8, dropout=0.0, micro_batch=3, kl_beta=0.0, loss_norm=norm)
    net, tok = lora_model(tiny_model, cfg)
    params = {n: p for n, p in net.named_parameters() if p.requires_grad}
    r = to_rollouts(rollouts)
    assert len(r.advantages) == len(rollouts)  # every group has signal: advantages follow the rollouts
    loss, _ = grpo_loss(net, r, tok.pad_token_id, cfg)
    got = {n: p.grad.clone() for n, p in params.items()}
    net.zero_grad(set_to_none=True)
    lengths = [sum(len(s.completion_ids) for s in t.steps) for t in rollouts]
    if norm == "token":
        weights, expected = [1 / sum(lengths)] * len(rollouts), -r.stats["token_advantage_mean"]
    else:
        weights, expected = [1 / (n * len(rollouts)) for n in lengths], -sum(r.advantages) / len(rollouts)
    assert float(loss) == pytest.approx(expected, abs=1e-5)  # ratio 1: the loss is −(weighted mean of A)
    reference = sum(-a * w * _completion_logp(net, t) for t, a, w in zip(rollouts, r.advantages, weights))
    reference.backward()
    for n, p in params.items():
        assert torch.allclose(got[n], p.grad, rtol=1e-3, atol=1e-7), n
    if norm == "sequence":  # unequal lengths: the two norms really differ here
        assert len(set(lengths)) > 1


def test_later_updates_on_the_same_rollouts_use_the_sampling_policy_as_old(rollouts, tiny_model):
    """``updates_per_batch`` > 1 hands the same cached micro-batch to each update. The first update
    has ratio 1; a later one, after the weights moved, has ratio π_θ/π_old with π_old the weights
    that sampled the rollouts, clipped as PPO's surrogate (it used to re-detach: ratio 1, no clip)."""
    from trajforge.train.losses import policy_gradient_loss, token_logprobs

    cfg = GRPOConfig(r=4, alpha=8, dropout=0.0, micro_batch=64, kl_beta=0.0, updates_per_batch=2)
    net, tok = lora_model(tiny_model, cfg)
    micro = micro_batches(to_rollouts(rollouts), tok.pad_token_id, cfg, net.device)[0]
    totals = dict(micro["counts"])
    call = lambda fn, *a: fn(net, *a)  # noqa: E731
    args = (micro["input_ids"], micro["attention_mask"], micro["labels"], False)
    with torch.no_grad():
        old = token_logprobs(net, *args)
    first, stats = micro_loss(call, micro, totals, cfg, net, share=False)
    assert stats["clipped"] == 0
    torch.manual_seed(0)
    with torch.no_grad():
        for n, p in net.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.3)  # an optimizer step's worth of change, and then some
        new = token_logprobs(net, *args)
    second, stats = micro_loss(call, micro, totals, cfg, net, share=False)
    mask = micro["labels"][:, 1:] != IGNORE
    expected, _ = policy_gradient_loss(new, old, micro["advantages"], mask, cfg.clip,
                                       denom=torch.tensor(totals["tokens"]))
    assert float(second) == pytest.approx(float(expected), rel=1e-4)
    assert float(second) != pytest.approx(float(first), abs=1e-4) and stats["clipped"] > 0


def test_a_process_without_signal_runs_a_pass_with_no_gradient(tiny_model):
    """``null_micro``: its gradient is exactly 0, the KL term included (a KL on its pad token moved
    the adapter on steps where every group agreed)."""
    from trajforge.train.grpo import null_micro

    cfg = GRPOConfig(r=4, alpha=8, dropout=0.0, kl_beta=0.5)
    net, tok = lora_model(tiny_model, cfg)
    torch.manual_seed(0)
    with torch.no_grad():
        for n, p in net.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.3)  # the policy has moved off the reference
    micro = null_micro(5, net.device)  # a real token: the tiny model's pad embedding is zero
    loss, _ = micro_loss(lambda fn, *a: fn(net, *a), micro, {"tokens": 0.0, "rollouts": 0.0}, cfg, net)
    loss.backward()
    grads = [p.grad for p in net.parameters() if p.requires_grad]
    assert float(loss) == 0 and all(g is not None for g in grads)  # the pass reaches the adapter
    assert all(float(g.abs().max()) == 0 for g in grads)


def test_train_grpo_end_to_end_with_sampling(tiny_model, sql_tasks, tmp_path):
    train = [t for t in sql_tasks if t.split == "train"]
    cfg = GRPOConfig(r=4, alpha=8, steps=2, batch_size=2, group_size=3, max_turns=2, max_new_tokens=16,
                     guided=True, seed=1)
    res = train_grpo(train, tiny_model, tmp_path / "grpo", cfg, progress=False)
    assert res.steps == 2 and len(res.rewards) == 2
    assert res.rescue["episodes"] == 12 and res.rescue["rescued"] > 0  # random model: always failing
    # 12 rollouts of ≤ 2 turns × 16 new tokens; trained tokens only from groups whose rewards differ
    assert 0 < res.sampled_tokens <= 12 * 2 * 16
    rows = [json.loads(x) for x in (tmp_path / "grpo" / "curves.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all("reward" in r and "groups" in r for r in rows)
    assert (res.trained_tokens > 0) == any(r["informative_groups"] for r in rows)
    meta = json.loads((tmp_path / "grpo" / "trajforge_adapter.json").read_text())
    assert meta["recipe"] == "grpo" and meta["toolset_fingerprint"]


def test_grpo_rolls_out_on_a_server_with_the_current_adapter(tiny_model, sql_tasks, tmp_path, monkeypatch):
    """--rollout-server: each step the live policy (init lineage + the adapter in training,
    stacked into one LoRA) is loaded into a real loopback ``trajforge serve`` through vLLM's
    runtime LoRA API, and the rollouts carry the token ids the server sampled."""
    import httpx

    import trajforge.train.grpo as grpo_mod
    from tests.tiny import build_tiny_adapter
    from trajforge.serve import start_server

    from transformers import AutoTokenizer

    init = build_tiny_adapter(tiny_model, tmp_path / "sft", seed=1)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(init)  # as train sft writes it
    seen = []
    real = grpo_mod.collect_rollouts

    def spy(*args, **kwargs):
        trajs = real(*args, **kwargs)
        models = {m["id"] for m in httpx.get(f"{srv.url}/models").json()["data"]}
        seen.append((kwargs["served"], models, trajs))
        return trajs

    monkeypatch.setattr(grpo_mod, "collect_rollouts", spy)
    train = [t for t in sql_tasks if t.split == "train"]
    with start_server(tiny_model, allow_adapter_updates=True) as srv:
        cfg = GRPOConfig(r=4, alpha=8, steps=2, batch_size=2, group_size=2, max_turns=2, max_new_tokens=12,
                         temperature=1.0, rollout_server=srv.url, seed=1, tis_cap=2.0)
        res = train_grpo(train, tiny_model, tmp_path / "grpo", cfg, init_adapter=str(init), progress=False)
        after = {m["id"] for m in httpx.get(f"{srv.url}/models").json()["data"]}
    assert res.steps == 2 and [s for s, _, _ in seen] == ["grpo-step-0", "grpo-step-1"]
    for name, models, trajs in seen:
        assert models == {tiny_model, name}  # the previous step's adapter was unloaded
        assert len(trajs) == 4
        for t in trajs:
            assert all(s.prompt_ids and s.completion_ids and s.completion_logprobs for s in t.steps)
    assert after == {tiny_model}  # nothing left behind on the server
    folder = tmp_path / "grpo" / "rollout-adapters" / "step-0"
    from trajforge.train.lora_stack import read_lora

    tensors, scale, cfg_json = read_lora(folder)
    assert cfg_json["r"] == 4 + 4 and scale == 1.0  # the SFT adapter's rank + the live one's
    meta = json.loads((tmp_path / "grpo" / "trajforge_adapter.json").read_text())
    assert meta["dialect"] == "hermes"  # what the model writes, not the wire format
    # Truncated importance sampling reads the server's log-probs aligned with the trainer's: step 0
    # was sampled from the SFT lineage alone (the new LoRA starts at zero), so the trainer's fp32
    # log-probs of the packed sequences under that model match what the server reported.
    from trajforge.policies.hf import load_model
    from trajforge.train.losses import token_logprobs

    trajs = [t.model_copy(update={"reward": t.reward.model_copy(update={"total": float(i % 2)})})
             for i, t in enumerate(seen[0][2])]  # rewards that differ, so every group is informative
    micro = micro_batches(to_rollouts(trajs), 0, cfg.model_copy(update={"micro_batch": 64}))
    served, _ = load_model(tiny_model, str(init), dtype="float32")
    m = micro[0]
    mask = m["labels"][:, 1:] != IGNORE
    with torch.no_grad():
        logp = token_logprobs(served, m["input_ids"], m["attention_mask"], m["labels"])
    assert m["behaviour"] is not None and mask.sum() > 0
    torch.testing.assert_close(m["behaviour"][mask], logp[mask], atol=1e-3, rtol=1e-3)


def test_a_batchs_groups_are_logged_once_whatever_its_updates(rollouts, tiny_model, sql_tasks, tmp_path,
                                                              monkeypatch):
    """``updates_per_batch`` = 2 trains twice on each rollout batch: its group counts were logged
    with each update, so the doctor read twice the groups there were."""
    import trajforge.train.grpo as grpo_mod

    train = [t for t in sql_tasks if t.split == "train"][:4]
    monkeypatch.setattr(grpo_mod, "collect_rollouts", lambda net, tok, model, mine, cfg, **kw: [
        t for t in rollouts if t.task_id in {task.id for task in mine}])
    cfg = GRPOConfig(r=4, alpha=8, steps=4, batch_size=2, group_size=2, updates_per_batch=2, curriculum=False,
                     seed=1)
    res = train_grpo(train, tiny_model, tmp_path / "grpo", cfg, progress=False)
    assert res.steps == 4 and len(res.rewards) == 2
    rows = [json.loads(x) for x in (tmp_path / "grpo" / "curves.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and all("reward" in r for r in rows)
    assert [r.get("groups") for r in rows] == [2, None, 2, None]
    assert [r.get("informative_groups") for r in rows] == [2, None, 2, None]


class _Killed(Exception):
    pass


def _short_rollout(task, sample: int):
    """A graded one-turn rollout of a few tokens (even samples solved, odd failed): the model's
    rollouts, scripted (the model boundary is the one place tests replace)."""
    from trajforge.schema.trajectory import Outcome, RewardBreakdown, Step, Trajectory

    solved = sample % 2 == 0
    return Trajectory(task_id=task.id, sample=sample, policy="scripted", env=task.env, toolset_fingerprint="fp",
                      dialect="hermes", tier=task.tier,
                      steps=[Step(index=0, raw="", prompt_ids=[5, 6, 7], completion_ids=[8 + sample, 9])],
                      outcome=Outcome(tier="success" if solved else "failed",
                                      fail_reason=None if solved else "wrong_answer"),
                      reward=RewardBreakdown(completion=float(solved), step=0.0, efficiency=0.0, violation=0.0,
                                             weights=(1.0, 0.0, 0.0, 0.0), total=float(solved)))


@pytest.mark.parametrize("curriculum,updates,every,die_at", [(True, 1, 2, 5), (False, 2, 3, 2)])
def test_a_resumed_run_draws_the_tasks_of_an_uninterrupted_one(tiny_model, sql_tasks, tmp_path, monkeypatch,
                                                                curriculum, updates, every, die_at):
    """The task draws (uniform, or the curriculum's: its own RNG, unlocked tier and recent results)
    live outside the python/torch RNG a checkpoint restores: a resume drew from a fresh
    ``random.Random(seed)`` at the start tier, so steps k.. rolled out other tasks than an
    uninterrupted run. ``collect_rollouts`` (the model boundary) is scripted: one solved and one
    failed rollout per task, so the curriculum unlocks ``medium`` after 16 rollouts, before the
    checkpoint. With
    ``updates_per_batch`` = 2 the checkpoint at step 3 falls inside rollout batch 1: the resume
    rolls that batch out again, on the same tasks."""
    import trajforge.train.grpo as grpo_mod

    train = [t for t in sql_tasks if t.split == "train"]
    assert {"easy", "medium"} <= {t.tier for t in train}

    def run(out, die_at=None):
        drawn = []

        def scripted_rollouts(net, tok, model, mine, cfg, seed, **kw):
            if len(drawn) == die_at:
                raise _Killed
            drawn.append(([t.id for t in mine], seed))
            return [_short_rollout(t, i) for t in mine for i in range(cfg.group_size)]

        monkeypatch.setattr(grpo_mod, "collect_rollouts", scripted_rollouts)
        cfg = GRPOConfig(r=4, alpha=8, steps=6, batch_size=2, group_size=2, curriculum=curriculum, promote_at=0.5,
                         updates_per_batch=updates, checkpoint_every=every, seed=1)
        try:
            return drawn, train_grpo(train, tiny_model, out, cfg, progress=False, resume=True)
        except _Killed:
            return drawn, None

    killed, _ = run(tmp_path / "a", die_at=die_at)
    resumed, res = run(tmp_path / "a")
    straight, full = run(tmp_path / "b")
    batches = 6 // updates
    assert res.resumed_from == every * (die_at * updates // every) and len(straight) == batches
    assert killed == straight[:die_at]
    assert resumed == straight[res.resumed_from // updates:]  # the same tasks, sampled with the same seeds
    if curriculum:
        assert full.curriculum == res.curriculum == [(3, "medium")]
    assert res.rewards == pytest.approx(full.rewards) and len(full.rewards) == batches
