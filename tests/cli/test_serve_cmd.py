"""`trajforge serve`: a real server process answering the openai client; `--print-vllm`; bad options."""

import os
import subprocess
import sys

import openai
import pytest
from typer.testing import CliRunner

from tests.tiny import build_tiny_adapter, build_tiny_model
from trajforge.cli.main import app


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-cmd")
    base = build_tiny_model(root / "base")
    return base, build_tiny_adapter(base, root / "sql", seed=3)


@pytest.mark.slow  # a fresh interpreter imports torch and transformers: ~15 s on 2 cores
def test_serve_process_answers_the_openai_client(tiny):
    base, adapter = tiny
    proc = subprocess.Popen(
        [sys.executable, "-m", "trajforge.cli.main", "serve", "--model", str(base),
         "--adapter", f"sql={adapter}", "--port", "0", "--dtype", "float32"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"serving {base}, sql at http://127.0.0.1:"), line
        client = openai.OpenAI(base_url=line.split(" at ")[1].split()[0], api_key="unused", max_retries=0)
        assert [m.id for m in client.models.list().data] == [str(base), "sql"]
        resp = client.chat.completions.create(model="sql", messages=[{"role": "user", "content": "hi"}],
                                              max_tokens=3, temperature=0)
        assert resp.usage.completion_tokens == 3 and resp.choices[0].finish_reason == "length"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_print_vllm(tiny):
    base, adapter = tiny
    res = CliRunner().invoke(app, ["serve", "--model", str(base), "--adapter", f"sql={adapter}", "--print-vllm"])
    assert res.exit_code == 0, res.output
    assert f"vllm serve {base} --enable-lora --lora-modules sql={adapter} --max-lora-rank 4 " \
           "--enable-auto-tool-choice --tool-call-parser hermes" in res.output
    assert "# note:" in res.output  # the tiny ChatML template renders no tools


@pytest.mark.parametrize("args,message", [
    (["--adapter", "sql"], "expected NAME=DIR"),
    (["--adapter", "sql=/nonexistent"], "no adapter_config.json"),
    (["--dialect", "klingon"], "unknown dialect"),
])
def test_bad_options_fail_before_loading(tiny, args, message):
    res = CliRunner().invoke(app, ["serve", "--model", str(tiny[0]), *args])
    assert res.exit_code == 2 and message in res.output
