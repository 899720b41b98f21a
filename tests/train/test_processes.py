"""Several processes: a 2-process gloo run equals a 1-process run with the same effective batch.

``trajforge train sft --processes 2`` relaunches itself under ``torch.distributed.run`` (gloo on
CPUs); each process takes every other micro-batch of a step (accelerate's sharded loader), the
gradients are all-reduced once per step, and every micro-batch's loss is its share of the step's
global token count. One process with ``--grad-accum 2`` sees exactly the same micro-batches per
step, so the two adapters must agree.

Tolerance: the all-reduce adds the two processes' gradients in another order than one process's
accumulation does, which moves fp32 gradients by ~1e-7 relative; AdamW's per-element update
lr·m/(√v+ε) is smooth in the gradient (no element here has a gradient near ε), so after three
steps at lr 1e-2 the weights agree to ~1e-6. We allow 2e-5 absolute / 1e-4 relative.
"""

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from trajforge.store import TrajectoryStore


@pytest.fixture
def store(expert_trajs, tmp_path):
    s = TrajectoryStore(tmp_path / "store")
    for t in expert_trajs:
        s.append(t)
    return tmp_path / "store"


def _cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trajforge.cli.main", "train", *args], capture_output=True,
                          text=True, timeout=240, env=env)


@pytest.mark.slow
def test_two_processes_train_the_same_adapter_as_one(store, tiny_model, tmp_path):
    env = {**os.environ, "TRAJFORGE_DTYPE": "float32", "OMP_NUM_THREADS": "1"}
    common = ["--data", str(store), "--model", tiny_model, "--r", "4", "--dropout", "0", "--lr", "1e-2",
              "--batch-size", "2", "--max-steps", "3", "--replay-share", "0", "--device", "cpu"]
    one = _cli(["sft", *common, "--grad-accum", "2", "--out", str(tmp_path / "one")], env)
    assert one.returncode == 0, one.stderr[-3000:]
    two = _cli(["sft", *common, "--grad-accum", "1", "--processes", "2", "--out", str(tmp_path / "two")], env)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "launching 2 processes" in two.stderr
    a = load_file(str(tmp_path / "one" / "adapter_model.safetensors"))
    b = load_file(str(tmp_path / "two" / "adapter_model.safetensors"))
    assert a.keys() == b.keys()
    before = {k: v for k, v in a.items() if "lora_B" in k}
    assert all(v.abs().max() > 1e-4 for v in before.values())  # training moved every B matrix
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=2e-5)
    rows = [json.loads(x) for x in (tmp_path / "two" / "curves.jsonl").read_text().splitlines()]
    ones = [json.loads(x) for x in (tmp_path / "one" / "curves.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in rows] == pytest.approx([r["loss"] for r in ones], rel=1e-5)
    meta = json.loads((tmp_path / "two" / "trajforge_adapter.json").read_text())
    assert meta["config"]["grad_accum"] == 1 and (tmp_path / "two" / "accelerate.yaml").exists()


@pytest.mark.slow
def test_a_derived_micro_batch_learns_the_same_on_two_processes_as_on_one(store, tiny_model, tmp_path):
    """No --batch-size or --grad-accum: one process settles a micro-batch of 4, two processes 2
    each (the main process decides, broadcast as an int); the steps hold the same sequences
    (sft.run_rows), so the adapters match."""
    env = {**os.environ, "TRAJFORGE_DTYPE": "float32", "OMP_NUM_THREADS": "1"}
    common = ["--data", str(store), "--model", tiny_model, "--r", "4", "--dropout", "0", "--lr", "1e-2",
              "--max-steps", "2", "--replay-share", "0", "--device", "cpu", "--no-gradient-checkpointing"]
    one = _cli(["sft", *common, "--out", str(tmp_path / "one")], env)
    assert one.returncode == 0, one.stderr[-3000:]
    two = _cli(["sft", *common, "--processes", "2", "--out", str(tmp_path / "two")], env)
    assert two.returncode == 0, two.stderr[-3000:]
    configs = [json.loads((tmp_path / d / "trajforge_adapter.json").read_text())["config"] for d in ("one", "two")]
    assert [(c["batch_size"], c["grad_accum"]) for c in configs] == [(4, 1), (2, 1)]
    a = load_file(str(tmp_path / "one" / "adapter_model.safetensors"))
    b = load_file(str(tmp_path / "two" / "adapter_model.safetensors"))
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=2e-5)
