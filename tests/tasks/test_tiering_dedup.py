"""Structural tiers (matched to the hand-made templates) and duplicate / near-duplicate checks."""

from __future__ import annotations

import pytest

from trajforge.schema import Task, ToolCall
from trajforge.tasks import synthesize
from trajforge.tasks.dedup import Deduper, key_terms, merge_pools, normalize_prompt
from trajforge.envs.sql.tiering import query_shape, sql_tier
from trajforge.tasks.tiering import tier_from_plan


def test_plan_tiers_reproduce_every_template_tier():
    tasks = synthesize("sql", 160, seed=3).tasks
    assert len({t.template for t in tasks}) == 14
    for t in tasks:
        assert tier_from_plan(t.reference, "submit_answer", env="sql") == t.tier, t.template


@pytest.mark.parametrize("sql, tier", [
    ("SELECT COUNT(*) FROM t WHERE name = 'Join Co' -- JOIN", "easy"),
    ("SELECT a.x FROM a, b WHERE a.id = b.id", "medium"),
    ("SELECT kind, COUNT(*) FROM t GROUP BY kind", "medium"),
    ("SELECT kind FROM t GROUP BY kind HAVING COUNT(*) > 2", "medium"),
    ("SELECT a.k FROM a JOIN b ON a.id = b.id GROUP BY a.k HAVING COUNT(*) > 1", "hard"),
    ("SELECT x FROM t WHERE y IN (SELECT y FROM u)", "hard"),
    ("WITH c AS (SELECT 1 AS x) SELECT x FROM c", "hard"),
    ("SELECT name, RANK() OVER (ORDER BY price) FROM p", "hard"),
    ("SELECT x FROM a UNION SELECT x FROM b", "hard"),
])
def test_sql_tiers(sql, tier):
    assert sql_tier([sql]) == tier
    assert query_shape(sql).joins == (1 if "JOIN b" in sql or "a, b" in sql else 0)


def test_generic_tier_counts_steps_and_dependencies():
    find = ToolCall(name="search", arguments={"q": "paris"})
    book = ToolCall(name="book", arguments={"id": "F-77"})
    done = ToolCall(name="finish", arguments={})
    assert tier_from_plan([find, done], "finish") == "easy"
    # book reuses an id only the search result showed: one dependent step on top of two steps.
    assert tier_from_plan([find, book, done], "finish", ["F-77 to Paris", "ok", ""], "x") == "medium"
    assert tier_from_plan([find, book, find, book, done], "finish") == "hard"


def _task(tid, prompt, query="SELECT 1"):
    return Task(id=tid, env="sql", prompt=prompt, tier="easy", split="train", template="t",
                reference=(ToolCall(name="run_sql", arguments={"query": query}),
                           ToolCall(name="submit_answer", arguments={"answer": "1"})),
                expected=1)


def test_near_duplicates_need_the_same_entities():
    d = Deduper(0.7)
    d.add(_task("a", "How many customers live in Lyon? Answer with a number."), "submit_answer")
    assert d.check_prompt("How many customers live in Berlin? Answer with a number.") is None
    assert d.check_prompt("HOW MANY customers live in Lyon?? answer with a number")[0] == "duplicate"
    hit = d.check_prompt("How many of the customers live in Lyon? Answer with a number.")
    assert hit[0] == "near_duplicate" and "to a" in hit[1]
    assert d.check_prompt("Which customers in Lyon signed up in 2021?") is None
    assert d.check_plan("sql", _task("b", "other", "SELECT 1").reference, "submit_answer")
    assert normalize_prompt("  Héllo,   WORLD! ") == "héllo world"
    assert key_terms("Which Garden products cost over 50 in 'North Hall'?") == {
        "garden", "50", "north hall"}
    with pytest.raises(ValueError, match="threshold"):
        Deduper(0)


def test_merge_pools_keeps_the_base_and_drops_repeats():
    base = [_task("a", "How many customers live in Lyon?", "SELECT 1")]
    new = [_task("a", "different prompt", "SELECT 9"),          # same id
           _task("b", "How many customers live in Lyon", "SELECT 2"),  # same prompt
           _task("c", "Count rows please.", "SELECT 1"),         # same plan
           _task("d", "How many orders came from Berlin?", "SELECT 3")]
    merged, dropped = merge_pools(base, new)
    assert [t.id for t in merged] == ["a", "d"] and dropped == {"duplicate": 3}


def test_tier_scale_takes_the_nearest_examples_majority():
    from trajforge.tasks.tiering import TierScale

    scale = TierScale(((3, "easy"), (6, "medium"), (6, "medium"), (6, "hard"), (9, "hard")))
    assert [scale.tier(s) for s in (0, 3, 4, 5, 6, 8, 20)] == [
        "easy", "easy", "easy", "medium", "medium", "hard", "hard"]
    assert TierScale(((4, "hard"), (4, "easy"))).tier(4) == "easy"  # a tie: the easier tier
    assert TierScale(()).tier(5) is None
    plan = [ToolCall(name="a"), ToolCall(name="b"), ToolCall(name="c"), ToolCall(name="end")]
    assert tier_from_plan(plan, "end") == "medium"  # no scale: 3 steps
    assert tier_from_plan(plan, "end", scale=TierScale(((3, "easy"), (9, "hard")))) == "easy"
