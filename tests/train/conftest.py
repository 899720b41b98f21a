"""Shared fixtures for training tests: a tiny model (no download) and executed expert episodes."""

import pytest

from tests.tiny import build_tiny_model


@pytest.fixture(autouse=True)
def _fp32(monkeypatch):
    """Training tests compute in fp32: "auto" picks bf16 on CPUs with AMX and fp32 elsewhere, and
    golden losses must not depend on which machine CI lands on."""
    monkeypatch.setenv("TRAJFORGE_DTYPE", "float32")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny-train")))


@pytest.fixture(scope="session")
def sql_tasks():
    from trajforge.tasks import synthesize

    return synthesize("sql", 40, seed=3).tasks


@pytest.fixture(scope="session")
def expert_trajs(sql_tasks):
    from trajforge.grade import graded
    from trajforge.harness import run_episodes
    from trajforge.policies import make_policy

    train = [t for t in sql_tasks if t.split == "train"]
    return [graded(t) for t in run_episodes(train, make_policy("expert"))]
