"""DPO on a tiny model: pairs from graded episodes, masks, golden losses, parameters move."""

import pytest
import torch

from tests.train.rollouts import TokenScripted
from trajforge.grade import graded
from trajforge.harness import run_episodes
from trajforge.train.dpo import (DPOConfig, build_pairs, first_divergence, on_policy_pool, render_pair,
                                 train_dpo)
from trajforge.train.trainer import lora_model


@pytest.fixture(scope="module")
def episodes(tiny_model, sql_tasks):
    from trajforge.policies.hf import load_model

    net, tok = load_model(tiny_model)
    train = [t for t in sql_tasks if t.split == "train"][:6]
    return [graded(t) for t in run_episodes(train, TokenScripted(tiny_model, net, tok), samples=2)]


def test_pairs_prefer_success_and_skip_env_faults(episodes):
    assert {t.outcome.correct for t in episodes} == {True, False}
    faulty = episodes[0].model_copy(update={"outcome": episodes[0].outcome.model_copy(update={"tier": "env_fault"})})
    pairs, skipped = build_pairs(episodes + [faulty])
    assert skipped == {"env_fault": 1}
    assert len(pairs) == 6 and all(p.chosen.outcome.correct and not p.rejected.outcome.correct for p in pairs)
    assert all(p.chosen.task_id == p.rejected.task_id for p in pairs)
    turn_pairs, _ = build_pairs(episodes, mode="turn")
    for p in turn_pairs:  # the two differ only in the final submit
        assert p.turn == first_divergence(p.chosen, p.rejected) == len(p.chosen.steps) - 1


def test_an_episode_whose_grading_raised_is_never_a_rejected(episodes):
    """failed/grade_error says the grader raised, not that the answer was wrong: no pair uses it."""
    ungradable = [t.model_copy(update={"outcome": t.outcome.model_copy(update={"tier": "failed",
                                                                               "fail_reason": "grade_error"})})
                  for t in episodes if t.outcome.correct]
    pairs, skipped = build_pairs(episodes + ungradable)
    assert skipped == {"grade_error": len(ungradable)} and len(pairs) == 6
    assert not any(p.rejected.outcome.fail_reason == "grade_error" for p in pairs)


def test_turns_without_raw_text_diverge_where_their_calls_do(episodes):
    """An imported turn or a native call has no raw text: it is its calls, and the text around
    them may be the same in both (here: the same reasoning, another answer)."""
    def unraw(t):
        return t.model_copy(update={"messages": [m.model_copy(update={"raw": None}) for m in t.messages]})

    pairs, _ = build_pairs(episodes, mode="turn")
    assert pairs
    for p in pairs:
        assert first_divergence(unraw(p.chosen), unraw(p.rejected)) == p.turn
        # the same turns with and without their raw text render alike: no divergence
        assert first_divergence(p.chosen, unraw(p.chosen)) is None


def test_on_policy_pool_adds_the_expert_only_where_the_policy_never_succeeded(episodes, expert_trajs):
    failed = [t for t in episodes if not t.outcome.correct]
    first = episodes[0].task_id
    samples = [t for t in episodes if t.task_id == first] + [t for t in failed if t.task_id != first]
    pool = on_policy_pool(samples, expert_trajs)
    added = pool[len(samples):]
    assert pool[:len(samples)] == samples
    # every task the samples never solved gets its expert success; the solved one and tasks
    # that were never sampled get none
    assert sorted(t.task_id for t in added) == sorted({t.task_id for t in failed} - {first})
    assert all(t.policy == "expert" and t.outcome.correct for t in added)
    pairs, _ = build_pairs(pool)
    assert {p.chosen.policy for p in pairs if p.task_id == first} == {samples[0].policy}


