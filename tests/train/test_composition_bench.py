"""benchmarks/composition.py at toy size: its padded count is what ``sequences.collate`` pads, its
run count takes the shared prefix once, and it reports every composition at every micro-batch."""

from benchmarks import composition as bench


def test_composition_counts_what_collate_pads_and_reports_every_arm(tiny_model, expert_trajs, tmp_path):
    from transformers import AutoTokenizer

    from trajforge.store import TrajectoryStore
    from trajforge.train.sequences import collate
    from trajforge.train.sft import SFTConfig, build_samples, epoch_rows, select

    store = TrajectoryStore(tmp_path / "store")
    for t in expert_trajs:
        store.append(t)
    out = bench.main(["--data", str(tmp_path / "store"), "--model", tiny_model, "--step", "8", "--seeds", "2"])
    assert set(out["table"]) == {"pairs", "half-step", "step", "micro"}
    assert all(set(arm) == {1, 2, 4, 8} for arm in out["table"].values())
    # One row a micro-batch: nothing is shared, and every composition pads the same.
    assert len({(arm[1]["pad"], arm[1]["run"]) for arm in out["table"].values()}) == 1
    assert out["table"]["pairs"][1]["pad"] == out["table"]["pairs"][1]["run"]

    cfg = SFTConfig()
    data, skipped = select(expert_trajs, cfg)
    tok = AutoTokenizer.from_pretrained(tiny_model)
    samples, _ = build_samples(data, tok, tiny_model, cfg, skipped)
    rows = epoch_rows(samples, 1.0, 4, 0, unit=2, step=8)
    padded, run = bench.costs(samples, rows)
    assert padded == sum(collate([samples[i] for i in r], 0)["input_ids"].numel() for r in rows)
    assert run < padded  # expert episodes of one toolset share their prompt
