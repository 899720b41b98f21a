import pytest

from trajforge.schema import Outcome, SamplingConfig, Trajectory
from trajforge.store import ShardBusy, TrajectoryStore, episode_key, resume_keys


def traj(i: int) -> Trajectory:
    return Trajectory(task_id=f"t{i}", sample=0, policy="p", env="sql", toolset_fingerprint="f", dialect="hermes")


def test_append_and_read(tmp_path):
    st = TrajectoryStore(tmp_path / "s")
    for i in range(3):
        st.append(traj(i))
    assert [t.task_id for t in st.read()] == ["t0", "t1", "t2"]
    assert st.keys() == {episode_key(f"t{i}", "p", 0) for i in range(3)}


def test_torn_last_line_is_skipped_and_next_append_is_clean(tmp_path):
    st = TrajectoryStore(tmp_path)
    st.append(traj(0))
    with open(st.path, "a") as f:
        f.write('{"task_id": "t1", "sam')  # a crash mid-write
    assert [t.task_id for t in st.read()] == ["t0"] and st.torn == ["trajectories.jsonl:2"]
    st.append(traj(2))
    assert [t.task_id for t in st.read()] == ["t0", "t2"]


def test_rewrite_is_whole(tmp_path):
    st = TrajectoryStore(tmp_path)
    for i in range(3):
        st.append(traj(i))
    st.rewrite([traj(9)])
    assert [t.task_id for t in st.read()] == ["t9"]


# ---- shards, one writer each; duplicates collapsed; sampling-aware keys ------------------------


def test_each_writer_claims_its_own_shard_and_readers_merge_them(tmp_path):
    st = TrajectoryStore(tmp_path)
    a, b = st.writer(), st.writer()
    assert (a.name, b.name) == ("shard-0", "shard-1")  # shard-0 is held: the second writer moves on
    a.append(traj(0))
    b.append(traj(1))
    a.append(traj(2))
    a.close()
    assert st.writer().name == "shard-0"  # released (as when a killed process's lock drops)
    b.close()
    assert sorted(t.task_id for t in st.read()) == ["t0", "t1", "t2"]
    # A worker of slice I starts at shard-I, and moves on from there when it is held.
    c = st.writer(first=1)
    assert c.name == "shard-1" and st.writer(first=1).name == "shard-2"
    c.close()


def test_writer_starts_a_fresh_line_after_a_torn_tail(tmp_path):
    st = TrajectoryStore(tmp_path)
    with st.writer() as w:
        w.append(traj(0))
    with open(tmp_path / "shard-0.jsonl", "a") as f:
        f.write('{"task_id": "t1", "pol')  # killed mid-write
    with st.writer() as w:
        w.append(traj(2))
    assert [t.task_id for t in st.read()] == ["t0", "t2"] and st.torn == ["shard-0.jsonl:2"]


def test_duplicates_collapse_on_read_and_a_fault_yields_to_a_later_success(tmp_path):
    st = TrajectoryStore(tmp_path)
    fault = traj(1).model_copy(update={"end": "env_fault", "outcome": Outcome(tier="env_fault")})
    with st.writer() as w:
        for t in (traj(0), traj(0), fault, traj(2), fault):
            w.append(t)
    assert [t.task_id for t in st.read()] == ["t0", "t2", "t1"] and st.duplicates == 2
    assert st.read()[2].end == "env_fault"
    assert episode_key("t1", "p", 0) in st.keys() and episode_key("t1", "p", 0) not in st.keys(faults=False)
    with st.writer() as w:
        w.append(traj(1))  # a resume with --retry-faults ran it again
    assert [(t.task_id, t.end) for t in st.read()] == [("t0", ""), ("t2", ""), ("t1", "")]


def test_sampling_config_is_part_of_the_key_and_old_records_match_greedy(tmp_path):
    greedy, hot = SamplingConfig(max_tokens=512), SamplingConfig(temperature=0.7, seed=1)
    assert episode_key("t", "p", 0, greedy) != episode_key("t", "p", 0, hot) != episode_key("t", "p", 0)
    assert episode_key("t", "p", 0, hot) != episode_key("t", "p", 0, SamplingConfig(temperature=0.7, seed=2))
    # The seed does not change a greedy run.
    assert episode_key("t", "p", 0, SamplingConfig(seed=1)) == episode_key("t", "p", 0, SamplingConfig(seed=2))
    st = TrajectoryStore(tmp_path)
    st.append(traj(0))  # written before sampling configs were recorded
    st.append(traj(1).model_copy(update={"sampling": hot}))
    have = st.keys()
    assert any(k in have for k in resume_keys("t0", "p", 0, greedy))
    assert not any(k in have for k in resume_keys("t0", "p", 0, hot))
    assert any(k in have for k in resume_keys("t1", "p", 0, hot))
    assert not any(k in have for k in resume_keys("t1", "p", 0, greedy))


def test_rewrite_refuses_while_a_collection_writes(tmp_path):
    st = TrajectoryStore(tmp_path)
    with st.writer() as w:
        w.append(traj(0))
        with pytest.raises(ShardBusy, match="shard-0.jsonl is being written"):
            st.rewrite([traj(9)])
    st.rewrite([traj(9)])
    assert [t.task_id for t in st.read()] == ["t9"]


