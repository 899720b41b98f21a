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


def test_launch_sizes_come_from_the_plan():
    """--tensor-parallel-size / --gpu-memory-utilization / --max-model-len: the plan's serving
    estimate (train sft's max_len by default); flags given win, one by one."""
    from trajforge.serve.vllm import VllmLaunch, planned_launch
    from trajforge.train.plan import serve_memory
    from trajforge.train.sft import SFTConfig
    from trajforge.train.shapes import model_shape

    launch, note = planned_launch("Qwen/Qwen2.5-32B-Instruct", concurrency=8, gpu_gb=24)
    expected = serve_memory(model_shape("qwen2.5-32b"), "bfloat16", SFTConfig().max_len, 8, 24.0)
    assert note is None and launch == VllmLaunch(expected.tensor_parallel_size, expected.gpu_memory_utilization,
                                                 SFTConfig().max_len)
    assert launch.tensor_parallel_size == 4 and 0.5 < launch.gpu_memory_utilization <= 0.95
    given, _ = planned_launch("qwen2.5-32b", VllmLaunch(None, 0.9, 16384), concurrency=8, gpu_gb=24)
    assert given.gpu_memory_utilization == 0.9 and given.max_model_len == 16384
    # A longer context needs more KV cache: never fewer GPUs than at 4096.
    assert given.tensor_parallel_size >= launch.tensor_parallel_size
    argv = vllm_command("org/model", {}, launch=launch).argv
    assert argv[argv.index("--tensor-parallel-size") + 1] == "4"
    assert argv[argv.index("--max-model-len") + 1] == str(SFTConfig().max_len)
    unknown, note = planned_launch("org/unknown-model", VllmLaunch(2, None, None))
    assert unknown == VllmLaunch(2, None, None) and "not a known model" in note
    assert vllm_command("org/unknown-model", {}, launch=unknown).argv[-2:] == ["--tensor-parallel-size", "2"]


def test_print_vllm_cli_prints_the_planned_flags(tmp_path):
    from typer.testing import CliRunner

    from trajforge.cli.main import app

    a = fake_adapter(tmp_path / "a", r=64, dialect="hermes")
    res = CliRunner().invoke(app, ["serve", "--model", "qwen2.5-7b", "--adapter", f"sql={a}", "--print-vllm",
                                   "--gpu-gb", "24", "--serve-concurrency", "4", "--max-model-len", "8192"])
    assert res.exit_code == 0, res.output
    argv = shlex.split(res.stdout.strip().splitlines()[-1])
    flags = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    assert flags["--max-model-len"] == "8192" and flags["--max-lora-rank"] == "64"
    # 7.6B in bf16 (15.2 GB) + 4 × 8192 tokens of KV (1.9 GB) + buffers fits one 24 GB card.
    assert flags["--tensor-parallel-size"] == "1" and 0.7 < float(flags["--gpu-memory-utilization"]) <= 0.95


def test_the_command_says_vllm_does_not_show_an_adapters_demonstrations(tmp_path):
    a = fake_adapter(tmp_path / "a", dialect="hermes")
    meta = {"dialect": "hermes", "demos": {"pool": "demos.jsonl", "sha256": "0" * 64, "k": 3}}
    (tmp_path / "a" / "trajforge_adapter.json").write_text(json.dumps(meta))
    b = fake_adapter(tmp_path / "b", dialect="hermes")
    notes = vllm_command("org/model", {"a": a, "b": b}).notes
    shown = [n for n in notes if "demonstrations" in n]
    assert len(shown) == 1 and f"--demos 3 --demo-pool {a}" in shown[0] and shown[0].startswith("adapter a ")


@pytest.mark.parametrize("config", ['{"r": 8', '[8]', '{"r": "sixteen"}', '{"r": 8, "rank_pattern": {"q_proj": -1}}'])
def test_print_vllm_names_a_damaged_adapter_config(tmp_path, config):
    """--max-lora-rank is read from the adapter's config: a torn or wrong-typed one is exit 2 naming
    the file, not a traceback."""
    from typer.testing import CliRunner

    from trajforge.cli.main import app

    a = fake_adapter(tmp_path / "a", dialect="hermes")
    (tmp_path / "a" / "adapter_config.json").write_text(config)
    res = CliRunner().invoke(app, ["serve", "--model", "qwen2.5-7b", "--adapter", f"sql={a}", "--print-vllm"])
    assert res.exit_code == 2 and "adapter_config.json" in res.output and "Traceback" not in res.output, res.output
