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


def test_curves_values_json_or_float_cannot_hold_are_named(tmp_path):
    """Numbers past a float, a step that is not finite, nesting past the recursion limit, an
    integer past the int-string limit, bytes that are not UTF-8: each names the file and line
    (they were OverflowError / RecursionError tracebacks, or a ValueError naming nothing)."""
    path = tmp_path / "curves.jsonl"
    for bad, why in [('{"step": 1, "loss": 1' + "0" * 400 + "}", "'loss' is too large for a float"),
                     ('{"step": 1, "lr": 1' + "0" * 400 + "}", "'lr' is too large for a float"),
                     ('{"step": 1, "eval": {"completion": 1' + "0" * 400 + "}}", "'eval.completion' is too large"),
                     ('{"step": 1e400, "loss": 1.0}', "'step' must be a finite number, got inf"),
                     ('{"step": NaN, "loss": 1.0}', "'step' must be a finite number, got nan"),
                     ('{"step": 1, "x": ' + "[" * 100_000, "not a JSON line \\(maximum recursion"),
                     ('{"step": 1, "loss": 1' + "0" * 5000 + "}", "not a JSON line \\(Exceeds the limit")]:
        path.write_text('{"step": 1, "loss": 2.0}\n' + bad + '\n{"step": 3, "loss": 1.0}\n')
        with pytest.raises(ValueError, match=rf"curves.jsonl:2: {why}"):
            read_curves(path, tmp_path)
    path.write_bytes(b'{"step": 1, "loss": 2.0}\n\xff\xfe\n')
    with pytest.raises(ValueError, match=r"curves.jsonl: not UTF-8 text"):
        read_curves(path, tmp_path)


def test_resumed_curves_do_not_glue_onto_a_torn_tail(tmp_path):
    """A run killed mid-write, resumed (``Curves(append=True)``): the torn row is cut so the new
    rows start on their own line; a whole row that lost only its newline is kept."""
    from trajforge.train.curves import Curves

    writer = Curves(tmp_path, "sft")
    writer.log(1, loss=2.0)
    with open(writer.path, "a") as f:
        f.write('{"recipe": "sft", "step": 2, "lo')  # the kill
    Curves(tmp_path, "sft", append=True).log(2, loss=1.5)
    curves, torn = read_curves(writer.path, tmp_path)
    assert curves.loss == [(1, 2.0), (2, 1.5)] and torn == []
    with open(writer.path, "a") as f:
        f.write('{"recipe": "sft", "step": 3, "loss": 1.25}')  # killed before the newline
    Curves(tmp_path, "sft", append=True).log(4, loss=1.0)
    assert read_curves(writer.path, tmp_path)[0].loss == [(1, 2.0), (2, 1.5), (3, 1.25), (4, 1.0)]


@pytest.mark.parametrize("rel, text, why", [
    ("metrics.json", "[1, 2]", "metrics.json: must be a JSON object, got list"),
    ("metrics.json", '{"policies": 5}', "metrics.json: 'policies' must be an object keyed by policy name, got 5"),
    ("metrics.json", "[" * 100_000, "metrics.json: not valid JSON \\(maximum recursion"),
    ("a/trajforge_adapter.json", '{"config": [1]}', "trajforge_adapter.json: 'config' must be an object"),
    ("a/trajforge_adapter.json", '{"result": {"samples": "8"}}', "'result.samples' must be a number, got '8'"),
    ("a/trajforge_adapter.json", '{"config": {"lr": "2e-4"}}', "'config.lr' must be a number, got '2e-4'"),
    ("a/trajforge_adapter.json", '{"rft": {"rounds": [1, 2]}}', "'rft.rounds' must hold objects, got 1"),
    ("a/trajforge_adapter.json", '{"rft": {"rounds": [{"round": null}]}}', "'rft.rounds\\[\\].round' must be a number"),
    ("a/trajforge_adapter.json", "[]", "trajforge_adapter.json: must be a JSON object, got list"),
])
def test_metrics_and_adapter_files_of_the_wrong_shape(tmp_path, rel, text, why):
    """Files doctor and report compute with, in a shape they cannot: an error naming the file and
    the field (they were TypeError / AttributeError / RecursionError tracebacks from the rules,
    or a metrics list silently read as no metrics)."""
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text(text)
    with pytest.raises(ValueError, match=why):
        load_run(tmp_path, require_stores=False)
    (tmp_path / rel).write_bytes(b"\xff\xfe{}")
    with pytest.raises(ValueError, match=rf"{rel.split('/')[-1]}: not UTF-8 text"):
        load_run(tmp_path, require_stores=False)
