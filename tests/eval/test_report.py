"""`trajforge report`: numbers match the metric definitions, flips are right, the page stands alone."""

import json
import re
import shutil

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.eval.metrics import evaluate, wilson
from trajforge.eval.report import build_report, flips, mean_ci, write_report
from trajforge.eval.rundir import Pair, load_run, pick_pair

from tests.eval.conftest import XSS


@pytest.fixture(scope="module")
def page(run_dir, tmp_path_factory):
    out = write_report(run_dir.root, tmp_path_factory.mktemp("report") / "report.html")
    return out.read_text()


def test_flips_both_ways(run_dir):
    improved, regressed = flips(run_dir.episodes, Pair("base", "tuned"))
    assert sorted(f.task_id for f in improved) == sorted(run_dir.improved)
    assert sorted(f.task_id for f in regressed) == sorted(run_dir.regressed)
    assert all(not f.before.outcome.correct and f.after.outcome.correct for f in improved)
    back, forth = flips(run_dir.episodes, Pair("tuned", "base"))
    assert {f.task_id for f in back} == set(run_dir.regressed) and {f.task_id for f in forth} == set(run_dir.improved)


def test_summary_numbers_match_the_metric_definitions(run_dir, page):
    for policy in ("base", "tuned"):
        m = evaluate([t for t in run_dir.episodes if t.policy == policy])
        k = round(m["completion"] * m["n"])
        lo, hi = wilson(k, m["n"])
        assert f"{100 * k / m['n']:.0f}% <span class=\"ci\">[{100 * lo:.0f}%, {100 * hi:.0f}%]</span> " \
               f"<span class=\"kn\">{k}/{m['n']}</span>" in page
        assert f"{m['avg_turns']:.2f} <span class=\"ci\">" in page
        assert f"{m['avg_reward']:.3f} <span class=\"ci\">" in page
    assert "33% → 83% (+50 pp)" in page and "8 tasks failed → solved" in page and "2 solved → failed" in page
    assert "<td><b>Δ after − before</b></td><td></td><td></td><td>+50 pp</td>" in page


