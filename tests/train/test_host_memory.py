"""The training runtime's host-allocator setting (train/host_memory.py): its environment variable."""

from __future__ import annotations

import pytest

from trajforge.train.host_memory import MMAP_THRESHOLD, mmap_threshold


@pytest.mark.parametrize("value, expect", [(None, MMAP_THRESHOLD), ("", MMAP_THRESHOLD), (" ", MMAP_THRESHOLD),
                                           ("0", 0), ("8388608", 8 << 20)])
def test_the_threshold_is_read_from_the_environment(monkeypatch, value, expect):
    if value is None:
        monkeypatch.delenv("TRAJFORGE_MMAP_THRESHOLD", raising=False)
    else:
        monkeypatch.setenv("TRAJFORGE_MMAP_THRESHOLD", value)
    assert mmap_threshold() == expect


def test_a_threshold_that_is_no_integer_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("TRAJFORGE_MMAP_THRESHOLD", "8M")
    with pytest.raises(ValueError, match="TRAJFORGE_MMAP_THRESHOLD='8M': give bytes as an integer"):
        mmap_threshold()
