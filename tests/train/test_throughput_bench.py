"""benchmarks/train_throughput.py at toy size: every arm trains the same batches and the report
holds what the README quotes (tokens/s per arm, the ratios).

The proof that the arms see the same data: LoRA's B matrices start at zero, so the first step's
loss is the base model's loss on the first batch in every arm — equal only if every arm has the
same tokens, the same loss mask and the same loss normalisation (tokens, not rows). TRL's arm runs
where trl is installed (the ``bench`` extra, part of ``test``); without it the benchmark says so
and the other arms still run.
"""

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "train_throughput.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("train_throughput", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def store(tmp_path_factory, expert_trajs):
    from trajforge.store import TrajectoryStore

    root = tmp_path_factory.mktemp("throughput-store")
    st = TrajectoryStore(root)
    for t in expert_trajs:
        st.append(t)
    return root


@pytest.mark.slow
def test_arms_train_the_same_batches_and_report_ratios(tiny_model, store, tmp_path, capsys):
    bench = load_bench()
    out = tmp_path / "report.json"
    report = bench.main(["--model", tiny_model, "--data", str(store), "--steps", "2", "--warmup", "1",
                         "--batch", "2", "--max-len", "4096", "--work", str(tmp_path / "work"),
                         "--arms", "trajforge,shared,trl,raw,raw-hf", "--json", str(out)])
    printed = capsys.readouterr()
    arms = report["arms"]
    expected = {"trajforge", "shared", "raw", "raw-hf"} | ({"trl"} if importlib.util.find_spec("trl") else set())
    assert set(arms) == expected
    if "trl" not in arms:
        assert "pip install -e '.[bench]'" in printed.err
    for name, arm in arms.items():
        assert "error" not in arm, (name, arm)
        assert len(arm["step_seconds"]) == 2 and arm["tokens_per_s"] > 0
    first = {name: arm["first_loss"] for name, arm in arms.items()}
    assert max(first.values()) - min(first.values()) < 1e-4 * max(first.values()), first
    assert {"trajforge/raw", "shared/trajforge", "raw/raw-hf"} <= set(report["ratios"]) == set(report["step_ratios"])
    assert ("trajforge/trl" in report["ratios"]) == ("trl" in arms)
    assert report["measured_tokens"] > report["measured_loss_tokens"] > 0
    assert json.loads(out.read_text())["ratios"] == report["ratios"]
    assert "trajforge/raw" in printed.out


def test_relay_runs_one_arm_at_a_time_in_round_robin():
    import threading

    bench = load_bench()
    relay = bench.Relay(["a", "b", "c"])
    log, holding = [], []

    def arm(name: str, steps: int) -> None:
        clock = bench.Clock(name, relay, warmup=1, total=steps)
        try:
            clock.start()
            for step in range(1, steps + 1):
                holding.append(name)
                assert holding == [name]  # nobody else computes while this arm holds the baton
                log.append(name)
                holding.remove(name)
                clock.stepped(step)
            assert len(clock.seconds) == steps - 1  # the warm-up step is not counted
        finally:
            relay.pass_on(name, finished=True)

    threads = [threading.Thread(target=arm, args=(n, s)) for n, s in (("a", 3), ("b", 2), ("c", 3))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert log == ["a", "b", "c", "a", "b", "c", "a", "c"]
