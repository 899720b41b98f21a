"""Exports never lose data: a failed export leaves the old output as it was, and no output may be
written into a trajectory store (its shards, its folder, its logs/), through the CLI or the library."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.harness import run_episodes
from trajforge.policies.expert import ExpertPolicy
from trajforge.store import TrajectoryStore
from trajforge.store import export as ex
from trajforge.store.targets import StoreTargetError, refuse_store_target
from trajforge.tasks import synthesize


@pytest.fixture(scope="module")
def trajs():
    return run_episodes(synthesize("sql", 4, seed=0).tasks, ExpertPolicy())


@pytest.fixture
def store(tmp_path, trajs):
    """A store as a collection leaves it: two shards and an event log."""
    root = tmp_path / "store"
    st = TrajectoryStore(root)
    with st.writer() as w:
        for t in trajs[:2]:
            w.append(t)
    (root / "trajectories.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in trajs[2:]))
    (root / "logs").mkdir()
    (root / "logs" / "shard-0.jsonl").write_text('{"event": "run_start"}\n')
    return root


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def export(store: Path, fmt: str, out: Path):
    return CliRunner().invoke(app, ["export", str(store), "--format", fmt, "--out", str(out)])


def stale_store(tmp_path: Path, trajs) -> Path:
    """Good episodes, then one whose toolset fingerprint is not the environment's: exporting it
    fails after the first records were converted."""
    root = tmp_path / "stale"
    st = TrajectoryStore(root)
    for t in trajs:
        st.append(t)
    st.append(trajs[0].model_copy(update={"task_id": "zz-stale", "toolset_fingerprint": "0" * 16}))
    return root


@pytest.mark.parametrize("fmt,out", [("openai", "train.jsonl"), ("sharegpt", "lf"), ("hf", "ds.parquet"),
                                     ("hf", "ds")])
def test_a_failed_export_leaves_the_existing_output_untouched(tmp_path, trajs, fmt, out):
    target = tmp_path / "out" / out
    good = tmp_path / "good"
    st = TrajectoryStore(good)
    for t in trajs:
        st.append(t)
    assert export(good, fmt, target).exit_code == 0
    before = digest(tmp_path / "out")
    res = export(stale_store(tmp_path, trajs), fmt, target)
    assert res.exit_code == 2 and "toolset 0000000000000000 is unknown" in res.output, res.output
    assert digest(tmp_path / "out") == before  # nothing truncated, no temporary file left behind


def test_an_export_replaces_the_old_output_whole(tmp_path, trajs, store):
    out = tmp_path / "train.jsonl"
    out.write_text("an older export, much longer than the new one\n" * 1000)
    assert export(store, "openai", out).exit_code == 0
    lines = out.read_text().splitlines()
    assert len(lines) == len(trajs) and all(json.loads(ln)["messages"] for ln in lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store", "train.jsonl"]
    plain = tmp_path / "plain"
    plain.touch()
    assert out.stat().st_mode == plain.stat().st_mode  # the umask's mode, not a private temp file's


@pytest.mark.parametrize("where,needle", [
    ("store/shard-0.jsonl", "is inside the store being read"),
    ("store/trajectories.jsonl", "is inside the store being read"),
    ("store", "is inside the store being read"),
    ("store/new.jsonl", "is inside the store being read"),
    ("store/logs/shard-0.jsonl", "is inside the store being read"),
    ("store/logs/export.jsonl", "is inside the store being read"),
])
@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "hf"])
def test_export_out_into_the_store_being_read_is_refused(tmp_path, store, fmt, where, needle):
    before = digest(store)
    res = export(store, fmt, tmp_path / where)
    assert res.exit_code == 2 and needle in res.output, res.output
    assert digest(store) == before


@pytest.mark.parametrize("where,needle", [
    ("other/shard-3.jsonl", "is a trajectory store shard"),
    ("other/renamed.jsonl", "is a trajectory store shard"),  # a shard by content, not by name
    ("other", "is a trajectory store folder"),
    ("other/export.jsonl", "is inside the trajectory store"),
    ("other/logs/new.jsonl", "is in the event logs of the store"),
    ("link.jsonl", "is a trajectory store shard"),  # a symlink to a shard
])
def test_export_out_into_any_other_store_is_refused(tmp_path, trajs, store, where, needle):
    other = tmp_path / "other"
    TrajectoryStore(other, shard="shard-3").append(trajs[0])
    (other / "renamed.jsonl").write_bytes((other / "shard-3.jsonl").read_bytes())
    (other / "logs").mkdir()
    (tmp_path / "link.jsonl").symlink_to(other / "shard-3.jsonl")
    before = digest(other)
    for fmt in ("openai", "sharegpt", "hf"):
        res = export(store, fmt, tmp_path / where)
        assert res.exit_code == 2 and needle in res.output, (fmt, res.output)
    assert digest(other) == before


def test_the_library_writers_refuse_a_store_too(tmp_path, trajs, store):
    for write, target in [(ex.write_openai_jsonl, store / "shard-0.jsonl"), (ex.write_sharegpt, store),
                          (ex.save_hf, store / "ds.parquet"), (ex.write_openai_jsonl, store / "logs" / "x.jsonl")]:
        with pytest.raises(StoreTargetError):
            write(trajs, target)
    refuse_store_target(tmp_path / "elsewhere" / "train.jsonl")  # a fresh path is fine
    refuse_store_target(tmp_path / "tasks.jsonl")  # next to a store is fine


def test_a_hf_folder_export_replaces_only_a_dataset(tmp_path, trajs, store):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("keep me")
    res = export(store, "hf", mine)
    assert res.exit_code == 2 and "not a saved dataset folder" in res.output
    assert (mine / "todo.txt").read_text() == "keep me"
    ds = tmp_path / "ds"
    assert export(store, "hf", ds).exit_code == 0 and export(store, "hf", ds).exit_code == 0
    assert len(ex.load_hf(ds)) == len(trajs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "notes", "store"]
