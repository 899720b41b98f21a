"""Bad command-line input stops with a one-line error naming the flag (exit code 2), before any work:
no traceback, no episode collected or model loaded first, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from trajforge.cli import targets
from trajforge.cli.main import app
from trajforge.tasks import synthesize
from trajforge.tasks.pool import write_tasks

runner = CliRunner()


@pytest.fixture()
def pool(tmp_path) -> Path:
    path = tmp_path / "tasks.jsonl"
    write_tasks(path, synthesize("sql", 6, seed=1).tasks)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    (tmp_path / "chats.jsonl").write_text("")
    return path


def collect(*more):
    return ["collect", "--tasks", "{pool}", "--policy", "expert", *more]


CASES = {  # name → (args, what the error must say); {tmp} and {pool} are filled in
    "collect --out a file": (collect("--out", "{tmp}/afile"), "--out {tmp}/afile is a file"),
    "collect --out under a file": (collect("--out", "{tmp}/afile/store"), "--out {tmp}/afile/store"),
    "collect --samples 0": (collect("--out", "{tmp}/s", "--samples", "0"), "'--samples'"),
    "collect --temperature -1": (collect("--out", "{tmp}/s", "--temperature", "-1"), "'--temperature'"),
    "collect --processes 0": (collect("--out", "{tmp}/s", "--processes", "0"), "'--processes'"),
    "collect --max-turns 0": (collect("--out", "{tmp}/s", "--max-turns", "0"), "--max-turns"),
    "collect --max-repeats 0": (collect("--out", "{tmp}/s", "--max-repeats", "0"), "--max-repeats"),
    "eval --processes -1": (["eval", "--tasks", "{pool}", "--policy", "expert", "--processes", "-1"], "'--processes'"),
    "eval --json a folder": (["eval", "--tasks", "{pool}", "--policy", "expert", "--split", "", "--json", "{tmp}/adir"],
                             "--json {tmp}/adir is a folder"),
    "eval --json under a file": (["eval", "--tasks", "{pool}", "--policy", "expert", "--split", "",
                                  "--json", "{tmp}/afile/m.json"], "is a file, not a folder"),
    "synth --out a folder": (["synth", "--n", "3", "--out", "{tmp}/adir"], "--out {tmp}/adir is a folder"),
    "synth --rejected under a file": (["synth", "--n", "3", "--out", "{tmp}/p.jsonl", "--rejected", "{tmp}/afile/r"],
                                      "--rejected {tmp}/afile/r"),
    "synth --tier-samples 0": (["synth", "--n", "3", "--out", "{tmp}/p.jsonl", "--tier-by", "expert",
                                "--tier-samples", "0"], "'--tier-samples'"),
    "synth --similarity 5": (["synth", "--n", "3", "--out", "{tmp}/p.jsonl", "--similarity", "5"],
                             "--similarity: Input should be less than or equal to 1"),
    "synth --llm-concurrency 0": (["synth", "--n", "3", "--out", "{tmp}/p.jsonl", "--llm-concurrency", "0"],
                                  "--llm-concurrency: Input should be greater than or equal to 1"),
    "import-openai --out a file": (["import-openai", "{tmp}/chats.jsonl", "--env", "sql", "--out", "{tmp}/afile"],
                                   "--out {tmp}/afile is a file"),
    "train sft --out under a file": (["train", "sft", "--data", "{tmp}", "--out", "{tmp}/afile/adapter"],
                                     "--out {tmp}/afile/adapter"),
    "train sft --epochs 0": (["train", "sft", "--data", "{tmp}", "--out", "{tmp}/a", "--epochs", "0"],
                             "--epochs: Input should be greater than 0"),
    "train sft --lr 0": (["train", "sft", "--data", "{tmp}", "--out", "{tmp}/a", "--lr", "0"],
                         "--lr: Input should be greater than 0"),
    "train dpo --lr -1": (["train", "dpo", "--data", "{tmp}", "--out", "{tmp}/a", "--lr", "-1"], "--lr: Input"),
    "train grpo --lr 0": (["train", "grpo", "--tasks", "{pool}", "--out", "{tmp}/a", "--lr", "0"], "--lr: Input"),
    "train sft --processes 0": (["train", "sft", "--data", "{tmp}", "--out", "{tmp}/a", "--processes", "0"],
                                "'--processes'"),
    "view --port -1": (["view", "{tmp}", "--port", "-1"], "'--port'"),
    "serve --port 70000": (["serve", "--model", "smollm2-135m", "--port", "70000"], "'--port'"),
    "models pull unknown": (["models", "pull", "no-such-model"], "unknown embedded model 'no-such-model'"),
    "plan --gpus 0": (["plan", "--gpus", "0"], "'--gpus'"),
    "plan --tokens-per-s 0": (["plan", "--tokens-per-s", "0"], "--tokens-per-s must be above 0"),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_a_one_line_error_before_any_work(case, pool, tmp_path):
    args, message = CASES[case]
    fill = {"tmp": str(tmp_path), "pool": str(pool)}
    before = sorted(p.name for p in tmp_path.iterdir())
    res = runner.invoke(app, [a.format(**fill) for a in args])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output  # not a traceback
    assert message.format(**fill) in " ".join(res.output.split()), res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    assert (tmp_path / "afile").read_text() == "x"


def test_an_unwritable_folder_is_named(pool, tmp_path, monkeypatch):
    # (chmod 000 does not stop root, so the permission check is what is faked, for tmp_path only)
    access = targets.os.access
    monkeypatch.setattr(targets.os, "access", lambda path, mode: Path(path) != tmp_path and access(path, mode))
    res = runner.invoke(app, [a.format(pool=pool) for a in collect("--out", str(tmp_path / "store"))])
    assert res.exit_code == 2 and f"no permission to write in {tmp_path}" in " ".join(res.output.split())
    assert not (tmp_path / "store").exists()


def test_eval_json_in_a_new_folder_is_written(pool, tmp_path):
    out = tmp_path / "new" / "metrics.json"
    res = runner.invoke(app, ["eval", "--tasks", str(pool), "--policy", "expert", "--split", "", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert out.is_file()
