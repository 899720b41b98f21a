"""The mask rule and the quality pools in training: SFT learns a repair episode's recovery and
never its mistake; recovered episodes train with failed turns masked; repaired raw text trains in
canonical form; DPO's recovered chosen masks its mistake; the curriculum draws on partial tasks."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from trajforge.grade import graded
from trajforge.harness import run_episodes
from trajforge.policies.repair import RepairPolicy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.tasks.repair import Planner
from trajforge.train.curriculum import Curriculum
from trajforge.train.dpo import Pair, build_pairs, render_pair
from trajforge.train.sequences import SequenceBuilder, turn_learns
from trajforge.train.sft import SFTConfig, build_samples, select


@pytest.fixture(scope="module")
def tok(tiny_model):
    return AutoTokenizer.from_pretrained(tiny_model)


@pytest.fixture(scope="module")
def train_tasks(sql_tasks):
    return [t for t in sql_tasks if t.split == "train"]


@pytest.fixture(scope="module")
def repairs(train_tasks):
    """Three repair episodes per task of the first six (malformed, wrong column, ...)."""
    return [graded(t) for t in run_episodes(train_tasks[:6], RepairPolicy(Planner(train_tasks)), samples=3)]


def learned_text(tok, sample) -> str:
    return tok.decode([t for t, m in zip(sample.input_ids, sample.loss_mask) if m], skip_special_tokens=False)


def turn_span(tok, traj, turn: int) -> list[int]:
    """Positions of assistant turn ``turn``'s tokens (its text and end-of-turn token) in the
    trajectory's sample: rendering is prefix-stable, so the sample with loss on that turn alone
    marks them."""
    alone = SequenceBuilder(tok, None).build(traj, only_turn=turn)[0]
    return [i for i, m in enumerate(alone.loss_mask) if m]


def test_sft_sample_masks_every_mistaken_token_and_trains_the_recovery(repairs, tok, tiny_model):
    data, _ = select(repairs, SFTConfig(tiers=["success,recovered"]))
    assert data and all(t.outcome.tier == "recovered" for t in data if any(s.mistake for s in t.steps))
    samples, _ = build_samples(data, tok, tiny_model, SFTConfig(tiers=["success", "recovered"], max_len=4096), {})
    checked = 0
    for traj, sample in zip(data, samples):
        if not any(s.mistake for s in traj.steps):
            continue
        for step in traj.steps:
            span = turn_span(tok, traj, step.index)
            assert tok.decode([sample.input_ids[i] for i in span]) == step.raw + tok.eos_token
            want = 0 if step.mistake else 1  # the mistake never trains; the recovery and the rest do
            assert {sample.loss_mask[i] for i in span} == {want}, (step.index, step.mistake)
        learned = {i for i, m in enumerate(sample.loss_mask) if m}
        assert learned == {i for s in traj.steps if not s.mistake for i in turn_span(tok, traj, s.index)}
        checked += 1
    assert checked >= 12


def test_recovered_episodes_mask_their_failed_turns_unless_marked(train_tasks, tok):
    task = next(t for t in train_tasks if t.template == "customers_in_city")
    bad = '<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT COUNT(*) FROM customer"}}\n</tool_call>'
    good = [ExpertText(task, i) for i in range(len(task.reference))]
    [traj] = [graded(t) for t in run_episodes([task], ScriptedPolicy([bad, *good], name="model"))]
    assert traj.outcome.tier == "recovered" and traj.steps[0].mistake is None
    assert [turn_learns(traj, i) for i in range(len(traj.steps))] == [False, True, True]
    sample = SequenceBuilder(tok, None, learn=turn_learns).build(traj)[0]
    assert bad not in learned_text(tok, sample) and good[0] in learned_text(tok, sample)
    marked = traj.model_copy(update={"steps": [traj.steps[0].model_copy(update={"train": True}), *traj.steps[1:]]})
    assert turn_learns(marked, 0)
    # a failed episode (a DPO rejected) keeps its errors: they are what is rejected
    failed = traj.model_copy(update={"outcome": traj.outcome.model_copy(update={"tier": "failed"})})
    assert turn_learns(failed, 0)
    # success episodes train every turn, as before
    [clean] = [graded(t) for t in run_episodes([task], ScriptedPolicy(good, name="model"))]
    assert clean.outcome.tier == "success" and all(turn_learns(clean, i) for i in range(len(clean.steps)))


def ExpertText(task, i: int) -> str:
    from trajforge.policies.expert import ExpertPolicy

    return ExpertPolicy().reference_turn(task, i).text


def test_repaired_raw_text_trains_in_canonical_form(train_tasks, tok, tiny_model):
    task = next(t for t in train_tasks if t.template == "customers_in_city")
    canonical = ExpertText(task, 0)
    sloppy = canonical.replace('"query"', 'query', 1)  # an unquoted key: json_repair fixes it
    [traj] = [graded(t) for t in run_episodes([task], ScriptedPolicy([sloppy, ExpertText(task, 1)], name="m"))]
    assert traj.outcome.tier == "success" and traj.steps[0].repairs and traj.steps[0].raw == sloppy
    skipped: dict[str, int] = {}
    [on], _ = build_samples([traj], tok, tiny_model, SFTConfig(max_len=4096), skipped)
    [off], _ = build_samples([traj], tok, tiny_model, SFTConfig(canonical=False, max_len=4096), skipped)
    call = canonical[canonical.index("<tool_call>"):]
    assert call in learned_text(tok, on) and sloppy not in learned_text(tok, on)
    assert sloppy in learned_text(tok, off)
    assert traj.steps[0].raw == sloppy and traj.messages[2].raw == sloppy  # the stored text is unchanged


def test_dpo_takes_failed_as_rejected_and_masks_a_recovered_chosens_mistake(repairs, train_tasks, tok):
    task_id = repairs[0].task_id
    task = next(t for t in train_tasks if t.id == task_id)
    wrong = '<tool_call>\n{"name": "submit_answer", "arguments": {"answer": "-1"}}\n</tool_call>'
    [failed] = [graded(t) for t in run_episodes([task], ScriptedPolicy([wrong], name="model"))]
    assert failed.outcome.tier == "failed"
    chosen = next(t for t in repairs if t.task_id == task_id and t.steps[0].mistake)
    pairs, _ = build_pairs([chosen, failed])
    assert [(p.chosen is chosen, p.rejected is failed) for p in pairs] == [(True, True)]
    c, r = render_pair(Pair(task_id, chosen, failed, None), tok)
    assert chosen.steps[0].raw not in learned_text(tok, c)
    assert chosen.steps[1].raw in learned_text(tok, c)
    assert wrong in learned_text(tok, r)


def test_curriculum_draws_on_the_partial_pool(train_tasks):
    easy = [t for t in train_tasks if t.tier == "easy"]
    near = {easy[0].id, easy[1].id}
    drawn = Curriculum(train_tasks, seed=0, partial=near, partial_share=0.5).sample(400)
    share = sum(t.id in near for t in drawn) / len(drawn)
    base = sum(t.id in near for t in Curriculum(train_tasks, seed=0).sample(400)) / 400
    assert share > 0.4 and base < 0.25, (share, base)
    # without partial tasks in a tier, that tier is drawn as before
    assert Curriculum(train_tasks, seed=0, partial={"nope"}).sample(50) == Curriculum(train_tasks, seed=0).sample(50)


def test_slimming_drops_a_failed_turn_a_later_call_made_good_and_a_repeated_call(train_tasks, tok, tiny_model):
    from trajforge.train.sequences import slim_detours

    task = next(t for t in train_tasks if t.template == "customers_in_city")
    bad = '<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT COUNT(*) FROM customer"}}\n</tool_call>'
    good = [ExpertText(task, i) for i in range(len(task.reference))]
    # a failed query, the right one, the right one again (a no-op), then the answer
    [traj] = [graded(t) for t in run_episodes([task], ScriptedPolicy([bad, good[0], good[0], good[1]], name="m"))]
    assert traj.outcome.tier == "recovered" and len(traj.steps) == 4
    slim = slim_detours(traj)
    assert [s.raw for s in slim.steps] == [good[0], good[1]]
    assert [m.role for m in slim.messages].count("assistant") == 2
    assert "no such table" not in " ".join(m.content for m in slim.messages).lower()
    [on], _ = build_samples([traj], tok, tiny_model, SFTConfig(tiers=["success", "recovered"], slim=True), {})
    [off], _ = build_samples([traj], tok, tiny_model, SFTConfig(tiers=["success", "recovered"]), {})
    assert len(on.input_ids) < len(off.input_ids) and bad not in tok.decode(on.input_ids)
    assert learned_text(tok, on).count("SELECT COUNT(*) FROM customers WHERE") == 1
    # untouched: a clean episode, a failed one, and a self-repair demonstration (it teaches the recovery)
    [clean] = [graded(t) for t in run_episodes([task], ScriptedPolicy(good, name="m"))]
    assert slim_detours(clean) is clean
    failed = traj.model_copy(update={"outcome": traj.outcome.model_copy(update={"tier": "failed"})})
    assert slim_detours(failed) is failed
    [repair] = [graded(t) for t in run_episodes([task], RepairPolicy(Planner(train_tasks)))]
    assert any(s.mistake for s in repair.steps) and slim_detours(repair) is repair


def test_a_recovered_episode_with_every_turn_masked_is_skipped_not_trained_empty(train_tasks, tok, tiny_model):
    task = next(t for t in train_tasks if t.template == "customers_in_city")
    bad = '<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT COUNT(*) FROM customer"}}\n</tool_call>'
    good = [ExpertText(task, i) for i in range(len(task.reference))]
    # every turn makes a failing call beside its good one: accepted, yet no turn is clean
    [traj] = [graded(t) for t in run_episodes([task], ScriptedPolicy([f"{bad}\n{g}" for g in good], name="m"))]
    assert traj.outcome.tier == "recovered" and not traj.outcome.guessed
    assert not any(turn_learns(traj, i) for i in range(len(traj.steps)))
    [clean] = [graded(t) for t in run_episodes([task], ScriptedPolicy(good, name="m"))]
    skipped: dict[str, int] = {}
    samples, _ = build_samples([traj, clean], tok, tiny_model, SFTConfig(tiers=["success", "recovered"]), skipped)
    assert len(samples) == 1 and good[0] in learned_text(tok, samples[0])
    assert skipped == {"no_loss": 1}
    # nor is it a DPO chosen: it has no turn to prefer
    wrong = '<tool_call>\n{"name": "submit_answer", "arguments": {"answer": "-1"}}\n</tool_call>'
    [failed] = [graded(t) for t in run_episodes([task], ScriptedPolicy([wrong], name="m"))]
    pairs, skipped = build_pairs([traj, failed])
    assert pairs == [] and skipped["chosen_masked"] == 1


def test_turn_pairs_never_prefer_a_chosen_turn_that_carries_no_loss(repairs, train_tasks):
    task_id = repairs[0].task_id
    task = next(t for t in train_tasks if t.id == task_id)
    wrong = '<tool_call>\n{"name": "submit_answer", "arguments": {"answer": "-1"}}\n</tool_call>'
    [failed] = [graded(t) for t in run_episodes([task], ScriptedPolicy([wrong], name="model"))]
    chosen = next(t for t in repairs if t.task_id == task_id and t.steps[0].mistake)
    # the two part at the chosen's marked mistake: preferring it would teach the mistake
    pairs, skipped = build_pairs([chosen, failed], mode="turn")
    assert pairs == [] and skipped["chosen_masked"] == 1
    # whole episodes still pair: the mistake is masked there (test above)
    assert len(build_pairs([chosen, failed])[0]) == 1
