"""Embedded-model cache logic (the download itself is exercised by `make demo`, never by tests)."""

import pytest

from trajforge.policies import models


def test_pull_converts_once_then_reuses_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAJFORGE_HOME", str(tmp_path))
    calls = []

    def fake_fetch(name, workdir):
        calls.append("fetch")
        return workdir / "m.gguf"

    def fake_convert(gguf, out):
        calls.append("convert")
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(models, "_fetch_gguf", fake_fetch)
    monkeypatch.setattr(models, "_convert", fake_convert)
    first = models.pull("smollm2-135m")
    assert first == tmp_path / "models" / "smollm2-135m" and calls == ["fetch", "convert"]
    assert models.pull("smollm2-135m") == first and calls == ["fetch", "convert"]
    assert models.resolve("smollm2-135m") == str(first)
    assert models.resolve("/some/local/path") == "/some/local/path"


def test_unknown_embedded_model():
    with pytest.raises(KeyError, match="unknown embedded model 'gpt-9'"):
        models.pull("gpt-9")