def test_mean_interval():
    assert mean_ci([]) == (0.0, 0.0, 0.0) and mean_ci([2.0]) == (2.0, 2.0, 2.0)
    mean, _, hi = mean_ci([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and hi - mean == pytest.approx(1.959964 * 1.2909944 / 2)


def test_sections_links_and_conversations(run_dir, page):
    for heading in ("Completion by task tier", "Completion by environment", "Outcomes and fail reasons",
                    "Reward components", "Learning curves", "Flipped tasks: base → tuned"):
        assert f"<h2>{heading}</h2>" in page
    assert page.count('<img src="data:image/png;base64,') == 5
    for i, task in enumerate(sorted(run_dir.improved) + sorted(run_dir.regressed)):
        section = re.search(rf'<section class="flip" id="flip-{i}">(.*?)</section>', page, re.DOTALL).group(1)
        assert f"<code>{task}</code>" in section
        assert f'id="ep-{i}-before"' in section and f'id="ep-{i}-after"' in section
        assert f'href="#flip-{i}"' in page
    for reason in ("invalid_args", "no_call"):
        assert f"<b>{reason}</b>" in page
    # Wrong answers are listed by the environment's finer kind (grade/outcome.py FAIL_REASONS).
    from trajforge.grade.outcome import FAIL_REASONS

    wrong = [r for r in FAIL_REASONS if r.endswith("_answer") or r in ("logic_break", "retrieval_miss")]
    assert any(f"<b>{r}</b>" in page for r in wrong), wrong


def test_page_is_self_contained_and_escaped(page):
    assert "<script" not in page and XSS not in page
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched from anywhere
    assert "<style>" in page and ".side-by-side" in page


def test_metrics_json_facts_and_pair(run_dir, tmp_path):
    root = tmp_path / "run"
    shutil.copytree(run_dir.root, root)
    (root / "metrics.json").write_text(json.dumps({"model": "tiny", "policies": {"base": {}, "tuned": {}},
                                                   "timings_s": {"train sft": 1.5}}))
    (root / "train" / "sft" / "curves.jsonl").open("a").write('{"step": 41, "lo')
    page = (write_report(root)).read_text()
    assert (root / "report.html").exists()
    assert "<b>model</b>: tiny" in page and "train sft 1.5" in page
    assert "torn lines skipped</b>: " in page and "curves.jsonl:45" in page


def test_without_a_pair(run_dir):
    run = load_run(run_dir.root / "train_store")
    page = build_report(run, pick_pair(run), title="only <expert>")
    assert "No before/after pair" in page and "only &lt;expert&gt;" in page
    assert '<p class="headline">' not in page


def test_cli(run_dir, tmp_path):
    runner = CliRunner()
    out = tmp_path / "r.html"
    res = runner.invoke(app, ["report", str(run_dir.root), "--out", str(out), "--before", "tuned",
                              "--after", "base", "--title", "T"])
    assert res.exit_code == 0, res.output
    assert "report written to" in res.output and "<title>T</title>" in out.read_text()
    assert "Flipped tasks: tuned → base" in out.read_text()
    res = runner.invoke(app, ["report", str(run_dir.root), "--out", str(out), "--before", "nobody"])
    assert res.exit_code == 2 and "policy 'nobody' is not in" in res.output
    res = runner.invoke(app, ["report", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_ungraded_episodes_and_the_flip_cap(run_dir, tmp_path, monkeypatch):
    from trajforge.eval import report
    from trajforge.store import TrajectoryStore

    store = TrajectoryStore(tmp_path / "store")
    for t in run_dir.episodes:
        ungraded = t.policy == "base" and t.task_id == run_dir.improved[1]
        store.append(t.model_copy(update={"outcome": None, "reward": None}) if ungraded else t)
    monkeypatch.setattr(report, "MAX_FLIP_EPISODES", 3)
    page = write_report(tmp_path).read_text()
    assert 'class="badge tier-ungraded">ungraded' in page
    assert page.count('<section class="flip"') == 3 and "The first 3 of 10 flipped tasks" in page
    assert page.count("not rendered") == 7


def test_pass_at_k_column_for_sampled_policies(run_dir):
    from trajforge.eval.report import _summary_table, policy_stats

    base = [t for t in run_dir.episodes if t.policy == "base"]
    tuned = [t for t in run_dir.episodes if t.policy == "tuned"]
    # Two samples per task for "sampled": the first solves nothing, the second solves every task.
    first = [t.model_copy(update={"policy": "sampled", "outcome": t.outcome.model_copy(update={"tier": "failed", "fail_reason": "wrong_answer"})})
             for t in base]
    second = [t.model_copy(update={"policy": "sampled", "sample": 1,
                                   "outcome": t.outcome.model_copy(update={"tier": "success", "fail_reason": None})}) for t in base]
    stats = {"tuned": policy_stats(tuned), "sampled": policy_stats(first + second)}
    html = _summary_table(stats, None)
    assert "<th>pass@k</th>" in html and "@1 50% · @2 100%" in html
    assert "pass@k" not in _summary_table({"tuned": stats["tuned"]}, None)  # one sample each: no column


def test_cli_names_a_metrics_json_it_cannot_read(run_dir, tmp_path):
    """``policies`` that is not an object keyed by policy name: exit 2 naming the file (pick_pair
    raised TypeError: 'int' object is not iterable), and no page half-written."""
    root = tmp_path / "run"
    shutil.copytree(run_dir.root, root)
    (root / "metrics.json").write_text(json.dumps({"policies": 5}))
    res = CliRunner().invoke(app, ["report", str(root)])
    assert res.exit_code == 2, res.exception
    assert "metrics.json: 'policies' must be an object keyed by policy name, got 5" in res.output
    assert not (root / "report.html").exists()


def test_a_curve_matplotlib_cannot_scale_is_named_and_the_page_still_written(run_dir, tmp_path):
    """A diverged run's loss spanning ±1e308: matplotlib cannot lay out the axis (ValueError); the
    report says so for that curve instead of writing no page."""
    root = tmp_path / "run"
    shutil.copytree(run_dir.root, root)
    rows = [{"step": 1, "recipe": "sft", "loss": -1e308}, {"step": 2, "recipe": "sft", "loss": 1e308}]
    (root / "train" / "sft" / "curves.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(app, ["report", str(root)])
    assert res.exit_code == 0, res.output
    assert "could not be plotted" in (root / "report.html").read_text()


def test_names_are_drawn_as_written_in_the_plots(run_dir, tmp_path, monkeypatch):
    """``$...$`` in a policy or env name is not matplotlib math (``$\\x^$`` raised while drawing, so
    no page was written), and a policy named ``_...`` keeps its legend entry (matplotlib hid it)."""
    from trajforge.eval import plots
    from trajforge.store import TrajectoryStore

    names = {"base": "b$\\x^$", "tuned": "_tuned"}
    store = TrajectoryStore(tmp_path / "store")
    for t in run_dir.episodes:
        store.append(t.model_copy(update={"policy": names[t.policy], "env": "$\\env$"}))
    figs, png = [], plots.png
    monkeypatch.setattr(plots, "png", lambda fig: figs.append(fig) or png(fig))
    run = load_run(tmp_path)
    page = build_report(run, Pair(names["base"], names["tuned"]))
    assert page.count('<img src="data:image/png;base64,') == 4  # tier, env, fail reasons, rewards
    legends = [[t.get_text() for t in ax.get_legend().get_texts()] for fig in figs for ax in fig.axes
               if ax.get_legend()]
    assert legends == [["b\\$\\x^\\$", "_tuned"]] * 4
