"""An adapter records the longest turn it was trained on, and a policy acting with it may generate
that much a turn: a travel turn (a sentence and its call) runs past the 160-token default."""

from __future__ import annotations

import json

from trajforge.eval.run import collect
from trajforge.policies import make_policy
from trajforge.policies.hf import DEFAULT_TURN_TOKENS, HFPolicy, turn_budget
from trajforge.store import TrajectoryStore
from trajforge.tasks import synthesize
from trajforge.train.sequences import Sample, longest_turn
from trajforge.train.rft import RFTConfig, hf_sampler
from trajforge.train.sft import SFTConfig, train_sft


def test_longest_turn_is_the_longest_run_of_loss_positions():
    assert longest_turn([Sample([1] * 9, [0, 1, 1, 0, 1, 1, 1, 0, 1]), Sample([1] * 3, [1, 1, 0])]) == 3
    assert longest_turn([Sample([1, 2], [0, 0])]) == 0


def test_a_travel_adapter_lets_its_policy_generate_its_longest_turn(tiny_model, tmp_path):
    tasks = [t for t in synthesize("travel", 60, seed=1).tasks if t.split == "train" and "round_trip" in t.id][:3]
    collect(tasks, make_policy("expert"), tmp_path / "store", show_progress=False)
    trajs = TrajectoryStore(tmp_path / "store").read()
    cfg = SFTConfig(max_steps=1, batch_size=2, grad_accum=1, r=4, replay_share=0)
    train_sft(trajs, tiny_model, tmp_path / "a", cfg, progress=False)
    meta = json.loads((tmp_path / "a" / "trajforge_adapter.json").read_text())
    policy = HFPolicy(tiny_model, adapter=str(tmp_path / "a"))
    # A turn is an assistant message's words, then its call and the end of turn in the dialect.
    said = max(len(policy.tokenizer(m.content, add_special_tokens=False).input_ids)
               for t in trajs for m in t.messages if m.role == "assistant")
    assert said < meta["longest_turn"] <= said + 160
    assert meta["longest_turn"] + 32 > DEFAULT_TURN_TOKENS  # what this test is about: longer than the default
    assert policy.max_new_tokens == meta["longest_turn"] + 32
    assert HFPolicy(tiny_model, adapter=str(tmp_path / "a"), max_new_tokens=50).max_new_tokens == 50
    # An adapter trained on top of this one (lineage) without a record of its own inherits it.
    child = tmp_path / "b"
    child.mkdir()
    (child / "trajforge_adapter.json").write_text(json.dumps({"init_adapter": str(tmp_path / "a")}))
    assert turn_budget(str(child)) == meta["longest_turn"] + 32
    assert turn_budget(None) == DEFAULT_TURN_TOKENS
    # RFT's sampler keeps its 192 as the floor, and goes past it for an adapter that learned longer turns.
    assert hf_sampler(tiny_model, RFTConfig())(str(tmp_path / "a"), 1).max_new_tokens == max(192, meta["longest_turn"] + 32)
    (tmp_path / "a" / "trajforge_adapter.json").write_text(json.dumps({**meta, "longest_turn": 300}))
    assert hf_sampler(tiny_model, RFTConfig())(str(tmp_path / "a"), 1).max_new_tokens == 332
