"""benchmarks/recipes.py's task splits: the 186 held-out tasks never meet training (no held-out
entity or template in a train task, no train question among them), and the per-template counts."""

from argparse import Namespace

import pytest

from benchmarks.recipes import by_template, task_splits
from trajforge.envs.sql.tasks import TEMPLATES, heldout_values


@pytest.fixture(scope="module")
def split():
    return task_splits(Namespace(env="sql", n=260, seed=0, heldout_dbs=[0, 1], heldout_n=186, train_worlds=1,
                                 world_train=0, pool_compose=0, compose_templates=""))


@pytest.mark.slow
def test_recipes_heldout_never_meets_train(split):
    train, heldout = split["train"], split["heldout"]
    assert (len(train), len(split["test"]), len(heldout)) == (182, 39, 186)
    assert {t.split for t in heldout} == {"heldout"}
    held_templates = {t.id for t in TEMPLATES if t.heldout_only}
    assert held_templates <= {t.template for t in heldout}
    assert not held_templates & {t.template for t in train}
    names = heldout_values()
    for task in train:
        assert not names & set(map(str, task.entities.values())), task.id
    assert not {t.prompt for t in heldout} & {t.prompt for t in train}
    # the two databases ask the same questions of other rows: no task is drawn twice
    assert len({t.id for t in heldout}) == len(heldout)


def test_by_template_counts_solved_tasks_per_template(split):
    heldout = split["heldout"]
    stock = [t.id for t in heldout if t.template == "product_stock"]
    counts = by_template(heldout, set(stock[:3]))
    assert counts["product_stock"] == [3, len(stock)]
    assert sum(n for _, n in counts.values()) == len(heldout)
    assert sum(k for k, _ in counts.values()) == 3


@pytest.mark.slow
@pytest.mark.parametrize("worlds,compose", [(1, 0), (7, 0), (1, 46)])
def test_recipes_heldout_of_another_environment_never_meets_train(worlds, compose):
    """``--env travel``: the demo-sized pool's train split, 186 held-out tasks from travel's own
    held-out space; no held-out city or template in a train task, no train question among them.
    ``--train-worlds 7`` spreads the same 182 train tasks over seven worlds' cities;
    ``--pool-compose 46`` adds 46 composition tasks, none using a held-out tool group."""
    from trajforge.envs.travel.cities import HELDOUT_CITIES
    from trajforge.envs.travel.tasks import COMPOSE_TEMPLATES, HELDOUT_TOOL_GROUPS
    from trajforge.envs.travel.tasks import TEMPLATES as TRAVEL
    from trajforge.tasks.splits import leaks, tool_combo

    split = task_splits(Namespace(env="travel", n=260, seed=0, heldout_dbs=[0, 1], heldout_n=186,
                                  train_worlds=worlds, world_train=0, pool_compose=compose, compose_templates=""))
    train, heldout = split["train"], split["heldout"]
    assert (len(train), len(heldout)) == (182 + compose, 186)
    assert sum(t.template in {c.id for c in COMPOSE_TEMPLATES} for t in train) == compose
    for task in train:
        assert not leaks(tool_combo(task), HELDOUT_TOOL_GROUPS), task.id
    assert {t.world for t in train} == set(range(worlds)) and {t.world for t in heldout} == {0}
    assert {t.env for t in train + heldout} == {"travel"} and {t.split for t in heldout} == {"heldout"}
    held_templates = {t.id for t in TRAVEL if t.heldout_only}
    assert held_templates <= {t.template for t in heldout}
    assert not held_templates & {t.template for t in train}
    for task in train:
        assert not set(HELDOUT_CITIES) & set(map(str, task.entities.values())), task.id
    assert set(HELDOUT_CITIES) & {str(v) for t in heldout for v in t.entities.values()}
    assert not {t.prompt for t in heldout} & {t.prompt for t in train}
    assert len({t.id for t in heldout}) == len(heldout)