def test_turn_pairs_put_loss_on_the_diverging_turn_only(episodes, tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    pair = build_pairs(episodes, mode="turn")[0][0]
    chosen, rejected = render_pair(pair, tok)
    # context identical up to the diverging turn; loss tokens are exactly that turn's completion
    ids_c = chosen.input_ids
    first = chosen.loss_mask.index(1)
    assert ids_c[:first] == rejected.input_ids[:first]
    assert chosen.loss_mask[first:] == [1] * (len(ids_c) - first)
    assert tok.decode(ids_c[first:]).count("submit_answer") == 1
    whole, _ = render_pair(pair._replace(turn=None), tok)
    assert sum(whole.loss_mask) > sum(chosen.loss_mask)


def test_lm_head_sees_only_assistant_tokens(episodes, tiny_model):
    """Prompts and tool results never reach the LM head, so they carry no loss and no gradient."""
    from trajforge.train.dpo import _logps

    net, tok = lora_model(tiny_model, DPOConfig(r=4, alpha=8))
    chosen, rejected = render_pair(build_pairs(episodes)[0][0], tok)
    rows = []
    hook = net.get_base_model().lm_head.register_forward_hook(lambda m, i, o: rows.append(i[0].shape[0]))
    _logps(net, [chosen, rejected], tok.pad_token_id)
    hook.remove()
    # position t predicts token t+1: the first token of a sample is never a target
    assert rows == [sum(chosen.loss_mask[1:]) + sum(rejected.loss_mask[1:])]


# fp32; the pre-accelerate loop gave [0.693147, 0.635961, 0.480468] on the same machine.
GOLDEN = [0.6931471824645996, 0.6359683275222778, 0.48047953844070435]


def test_dpo_trains_and_matches_golden_losses(episodes, tiny_model, tmp_path):
    cfg = DPOConfig(r=4, alpha=8, dropout=0.0, lr=5e-2, beta=0.5, batch_size=2, grad_accum=1, max_steps=3,
                    seed=0, replay_share=0.0)
    torch.manual_seed(0)
    res = train_dpo(episodes, tiny_model, tmp_path / "dpo", cfg, progress=False)
    assert res.pairs == 6 and res.steps == 3
    assert res.losses == pytest.approx(GOLDEN, rel=1e-4)
    assert res.losses[0] == pytest.approx(0.693147, abs=1e-4)  # log 2: policy == reference at start
    assert res.margins[-1] > 0
    # 3 steps of 2 pairs went over each of the 6 pairs once: tokens counts both sides of each
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    sides = [render_pair(p, tok) for p in build_pairs(episodes)[0]]
    assert res.tokens == sum(len(c.input_ids) + len(r.input_ids) for c, r in sides)
    from safetensors.torch import load_file
    from trajforge.train.trainer import LoraSettings

    trained = load_file(str(tmp_path / "dpo" / "adapter_model.safetensors"))
    init, _ = lora_model(tiny_model, LoraSettings(r=4, alpha=8, dropout=0.0, seed=0))
    from peft import get_peft_model_state_dict

    before = get_peft_model_state_dict(init)
    assert [k for k in trained if torch.equal(trained[k], before[k])] == []


class _Crash(Exception):
    pass


class _CrashAt:
    """An evaluator whose hook dies after step ``at``, before that step's checkpoint."""

    def __init__(self, at: int):
        self.at = at

    def hook(self, net, tok):
        def on_step(step):
            if step == self.at:
                raise _Crash
        return on_step


def test_a_resumed_dpo_run_counts_the_tokens_of_every_step(episodes, tiny_model, tmp_path):
    """``tokens`` counted only the steps after the resume (and, with ``max_steps``, steps past the
    run's end): a crashed-and-resumed run reports what an uninterrupted one does."""
    cfg = DPOConfig(r=4, alpha=8, dropout=0.0, lr=5e-2, beta=0.5, batch_size=2, grad_accum=1, max_steps=3,
                    seed=0, replay_share=0.0, checkpoint_every=1)
    with pytest.raises(_Crash):
        train_dpo(episodes, tiny_model, tmp_path / "a", cfg, progress=False, evaluator=_CrashAt(2))
    resumed = train_dpo(episodes, tiny_model, tmp_path / "a", cfg, progress=False, resume=True)
    straight = train_dpo(episodes, tiny_model, tmp_path / "b", cfg, progress=False)
    assert resumed.resumed_from == 1 and resumed.steps == straight.steps == 3
    assert resumed.tokens == straight.tokens > 0


def test_dpo_tokens_count_every_processs_pairs():
    """Under N processes each takes its share of a step's micro-batches (``pair_steps``); the
    result counts them all, as SFT's does, not the main process's share."""
    from trajforge.train.dpo import pair_steps, trained_tokens
    from trajforge.train.sequences import Sample

    rendered = [(Sample([1] * (i + 1), [1] * (i + 1)), Sample([1] * 10 * (i + 1), [1] * 10 * (i + 1)))
                for i in range(11)]
    cfg = DPOConfig(batch_size=2, grad_accum=2, epochs=2.0, seed=3)
    for world in (1, 2, 3):
        per_rank = [pair_steps(len(rendered), cfg, world, r) for r in range(world)]
        for ran in range(len(per_rank[0]) + 1):
            used = [i for steps in per_rank for step in steps[:ran] for idx in step for i in idx]
            want = sum(len(rendered[i][0].input_ids) + len(rendered[i][1].input_ids) for i in used)
            assert trained_tokens(rendered, cfg, world, ran) == want, (world, ran)
