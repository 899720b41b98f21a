"""CLI options come from the pydantic configs: one default per setting, checked for every command."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.cli.options import CONFIGS_ATTR, Options, check_defaults, config_commands, field_help, with_configs
from trajforge.harness import CollectConfig, HarnessConfig

CONFIG_BACKED = {"collect": {HarnessConfig, CollectConfig}, "eval": {HarnessConfig}, "synth": None, "demo": None,
                 "train sft": None, "train dpo": None, "train grpo": None}
"""Commands that must take their settings from configs (None: whichever config they name)."""


def test_every_cli_default_equals_its_config_default():
    commands = config_commands(app)
    assert set(CONFIG_BACKED) <= set(commands)
    problems = {name: check_defaults(fn) for name, fn in commands.items()}
    assert {k: v for k, v in problems.items() if v} == {}
    for name, configs in CONFIG_BACKED.items():
        declared = set(getattr(commands[name], CONFIGS_ATTR, ()))
        assert declared and (configs is None or configs <= declared), name


class Knobs(BaseModel):
    """A config for the tests."""

    turns: int = 8
    """Turns per episode. Extra words after the first sentence stay out of the help."""
    rate: float = Field(0.5, ge=0, le=1)
    """Share of something."""
    label: str | None = None
    """Optional label."""
    fast: bool = False
    """Go fast."""


def test_a_drifted_hand_written_default_is_reported():
    # The check must be able to fail: --rate retyped by hand with another default than Knobs'.
    @with_configs(knobs=Options(Knobs, exclude=("rate",)))
    def cmd(rate: float = typer.Option(0.3, "--rate"), knobs: Knobs = None) -> None: ...

    assert check_defaults(cmd) == ["--rate: CLI default 0.3, Knobs.rate default 0.5"]


def test_generated_options_build_the_config_and_name_the_bad_flag(tmp_path: Path):
    seen: list[Knobs] = []
    mini = typer.Typer()

    @mini.command()
    @with_configs(knobs=Options(Knobs, flags={"turns": "--max-turns"}))
    def run(name: str = typer.Option("x"), knobs: Knobs = None) -> None:
        seen.append(knobs)

    runner = CliRunner()
    assert runner.invoke(mini, []).exit_code == 0 and seen[-1] == Knobs()
    res = runner.invoke(mini, ["--max-turns", "3", "--rate", "0.25", "--label", "a", "--fast"])
    assert res.exit_code == 0 and seen[-1] == Knobs(turns=3, rate=0.25, label="a", fast=True)
    res = runner.invoke(mini, ["--rate", "2"])
    assert res.exit_code == 2 and "--rate" in res.output and "less than or equal to 1" in res.output
    help_text = runner.invoke(mini, ["--help"]).output
    assert "Turns per episode." in help_text and "Extra words" not in help_text


def test_field_help_is_the_first_sentence_of_the_docstring():
    assert field_help(CollectConfig, "tool_timeout_s") == "Deadline of one environment call (start, tool, verify)."
    assert field_help(Knobs, "turns") == "Turns per episode."


def test_collect_flags_keep_their_names_and_refuse_bad_values(tmp_path):
    res = CliRunner().invoke(app, ["collect", "--tasks", str(tmp_path / "t.jsonl"), "--policy", "expert",
                                   "--out", str(tmp_path / "s"), "--tool-timeout", "-1"])
    assert res.exit_code == 2 and "--tool-timeout" in res.output


@pytest.mark.parametrize("section", ["partial", "clash"])
def test_options_machinery_refuses_mistakes(section):
    if section == "partial":
        @with_configs(knobs=Options(Knobs, partial=True))
        def cmd(knobs: dict = None):
            return knobs

        assert cmd(knobs__turns=1, knobs__rate=0.1, knobs__label=None, knobs__fast=False)["turns"] == 1
    else:
        with pytest.raises(ValueError, match="--turns is both a hand-written option"):
            @with_configs(knobs=Knobs)
            def cmd(turns: int = typer.Option(8, "--turns"), knobs: Knobs = None): ...


def test_a_config_file_fills_what_the_flags_leave_at_their_defaults(tmp_path: Path):
    seen: list[tuple[Knobs, HarnessConfig]] = []
    mini = typer.Typer()

    @mini.command()
    @with_configs(config_file=True, knobs=Knobs, harness=HarnessConfig)
    def run(knobs: Knobs = None, harness: HarnessConfig = None) -> None:
        seen.append((knobs, harness))

    (tmp_path / "c.toml").write_text("[knobs]\nturns = 5\nrate = 0.1\n[harness]\nmax_turns = 12\n")
    runner = CliRunner()
    res = runner.invoke(mini, ["--config", str(tmp_path / "c.toml"), "--rate", "0.9"])
    assert res.exit_code == 0, res.output
    assert seen[-1] == (Knobs(turns=5, rate=0.9), HarnessConfig(max_turns=12))  # the flag wins over the file
    (tmp_path / "bad.toml").write_text("[knobs]\nturn = 5\n")
    res = runner.invoke(mini, ["--config", str(tmp_path / "bad.toml")])
    assert res.exit_code == 2 and "no option 'turn'" in res.output


def test_a_flag_given_wins_over_the_file_even_at_its_default(tmp_path: Path):
    """``--turns 8`` typed (Knobs' default) with ``turns = 5`` in the file: the file won, since a
    value equal to the default could not be told from one never given."""
    seen: list[Knobs] = []
    mini = typer.Typer()

    @mini.command()
    @with_configs(config_file=True, knobs=Knobs)
    def run(knobs: Knobs = None) -> None:
        seen.append(knobs)

    (tmp_path / "c.toml").write_text("turns = 5\nfast = true\n")
    runner = CliRunner()
    res = runner.invoke(mini, ["--config", str(tmp_path / "c.toml"), "--turns", "8", "--no-fast"])
    assert res.exit_code == 0, res.output
    assert seen[-1] == Knobs(turns=8, fast=False)
    assert runner.invoke(mini, ["--config", str(tmp_path / "c.toml")]).exit_code == 0
    assert seen[-1] == Knobs(turns=5, fast=True)  # untyped flags still take the file's values


@pytest.mark.parametrize("text,names", [
    ("harness = 5\n", "'harness' must be a table of settings ([harness]), got 5"),
    ("knobs = [1, 2]\n", "'knobs' must be a table of settings"),
    (b"\xff\xfe\x00", "can't decode byte 0xff"),
    ("[knobs]\nrate = 7\n", "c.toml: [knobs] rate: Input should be less than or equal to 1"),
])
def test_a_bad_config_file_is_an_error_naming_the_file_and_key(tmp_path: Path, text, names):
    """A key where a table belongs and a file that is not UTF-8 were tracebacks (AttributeError,
    UnicodeDecodeError); a bad value from the file was blamed on its flag (``--rate``), which the
    user never typed."""
    mini = typer.Typer()

    @mini.command()
    @with_configs(config_file=True, knobs=Knobs, harness=HarnessConfig)
    def run(knobs: Knobs = None, harness: HarnessConfig = None) -> None: ...

    path = tmp_path / "c.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    res = CliRunner().invoke(mini, ["--config", str(path)])
    assert res.exit_code == 2, res.output
    assert f"--config {path}" in res.output and names in res.output, res.output
