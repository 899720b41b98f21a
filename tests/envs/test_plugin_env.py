"""An environment from outside the package: the README's example, added by a registry call and
by an entry point, then synthesized, collected and evaluated like a built-in.

``counter_run`` is the shared setup (tasks, and a store of expert episodes); a training test only
needs to take it and call ``train_sft`` on ``TrajectoryStore(store).read()``.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest

import trajforge as tf
from trajforge.envs import env_names, env_spec, env_toolset, unregister
from trajforge.envs.registry import reload_entry_points
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.schema import Task
from trajforge.tasks.templates import split_sizes

README = Path(__file__).parents[2] / "README.md"


def readme_example() -> str:
    """The code block the README marks as tested."""
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- tested by tests/envs/test_plugin_env.py -->\n```python\n(.*?)```", text, re.S)
    assert m, "the README's environment example is gone"
    return m.group(1)


class CounterRun(NamedTuple):
    tasks: list[Task]
    store: Path


@pytest.fixture(scope="module")
def counter_run(tmp_path_factory):
    namespace: dict = {"__name__": "readme_counter"}
    exec(compile(readme_example(), str(README), "exec"), namespace)  # runs register(SPEC)
    try:
        root = tmp_path_factory.mktemp("counter")
        tasks = tf.synthesize("counter", 40, seed=0).tasks
        tf.write_tasks(root / "tasks.jsonl", tasks)
        tf.collect([t for t in tasks if t.split == "train"], tf.make_policy("expert"), root / "store",
                   show_progress=False)
        yield CounterRun(tasks, root / "store")
    finally:
        unregister("counter")


def test_the_readme_environment_is_small():
    code = readme_example()
    env_lines = code[code.index("class CounterEnv"):code.index("def plan")].strip().splitlines()
    assert len(env_lines) <= 35 and code.count("def ") == 5  # reset, two tools, verify, and the plan


def test_it_is_synthesized_with_splits_and_held_out_values(counter_run):
    tasks = counter_run.tasks
    assert Counter(t.split for t in tasks) == split_sizes(40)
    assert all(t.env == "counter" and t.reference[-1].name == "submit" for t in tasks)
    assert {t.entities["n"] >= 80 for t in tasks if t.split == "heldout"} == {True}
    assert {t.entities["n"] < 80 for t in tasks if t.split != "heldout"} == {True}
    assert {t.toolset_fingerprint for t in tasks} == {env_toolset("counter").fingerprint}


def test_it_is_collected_into_a_store_that_carries_its_toolset(counter_run):
    trajs = tf.TrajectoryStore(counter_run.store).read()
    assert len(trajs) == 28 and all(t.outcome.tier == "success" for t in trajs)
    first = trajs[0]
    assert first.messages[1].content.endswith("The counter is at 0.")  # reset's observation reached the model
    assert first.messages[0].content == "Use add to change the counter, then submit it."
    toolset = tf.toolset_for(first.toolset_fingerprint)
    assert toolset.names == ["add", "submit"] and (counter_run.store / "toolsets").is_dir()


def test_it_is_evaluated_in_the_same_harness(counter_run, tmp_path):
    heldout = [t for t in counter_run.tasks if t.split == "heldout"]
    hasty = ScriptedPolicy(['<tool_call>{"name": "submit", "arguments": {}}</tool_call>'], name="hasty")
    results = tf.compare(heldout, [tf.make_policy("expert"), hasty], tmp_path / "eval", show_progress=False)
    assert results["expert"]["completion"] == 1.0 and results["expert"]["n"] == len(heldout)
    assert results["hasty"]["completion"] == 0.0 and results["hasty"]["fail_reasons"] == {"wrong_answer": len(heldout)}


def test_an_entry_point_adds_it_without_a_registry_call(tmp_path, monkeypatch):
    from trajforge.envs import registry

    monkeypatch.delitem(registry._registered, "counter", raising=False)  # forget the registry call
    # A package on sys.path with an installed distribution's metadata declaring the entry point.
    pkg = tmp_path / "counter_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(readme_example().replace("register(SPEC)\n", ""))
    dist = tmp_path / "counter_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: counter-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[trajforge.envs]\ncounter = counter_plugin:SPEC\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    reload_entry_points()
    try:
        assert "counter" in env_names()
        spec = env_spec("counter")
        assert spec.env.__module__ == "counter_plugin"
        report = tf.synthesize("counter", 10, seed=1)
        assert len(report.tasks) == 10
    finally:
        unregister("counter")
        sys.modules.pop("counter_plugin", None)
        monkeypatch.undo()
        reload_entry_points()