def test_rewrite_keeps_what_a_collection_wrote_after_the_read_or_meanwhile(tmp_path):
    st = TrajectoryStore(tmp_path)
    with st.writer() as w:
        w.append(traj(0))
    trajs = st.read()
    with st.writer() as w:
        w.append(traj(1))  # a collection appended and finished between grade's read and its rewrite
    with pytest.raises(ShardBusy, match="changed since they were read"):
        st.rewrite(trajs)
    assert sorted(t.task_id for t in st.read()) == ["t0", "t1"]

    class Racing(list):  # a collection claims a new shard while the rewrite writes
        def __iter__(self):
            with TrajectoryStore(tmp_path).writer() as w:
                assert w.name == "shard-1"  # shard-0 is locked by the rewrite
                w.append(traj(7))
            return super().__iter__()
    st.rewrite(Racing(st.read()))
    assert sorted(t.task_id for t in st.read()) == ["t0", "t1", "t7"]


def test_a_rewrite_killed_midway_loses_no_record(tmp_path, monkeypatch):
    import trajforge.store.jsonl as jsonl

    st = TrajectoryStore(tmp_path)
    with st.writer() as w:
        w.append(traj(0))
    st.append(traj(1))
    trajs = st.read()

    def killed(*args):
        raise OSError("killed")
    monkeypatch.setattr(jsonl.os, "replace", killed)
    with pytest.raises(OSError):
        st.rewrite(trajs)
    monkeypatch.undo()
    assert sorted(t.task_id for t in st.read()) == ["t0", "t1"]


def test_background_writer_group_commits_and_close_writes_everything(tmp_path):
    st = TrajectoryStore(tmp_path)
    w = st.writer(background=True)
    for i in range(200):
        w.append(traj(i))  # queued: the caller never waits on fsync
    w.close()
    assert [t.task_id for t in st.read()] == [f"t{i}" for i in range(200)]
    assert st.writer().name == "shard-0"  # the lock went with close


def test_grade_cli_names_a_running_collection_and_changes_nothing(tmp_path):
    from typer.testing import CliRunner

    from trajforge.cli.main import app

    st = TrajectoryStore(tmp_path)
    with st.writer() as w:
        w.append(traj(0))
        before = (tmp_path / "shard-0.jsonl").read_bytes()
        res = CliRunner().invoke(app, ["grade", str(tmp_path)])
        said = " ".join(res.output.split())  # rich wraps long lines
        assert res.exit_code != 0 and isinstance(res.exception, SystemExit)  # a clear error, no traceback
        assert "shard-0.jsonl is being written by a running collection" in said
        assert "grade it after the collection finishes (nothing was changed)" in said
        assert (tmp_path / "shard-0.jsonl").read_bytes() == before


def test_grade_cli_says_which_unreadable_lines_its_rewrite_left_out(tmp_path):
    from typer.testing import CliRunner

    from trajforge.cli.main import app

    st = TrajectoryStore(tmp_path)
    st.append(traj(0))
    with open(st.path, "a") as f:
        f.write('{"task_id": "torn", "sam')
    res = CliRunner().invoke(app, ["grade", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "left out 1 unreadable lines (trajectories.jsonl:2)" in " ".join(res.output.split())
    assert [t.task_id for t in TrajectoryStore(tmp_path).read()] == ["t0"]


# ---- record formats: newer refused with a message, older read --------------------------------


def test_a_store_written_by_a_newer_format_is_refused_not_skipped(tmp_path, monkeypatch, capsys):
    import json
    import sys

    from trajforge.cli.main import main
    from trajforge.schema import FORMAT, NewerFormatError

    st = TrajectoryStore(tmp_path)
    st.append(traj(0))
    newer = {**json.loads(traj(1).model_dump_json()), "format": FORMAT + 1, "trajforge_version": "9.0"}
    with open(st.path, "a") as f:
        f.write(json.dumps(newer) + "\n")
    with pytest.raises(NewerFormatError, match=r"trajectories.jsonl:2: .*trajforge 9.0.*upgrade trajforge"):
        st.read()
    monkeypatch.setattr(sys, "argv", ["trajforge", "grade", str(tmp_path)])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 2 and "upgrade trajforge" in capsys.readouterr().out


def test_records_from_before_the_format_field_are_read(tmp_path):
    (tmp_path / "trajectories.jsonl").write_text(
        '{"task_id": "t0", "policy": "p", "env": "sql", "toolset_fingerprint": "f", "dialect": "hermes", '
        '"verdict": {"submitted": true, "correct": true}, "outcome": {"tier": "success", "correct": true}}\n')
    [t] = TrajectoryStore(tmp_path).read()
    assert t.verdict.correct and t.outcome.correct and t.trajforge_version == ""


def test_a_store_that_read_then_appended_itself_may_still_rewrite(tmp_path):
    """Its own append is no collection's: the rewrite that follows it goes ahead."""
    st = TrajectoryStore(tmp_path)
    st.append(traj(1))
    before = st.read()
    st.append(traj(2))
    st.rewrite(before + [traj(2), traj(3)])
    assert sorted(t.task_id for t in TrajectoryStore(tmp_path).read()) == ["t1", "t2", "t3"]
