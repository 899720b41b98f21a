import os

import pytest

# Tests never touch a hub and keep their cache inside pytest's tmp area.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Rich wraps what the CLI prints at the terminal's width (80 when there is none); a message naming
# a long tmp path (a worker's is longer) would be cut mid-name, and a test looking for it fail.
os.environ.setdefault("COLUMNS", "240")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs one worker per core: torch (read at its import) and the processes tests
    # start keep to one thread each instead of oversubscribing the cores.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_collection_modifyitems(config, items):
    """Files holding a ``slow`` test run first; otherwise files and tests keep their order.

    Why: ``make test`` hands whole files to its two workers in collection order (``--dist loadfile
    --no-loadscope-reorder``). xdist's own order puts the files with the most tests first, which
    left the few long files (a tiny model end to end, several processes) for last, to run side by
    side when nothing else was left (the last 100-320 s of two full runs here). Started first, they
    overlap the many short files instead."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable: False (slow) first


@pytest.fixture(autouse=True)
def _trajforge_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.getbasetemp() / "trajforge-home"
    monkeypatch.setenv("TRAJFORGE_HOME", str(home))
    yield


def require_system(binary: str, package: str) -> str:
    """Path of a system binary a test needs; skip without it, or fail where CI demands it.

    ``make test`` installs these packages as root; CI sets TRAJFORGE_REQUIRE_SYSDEPS=1 so a missing
    package is a failure there instead of a silent skip.
    """
    import shutil

    path = shutil.which(binary)
    if path:
        return path
    msg = f"{binary} not found (Debian package {package!r}; `make test` installs it as root)"
    if os.environ.get("TRAJFORGE_REQUIRE_SYSDEPS") == "1":
        pytest.fail(msg)
    pytest.skip(msg)
