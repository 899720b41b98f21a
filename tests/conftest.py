import os

import pytest

# Tests never touch a hub and keep their cache inside pytest's tmp area.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _trajforge_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.getbasetemp() / "trajforge-home"
    monkeypatch.setenv("TRAJFORGE_HOME", str(home))
    yield
