"""Tool-combination split checks work on any environment's tasks."""

from __future__ import annotations

from types import SimpleNamespace

from trajforge.schema import Task, ToolCall
from trajforge.tasks.splits import combo_key, combo_report, drop_combo_leaks, tool_combo
from trajforge.tasks.templates import TemplateGenerator
from trajforge.envs.sql.tasks import generate_sql_tasks
from trajforge.envs.travel.tasks import HELDOUT_TOOL_GROUPS, generate_travel_tasks


def make(tid: str, split: str, *tools: str) -> Task:
    return Task(id=tid, env="x", prompt="p", tier="easy", split=split, template="t",
                reference=tuple(ToolCall(name=n) for n in tools), expected=None)


def test_report_counts_combos_per_split_and_flags_leaks():
    tasks = [make("a", "train", "search", "book", "search"),
             make("b", "train", "weather", "book", "hotel"),   # uses the held-out pair
             make("c", "test", "search", "book"),
             make("d", "heldout", "search", "book"),
             make("e", "heldout", "weather", "hotel", "finish")]
    assert tool_combo(tasks[0]) == frozenset({"search", "book"})
    report = combo_report(tasks, [{"weather", "hotel"}])
    assert report.counts == {"train": {"book+hotel+weather": 1, "book+search": 1},
                             "test": {"book+search": 1},
                             "heldout": {"book+search": 1, "finish+hotel+weather": 1}}
    assert report.heldout_only == ["finish+hotel+weather"] and report.shared == ["book+search"]
    assert report.leaks == ["b"] and not report.ok
    kept, dropped = drop_combo_leaks(tasks, [{"weather", "hotel"}])
    assert dropped == 1 and [t.id for t in kept] == ["a", "c", "d", "e"]
    assert combo_report(kept, [{"weather", "hotel"}]).ok
    assert combo_report(tasks).ok  # no declared groups: describe only
    assert combo_key(["b", "a"]) == "a+b"


def test_travel_heldout_combinations_never_appear_in_train():
    tasks = generate_travel_tasks(200, seed=11).tasks
    report = combo_report(tasks, HELDOUT_TOOL_GROUPS)
    assert report.leaks == []
    seen = {tool_combo(t) for t in tasks if t.split != "heldout"}
    held_out = [tool_combo(t) for t in tasks if t.split == "heldout"
                if any(g <= tool_combo(t) for g in HELDOUT_TOOL_GROUPS)]
    assert held_out and not set(held_out) & seen
    assert len(report.heldout_only) >= 2


def test_the_helper_reads_sql_tasks_too():
    tasks = generate_sql_tasks(60, seed=2).tasks
    report = combo_report(tasks)
    assert sum(sum(c.values()) for c in report.counts.values()) == len(tasks)
    assert "run_sql+submit_answer" in report.counts["train"]
    # SQL holds out entities and templates, not combinations: declaring one finds its leaks.
    schema_pair = frozenset({"describe_table", "list_tables"})
    leaked = combo_report(tasks, [schema_pair]).leaks
    assert leaked and all(schema_pair <= tool_combo(t) for t in tasks if t.id in leaked)
    kept, n = drop_combo_leaks(tasks, [schema_pair])
    assert n == len(leaked) and combo_report(kept, [schema_pair]).ok


def test_a_template_with_no_values_in_a_partition_leaves_that_draw_and_the_gap_is_counted():
    """A template may have no held-out values (or no seen ones): it is not drawn there, rather
    than crashing the whole draw; places no template can fill are ``unfilled``."""
    values = {"a": ((1, 2, 3, 4, 5, 6, 7, 8), (90, 91)), "b": ((10, 11, 12, 13, 14, 15, 16, 17), ())}

    def build(t, e, split):
        return Task(id=f"{t.id}-{e['k']}", env="sql", prompt=f"{t.id} {e['k']}", tier="easy", split=split,
                    template=t.id, reference=(), expected=e["k"], entities=e)

    def generator(templates):
        return TemplateGenerator(
            templates=[SimpleNamespace(id=i, heldout_only=False) for i in templates], build=build,
            draw=lambda t, rng, heldout: {"k": rng.choice(values[t.id][heldout])},
            task_id=lambda t, e: f"{t.id}-{e['k']}", space=lambda t, heldout: len(values[t.id][heldout]))

    report = generator("ab")(18, seed=0)
    held = [t for t in report.tasks if t.split == "heldout"]
    assert len(held) == 2 and {t.template for t in held} == {"a"}
    assert report.dropped["unfilled"] == 1 and len(report.tasks) == 17
    only_b = generator("b")(10, seed=0)
    assert {t.split for t in only_b.tasks} == {"train", "test"} and only_b.dropped["unfilled"] == 2
