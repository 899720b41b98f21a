"""Toolsets by fingerprint: stored beside the data, looked up instead of rebuilt, checked on read."""

from __future__ import annotations

import json

import pytest

from trajforge.envs import env_toolset, toolset_for
from trajforge.envs.sql import SqlEnv
from trajforge.envs.toolsets import KNOWN, Toolsets, class_toolset, read_toolset
from trajforge.schema import ToolSpec, Toolset
from trajforge.store import TrajectoryStore
from trajforge.tasks import read_tasks, synthesize, write_tasks


def test_fingerprint_covers_everything_the_model_sees():
    tools = (ToolSpec(name="a", description="x"), ToolSpec(name="b", description="y"))
    base = Toolset(tools=tools, instructions="Be brief.")
    assert Toolset(tools=tools[::-1], instructions="Be brief.").fingerprint == base.fingerprint  # order-free
    assert base.with_instructions("Be long.").fingerprint != base.fingerprint
    assert base.with_instructions("Be long.").tools_fingerprint == base.tools_fingerprint
    assert Toolset(tools=(tools[0], ToolSpec(name="b", description="z")), instructions="Be brief.").fingerprint \
        != base.fingerprint
    # 0.1's fingerprint was the tools alone: what old stores and adapters carry.
    assert base.tools_fingerprint == Toolset(tools=tools).tools_fingerprint


def test_one_object_per_environment_class_and_fingerprint():
    assert env_toolset("sql") is class_toolset(SqlEnv) is toolset_for(env_toolset("sql").fingerprint)
    assert KNOWN.canonical(SqlEnv.toolset()) is env_toolset("sql")


def test_folders_write_once_read_lazily_and_refuse_edited_files(tmp_path):
    toolset = Toolset(tools=(ToolSpec(name="only", description="d"),), instructions="i")
    folder = Toolsets(tmp_path / "toolsets")
    fp = folder.add(toolset)
    path = tmp_path / "toolsets" / f"{fp}.json"
    assert path.is_file() and read_toolset(path) == toolset
    fresh = Toolsets(tmp_path / "toolsets")
    assert fresh.fingerprints() == [fp] and fresh.get(fp) == toolset
    path.write_text(json.dumps({**json.loads(path.read_text()), "instructions": "edited"}))
    with pytest.raises(ValueError, match="not the one its name says"):
        Toolsets(tmp_path / "toolsets").get(fp)
    with pytest.raises(KeyError, match="trajforge migrate"):
        Toolsets(tmp_path / "empty").get("0123456789abcdef")


def test_stores_and_pools_carry_their_toolsets(tmp_path):
    from trajforge.eval.run import collect
    from trajforge.policies import make_policy

    tasks = synthesize("sql", 8, seed=0).tasks
    fp = env_toolset("sql").fingerprint
    assert {t.toolset_fingerprint for t in tasks} == {fp}
    write_tasks(tmp_path / "pool" / "tasks.jsonl", tasks)
    assert (tmp_path / "pool" / "toolsets" / f"{fp}.json").is_file()
    collect(tasks, make_policy("expert"), tmp_path / "store", show_progress=False)
    store = TrajectoryStore(tmp_path / "store")
    assert store.toolsets.fingerprints() == [fp] and {t.toolset_fingerprint for t in store.read()} == {fp}


def test_a_plain_pool_without_toolsets_still_loads_and_records_them(tmp_path):
    tasks = synthesize("sql", 6, seed=1).tasks
    # A pool as 0.1 wrote it: no fingerprints, no expert words, no toolsets/ beside it.
    lines = [json.dumps({k: v for k, v in json.loads(t.model_dump_json()).items()
                         if k not in ("toolset_fingerprint", "reasoning", "format", "trajforge_version")})
             for t in tasks]
    (tmp_path / "old.jsonl").write_text("\n".join(lines) + "\n")
    read = read_tasks(tmp_path / "old.jsonl")
    assert [t.reasoning for t in read] == [t.reasoning for t in tasks]  # the environment's words
    assert {t.toolset_fingerprint for t in read} == {env_toolset("sql").fingerprint}
    assert {t.trajforge_version for t in read} == {""}
    write_tasks(tmp_path / "new" / "tasks.jsonl", read)
    assert (tmp_path / "new" / "toolsets").is_dir()
