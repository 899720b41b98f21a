from trajforge.schema import Trajectory
from trajforge.store import TrajectoryStore, episode_key


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
