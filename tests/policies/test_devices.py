"""The one device choice: explicit beats $TRAJFORGE_DEVICE beats the best available; clear errors."""

import pytest
import torch

from trajforge.policies.devices import DeviceUnavailable, compute_dtype, pick_device


def test_explicit_then_environment_then_best(monkeypatch):
    monkeypatch.delenv("TRAJFORGE_DEVICE", raising=False)
    best = pick_device()
    assert best == ("cuda:0" if torch.cuda.is_available() else best)
    assert pick_device("cpu") == "cpu"
    monkeypatch.setenv("TRAJFORGE_DEVICE", "cpu")
    assert pick_device() == "cpu"
    assert pick_device(None) == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_a_missing_device_is_named(monkeypatch):
    monkeypatch.delenv("TRAJFORGE_DEVICE", raising=False)
    with pytest.raises(DeviceUnavailable, match="sees no CUDA device"):
        pick_device("cuda")
    monkeypatch.setenv("TRAJFORGE_DEVICE", "cuda:1")
    with pytest.raises(DeviceUnavailable, match="TRAJFORGE_DEVICE"):
        pick_device()
    with pytest.raises(DeviceUnavailable, match="unknown device 'tpu'"):
        pick_device("tpu")


def test_dtype_follows_the_device(monkeypatch):
    monkeypatch.delenv("TRAJFORGE_DTYPE", raising=False)
    assert compute_dtype("float32", "cpu") == torch.float32
    assert compute_dtype("auto", "mps") == torch.float32
    assert compute_dtype("auto", "cpu") in (torch.float32, torch.bfloat16)  # bf16 only with AMX/AVX512-BF16
    with pytest.raises(ValueError, match="unknown dtype"):
        compute_dtype("int3", "cpu")
    monkeypatch.setenv("TRAJFORGE_DTYPE", "bfloat16")
    assert compute_dtype("auto", "cpu") == torch.bfloat16
