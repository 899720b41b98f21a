"""The vLLM command line derived from the adapters: parser from their dialect, rank from their config."""

import json
import shlex

import pytest

from trajforge.serve import ServeConfigError, parse_adapter_specs, served_models, vllm_command
from trajforge.serve.vllm import VLLM_TOOL_PARSERS


def fake_adapter(path, r=8, dialect=None, rank_pattern=None):
    """Just the files the command is derived from (no weights are read)."""
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text(json.dumps({"r": r, "rank_pattern": rank_pattern or {}}))
    if dialect:
        (path / "trajforge_adapter.json").write_text(json.dumps({"dialect": dialect}))
    return str(path)


def test_command_for_real_adapters(tiny):
    base, adapters = tiny
    cmd = vllm_command(str(base), adapters)
    assert cmd.argv == ["vllm", "serve", str(base), "--enable-lora", "--lora-modules",
                        f"alpha={adapters['alpha']}", f"beta={adapters['beta']}", "--max-lora-rank", "4",
                        "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    assert shlex.split(cmd.line) == cmd.argv
    # The tiny model's ChatML template has no tool rendering: the command says so.
    assert any("does not render tools" in n for n in cmd.notes)
    with_template = vllm_command(str(base), adapters, chat_template="tools.jinja")
    assert with_template.argv[-2:] == ["--chat-template", "tools.jinja"] and not with_template.notes


@pytest.mark.parametrize("dialect,parser", sorted(VLLM_TOOL_PARSERS.items()))
def test_parser_follows_the_adapters_dialect(tmp_path, dialect, parser):
    a = fake_adapter(tmp_path / "a", r=16, dialect=dialect)
    b = fake_adapter(tmp_path / "b", r=8, rank_pattern={"q_proj": 64})
    cmd = vllm_command("org/model", {"a": a, "b": b})
    argv = cmd.argv
    assert argv[argv.index("--tool-call-parser") + 1] == parser
    assert argv[argv.index("--max-lora-rank") + 1] == "64"
    assert argv[2] == "org/model"


def test_disagreeing_dialects_are_refused(tmp_path):
    a = fake_adapter(tmp_path / "a", dialect="hermes")
    b = fake_adapter(tmp_path / "b", dialect="qwen3_xml")
    with pytest.raises(ServeConfigError, match=r"disagree.*a=hermes, b=qwen3_xml.*separate servers"):
        vllm_command("m", {"a": a, "b": b})
    with pytest.raises(ServeConfigError, match="--dialect=mistral"):
        vllm_command("m", {"a": a}, dialect="mistral")
    react = fake_adapter(tmp_path / "r", dialect="react")
    with pytest.raises(ServeConfigError, match="no vLLM tool-call parser"):
        vllm_command("m", {"r": react})


def test_embedded_model_prints_its_cache_folder(tmp_path):
    cmd = vllm_command("smollm2-135m", {})
    assert cmd.argv[2].endswith("models/smollm2-135m") and "--enable-lora" not in cmd.argv
    assert any("trajforge models pull smollm2-135m" in n for n in cmd.notes)


def test_adapter_specs_and_served_names(tmp_path):
    a = fake_adapter(tmp_path / "a", dialect="qwen3_xml")
    assert parse_adapter_specs([f"sql={a}"]) == {"sql": a}
    for bad, msg in [("sql", "NAME=DIR"), ("=x", "NAME=DIR"), ("-x=y", "must start")]:
        with pytest.raises(ServeConfigError, match=msg):
            parse_adapter_specs([bad])
    with pytest.raises(ServeConfigError, match="given twice"):
        parse_adapter_specs([f"x={a}", f"x={a}"])
    models = served_models("base", {"sql": a})
    assert models["base"].dialect.name == "hermes" and models["sql"].dialect.name == "qwen3_xml"
    with pytest.raises(ServeConfigError, match="trained with dialect 'qwen3_xml'.*--dialect is 'hermes'"):
        served_models("base", {"sql": a}, dialect="hermes")
    with pytest.raises(ServeConfigError, match="no adapter_config.json"):
        served_models("base", {"sql": str(tmp_path / "missing")})
    with pytest.raises(ServeConfigError, match="base model's name"):
        served_models("base", {"base": a})
    with pytest.raises(ServeConfigError, match="unknown dialect"):
        served_models("base", {}, dialect="klingon")
    with pytest.raises(ServeConfigError, match="needs a text dialect"):
        served_models("base", {}, dialect="openai")
