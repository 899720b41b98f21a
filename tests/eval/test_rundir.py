"""Reading a run directory: stores found by content, policies, the before/after pair, curves."""

import json
import shutil

import pytest

from trajforge.eval.rundir import Pair, find_shards, load_run, pick_pair, read_curves


def test_stores_are_found_by_content(run_dir):
    shards = [p.relative_to(run_dir.root).as_posix() for p in find_shards(run_dir.root)]
    assert shards == ["eval_store/trajectories.jsonl", "train_store/trajectories.jsonl"]  # not tasks/curves
    run = load_run(run_dir.root)
    assert run.policies == ["base", "tuned", "expert"] and len(run.episodes) == 28
    assert [c.source for c in run.curves] == ["train/sft/curves.jsonl"]
    assert len(run.curves[0].loss) == 40 and set(run.curves[0].evals) == {"completion", "validity", "avg_turns"}
    assert run.curves[0].evals["completion"][-1] == (40, 1.0)
    # One shard can be a run directory by itself.
    single = load_run(run_dir.root / "eval_store" / "trajectories.jsonl")
    assert single.policies == ["base", "tuned"] and single.curves == []


def test_pair_from_metrics_then_overlap_then_explicit(run_dir, tmp_path):
    root = tmp_path / "run"
    shutil.copytree(run_dir.root, root)
    # No metrics.json: the two policies sharing the most tasks, in order of appearance.
    assert pick_pair(load_run(root)) == Pair("base", "tuned")
    (root / "metrics.json").write_text(json.dumps({"policies": {"tuned": {}, "missing": {}, "base": {}}}))
    assert pick_pair(load_run(root)) == Pair("tuned", "base")
    run = load_run(root)
    assert pick_pair(run, "base", "expert") == Pair("base", "expert")
    assert pick_pair(run, after="base") == Pair("tuned", "base")
    with pytest.raises(ValueError, match="policy 'nope' is not in .*policies there: base, tuned, expert"):
        pick_pair(run, before="nope")
    assert pick_pair(load_run(root / "train_store")) is None  # one policy: nothing to compare


def test_curves_torn_tail_is_skipped_bad_lines_are_named(tmp_path):
    path = tmp_path / "train" / "grpo" / "curves.jsonl"
    path.parent.mkdir(parents=True)
    # Rows as trajforge.train.curves writes them: recipe, step, loss + extras, eval with bookkeeping.
    path.write_text('{"recipe": "grpo", "step": 1, "loss": 2.0, "lr": 1e-4, "grad_norm": 0.5}\n'
                    '{"recipe": "grpo", "step": 1, "skipped_nonfinite": 1}\n'
                    '{"recipe": "grpo", "step": 2, "eval": {"step": 2, "n": 12, "completion": 0.5, '
                    '"tiers": {"easy": 1}, "best": null}}\n{"step": 3, "lo')
    curves, torn = read_curves(path, tmp_path)
    assert curves.recipe == "grpo" and curves.source == "train/grpo/curves.jsonl"
    assert curves.loss == [(1, 2.0)] and curves.evals == {"completion": [(2, 0.5)]}
    assert torn == [f"{path}:4"]
    for bad, why in [('{"loss": 1.0}', "must be an object with a 'step'"),
                     ('{"step": 1, "loss": "high"}', "'loss' must be a number, got 'high'"),
                     ('{"step": 1, "eval": [1]}', "'eval' must be an object"),
                     ('{"step": "one"}', "'step' must be a number"),
                     ("not json", "not a JSON line")]:
        path.write_text('{"step": 1, "loss": 2.0}\n' + bad + "\n")
        with pytest.raises(ValueError, match=rf"curves.jsonl:2: .*{why[:20]}"):
            read_curves(path, tmp_path)


def test_bad_run_directories(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_run(tmp_path / "nope")
    (tmp_path / "tasks.jsonl").write_text('{"id": "t1", "env": "sql"}\n')
    with pytest.raises(ValueError, match="no trajectory store under"):
        load_run(tmp_path)
