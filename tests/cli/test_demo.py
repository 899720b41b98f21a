"""`trajforge demo` composes the stages and writes the metrics contract (tiny model, no download)."""

import json

import pytest
from typer.testing import CliRunner

from tests.tiny import build_tiny_model
from trajforge.cli.demo import DEMO_COMPOSE, DemoConfig
from trajforge.cli.main import app
from trajforge.envs.sql.tasks import COMPOSE_TEMPLATES


@pytest.mark.slow
def test_demo_writes_metrics_and_report(tmp_path):
    model = build_tiny_model(tmp_path / "tiny")
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["demo", "--out", str(out), "--model", str(model), "--n", "40",
                                   "--world-train", "4", "--epochs", "0.2", "--json", str(tmp_path / "m.json"),
                                   "--compose", "3", "--compose-templates", "product_category"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    metrics = json.loads((tmp_path / "m.json").read_text())
    for policy in ("base", "tuned"):
        m = metrics[policy]
        assert {"completion", "validity", "avg_turns", "n"} <= set(m)
        assert m["n"] == sum(1 for line in (out / "tasks.jsonl").read_text().splitlines()
                             if json.loads(line)["split"] == "heldout")
        assert set(m["tiers"]) <= {"easy", "medium", "hard"} and m["tiers"]
    assert set(metrics["timings_s"]) >= {"pull model", "synthesize tasks", "collect expert trajectories",
                                         "train sft", "evaluate base", "evaluate tuned", "total"}
    tasks = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    # the train split spans vocabulary worlds 1..6 on top of world 0; test and held-out stay in world 0
    assert sorted({(t["split"], t.get("world", 0)) for t in tasks if t.get("world", 0)}) == [
        ("train", w) for w in range(1, DemoConfig().worlds)]
    # --compose adds train tasks of the chosen composition template only
    assert {t["template"] for t in tasks} & {t.id for t in COMPOSE_TEMPLATES} == {"product_category"}
    assert {t["split"] for t in tasks if t["template"] == "product_category"} == {"train"}
    html = (out / "report.html").read_text()
    assert "<table>" in html and "tuned" in html and "base" in html
    assert "Flipped tasks: base → tuned" in html and 'src="data:image/png;base64,' in html  # trajforge report
    assert "held-out split" in res.output


def test_demo_defaults_train_on_six_worlds_and_the_six_composition_templates():
    cfg = DemoConfig()
    assert (cfg.worlds, cfg.compose) == (7, 55) and cfg.compose_templates == list(DEMO_COMPOSE)
    assert set(DEMO_COMPOSE) <= {t.id for t in COMPOSE_TEMPLATES}
