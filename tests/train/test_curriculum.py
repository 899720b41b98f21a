"""The curriculum's state survives a checkpoint: a restored curriculum draws what the original would."""

import json

from trajforge.train.curriculum import Curriculum


def test_a_restored_curriculum_draws_and_unlocks_as_the_original(sql_tasks):
    train = [t for t in sql_tasks if t.split == "train"]
    near = {t.id for t in train[::3]}
    first = Curriculum(train, promote_at=0.5, seed=4, partial=near)
    first.sample(6)
    for i in range(20):
        first.record("easy", i % 2 == 0, step=i // 4)
    assert first.level == 1 and first.history == [(3, "medium")]
    state = json.loads(json.dumps(first.state()))  # as a checkpoint's state.json holds it
    again = Curriculum(train, promote_at=0.5, seed=4, partial=near)
    again.load_state(state)
    assert (again.level, again.history, again.rates()) == (first.level, first.history, first.rates())
    assert [t.id for t in again.sample(12)] == [t.id for t in first.sample(12)]
    for c in (first, again):  # the recent results carry on toward the next unlock
        for i in range(16):
            c.record("medium", True, step=9)
    assert again.history == first.history == [(3, "medium"), (9, "hard")]
