"""SFT's derived defaults (train/defaults.py): the seeds' values for a 7B LoRA, values that learn
in a short run for the embedded model, and a given value always winning."""

from __future__ import annotations

import json

import pytest

from trajforge.train.defaults import (CHECKPOINT_HEADROOM, MAX_EPOCHS, MICRO_BATCH_FALLBACK, MIN_STEPS, Derived,
                                      auto_batch, auto_checkpointing, auto_epochs, auto_lr, auto_micro_batch, derive,
                                      model_params, planned_peak_gb, settle_micro_batch)
from trajforge.train.plan import GB, Hardware, Workload, train_memory
from trajforge.train.shapes import model_shape
from trajforge.train.sft import SFTConfig, train_sft

QWEN_7B = 7_615_616_512
SMOLLM2_135M = 134_515_008


def test_a_7b_lora_on_a_few_thousand_demonstrations_gets_the_seeds_values():
    cfg, why = derive(SFTConfig(batch_size=2), QWEN_7B, demonstrations=4000, world=1)
    assert cfg.lr == pytest.approx(2e-4, rel=0.05) and cfg.r == 32
    assert cfg.batch_size * cfg.grad_accum == 32
    # Eight GPUs reach the same 32 with less accumulation.
    eight, _ = derive(SFTConfig(batch_size=2), QWEN_7B, demonstrations=4000, world=8)
    assert eight.batch_size * eight.grad_accum * 8 == 32 and eight.grad_accum == 2
    assert len(why.why) == 3 and why.effective_batch == 32 and why.epochs == 1
    # With the micro-batch derived too, both wait for the device's memory: 32 is the target.
    auto, record = derive(SFTConfig(), QWEN_7B, demonstrations=4000, world=1)
    assert (auto.batch_size, auto.grad_accum, record.effective_batch) == (None, None, 32)


def test_the_embedded_model_on_the_demos_data_gets_the_demos_recipe():
    """182 demonstrations (the demo's train split): lr 1e-3 and batch 4, what the demo's tuned
    recipe uses, instead of the 7B values that left it at 10% held-out."""
    cfg, why = derive(SFTConfig(batch_size=2), SMOLLM2_135M, demonstrations=182, world=1)
    assert cfg.lr == pytest.approx(1e-3)
    assert cfg.batch_size * cfg.grad_accum == 4
    steps = why.sequences_per_epoch * cfg.epochs / 4
    assert steps >= MIN_STEPS


def test_the_demos_pool_gets_one_pass_at_batch_4_the_demos_recipe():
    """603 demonstrations (the demo's pool since stop 51): one pass at batch 4, 151 steps, which is
    what the demo trains with; a small store gets more passes until it has its hundred steps."""
    cfg, why = derive(SFTConfig(replay_share=0.0), SMOLLM2_135M, demonstrations=603)
    assert (cfg.epochs, why.effective_batch, cfg.lr) == (1, 4, pytest.approx(1e-3))
    assert why.epochs == 1 and any(line.startswith("epochs 1") for line in why.why)
    small, record = derive(SFTConfig(replay_share=0.0), SMOLLM2_135M, demonstrations=182)
    assert small.epochs == 3 and 182 * 3 / record.effective_batch >= MIN_STEPS
    tiny, _ = derive(SFTConfig(replay_share=0.0), SMOLLM2_135M, demonstrations=20)
    assert tiny.epochs == MAX_EPOCHS  # capped: not 20 passes of memorising 20 demonstrations
    big, record = derive(SFTConfig(replay_share=0.0), QWEN_7B, demonstrations=4000)
    assert big.epochs == 1 and record.effective_batch == 32


def test_the_rule_is_monotone_and_bounded():
    sizes = [50e6, 135e6, 0.5e9, 1.5e9, 7e9, 14e9, 70e9]
    lrs = [auto_lr(int(p)) for p in sizes]
    assert lrs == sorted(lrs, reverse=True) and 1e-4 <= min(lrs) and max(lrs) <= 1e-3
    batches = [auto_batch(n) for n in (10, 400, 800, 1600, 3200, 1e6)]
    assert batches == sorted(batches) and batches[0] == 4 and batches[-1] == 32
    assert all(b & (b - 1) == 0 for b in batches)  # powers of two
    passes = [auto_epochs(n) for n in (1, 50, 100, 200, 399, 400, 10_000)]
    assert passes == sorted(passes, reverse=True) and passes[0] == MAX_EPOCHS and passes[-1] == 1


def test_a_given_value_wins_and_nothing_is_recorded_for_it():
    cfg, why = derive(SFTConfig(lr=3e-5, batch_size=2, grad_accum=3, epochs=2.5), SMOLLM2_135M, demonstrations=182)
    assert (cfg.lr, cfg.grad_accum, cfg.epochs) == (3e-5, 3, 2.5) and why.why == []
    # A given accumulation without a micro-batch: the effective batch is the user's, the micro-batch the old 2.
    cfg, why = derive(SFTConfig(grad_accum=3), SMOLLM2_135M, demonstrations=182)
    assert (cfg.batch_size, cfg.grad_accum) == (MICRO_BATCH_FALLBACK, 3) and "was given" in why.why[-1]


def test_model_params_reads_the_shape_without_weights():
    assert model_params("qwen2.5-7b") == QWEN_7B


def test_train_sft_without_tuning_flags_records_what_it_derived(tiny_model, expert_trajs, tmp_path):
    res = train_sft(expert_trajs[:6], tiny_model, tmp_path / "a",
                    SFTConfig(max_steps=1, r=4, replay_share=0.0), progress=False)
    meta = json.loads((tmp_path / "a" / "trajforge_adapter.json").read_text())
    assert meta["config"]["lr"] == res.lr == pytest.approx(1e-3)  # the tiny model is far below 135M
    assert meta["config"]["grad_accum"] * meta["config"]["batch_size"] == res.effective_batch == 4
    # The micro-batch too: all four sequences in one pass, which the plan fits easily here.
    assert (meta["config"]["batch_size"], meta["derived"]["batch_size"]) == (4, 4)
    assert any(line.startswith("micro-batch 4: the largest power of two ≤ 4") for line in meta["derived"]["why"])
    assert meta["derived"]["params"] == model_params(tiny_model)
    assert any(line.startswith("lr ") for line in meta["derived"]["why"])


# ---- gradient checkpointing: auto -----------------------------------------------------------------

DEMO_BATCH = Workload(rows=2, width=928, loss_tokens=400, prefix=380, source="data")
LONG_7B_BATCH = Workload(rows=2, width=4096, loss_tokens=8192, source="data")


def _planned_gb(model: str, work: Workload, device: str, checkpointing: bool) -> float:
    cfg = SFTConfig(gradient_checkpointing=checkpointing)
    return train_memory(model_shape(model), cfg, Hardware(device=device), work).total_gb


def test_checkpointing_is_off_when_the_plan_fits_the_device_and_on_when_it_does_not():
    shape = model_shape("smollm2-135m")
    off_gb = _planned_gb("smollm2-135m", DEMO_BATCH, "cpu", checkpointing=False)
    roomy = off_gb * GB / CHECKPOINT_HEADROOM * 1.01
    on, why = auto_checkpointing(SFTConfig(), shape, [DEMO_BATCH], "cpu", roomy)
    assert not on and "off" in why and f"{off_gb:.1f} GB" in why
    on, why = auto_checkpointing(SFTConfig(), shape, [DEMO_BATCH], "cpu", roomy * 0.98)  # just under the headroom
    assert on and "over 80%" in why


def test_the_widest_micro_batch_decides():
    shape = model_shape("qwen2.5-7b")
    off_gb = _planned_gb("qwen2.5-7b", LONG_7B_BATCH, "cuda", checkpointing=False)
    short = Workload(rows=2, width=512, loss_tokens=512, source="data")
    assert _planned_gb("qwen2.5-7b", short, "cuda", checkpointing=False) < off_gb
    h100 = 80 * GB
    # A 7B at 2 × 4096 tokens without checkpointing does not fit an 80 GB card's 80%; 2 × 512 does.
    assert off_gb > CHECKPOINT_HEADROOM * 80
    assert auto_checkpointing(SFTConfig(), shape, [short, LONG_7B_BATCH], "cuda", h100)[0]
    assert not auto_checkpointing(SFTConfig(), shape, [short], "cuda", h100)[0]


@pytest.mark.parametrize("settings, processes, device, shape_name, reason", [
    ({"load_in": "4bit"}, 1, "cuda", "qwen2.5-7b", "4bit"),
    ({"distributed": "fsdp"}, 2, "cuda", "qwen2.5-7b", "fsdp"),
    ({}, 1, "mps", "qwen2.5-7b", "no memory plan"),
    ({}, 1, "cpu", None, "no memory plan"),
])
def test_checkpointing_stays_on_where_the_plan_does_not_decide(settings, processes, device, shape_name, reason):
    shape = model_shape(shape_name) if shape_name else None
    on, why = auto_checkpointing(SFTConfig(**settings), shape, [DEMO_BATCH], device, 1e15, processes)
    assert on and reason in why


def test_ddp_processes_plan_their_own_gpu_each():
    """Several DDP processes: one GPU each, so the rule is the single GPU's (and off fits there)."""
    on, _ = auto_checkpointing(SFTConfig(), model_shape("qwen2.5-0.5b"), [DEMO_BATCH], "cuda", 80 * GB, 8)
    assert not on


def _record_enable(monkeypatch):
    import trajforge.train.model as model_mod

    calls = []
    real = model_mod.enable_checkpointing
    monkeypatch.setattr(model_mod, "enable_checkpointing", lambda net: (calls.append(net), real(net)))
    return calls


def test_train_sft_decides_checkpointing_for_its_own_micro_batches(tiny_model, expert_trajs, tmp_path, monkeypatch):
    import trajforge.train.sft as sft_mod

    calls = _record_enable(monkeypatch)
    train_sft(expert_trajs[:6], tiny_model, tmp_path / "roomy", SFTConfig(max_steps=1, r=4), progress=False)
    meta = json.loads((tmp_path / "roomy" / "trajforge_adapter.json").read_text())
    assert meta["config"]["gradient_checkpointing"] is False and meta["derived"]["gradient_checkpointing"] is False
    assert any(line.startswith("gradient checkpointing off: the plan's peak") for line in meta["derived"]["why"])
    assert calls == []
    # The same run on a device of 10 MB: the plan's peak does not fit, so checkpointing goes on in the model.
    monkeypatch.setattr(sft_mod, "device_memory_bytes", lambda runtime: 1e7)
    train_sft(expert_trajs[:6], tiny_model, tmp_path / "tight", SFTConfig(max_steps=1, r=4), progress=False)
    meta = json.loads((tmp_path / "tight" / "trajforge_adapter.json").read_text())
    assert meta["config"]["gradient_checkpointing"] is True and meta["derived"]["gradient_checkpointing"] is True
    base = calls[0].base_model.model
    assert len(calls) == 1 and (base.is_activation_checkpointing if hasattr(type(base), "is_activation_checkpointing")
                                else base.is_gradient_checkpointing)
    # A given value wins: nothing derived, nothing recorded.
    train_sft(expert_trajs[:6], tiny_model, tmp_path / "given", SFTConfig(max_steps=1, r=4, gradient_checkpointing=False),
              progress=False)
    meta = json.loads((tmp_path / "given" / "trajforge_adapter.json").read_text())
    assert meta["derived"]["gradient_checkpointing"] is None and len(calls) == 1


def test_a_sharded_run_keeps_checkpointing_whatever_distributed_says(monkeypatch, tiny_model):
    """Under a user's own FSDP or DeepSpeed accelerate config ``--distributed`` stays ddp; the
    runtime's type decides."""
    from types import SimpleNamespace

    import torch

    from trajforge.train.defaults import Derived
    from trajforge.train.sequences import Sample
    from trajforge.train.sft import settle_checkpointing

    import trajforge.train.model as model_mod

    calls = []
    monkeypatch.setattr(model_mod, "enable_checkpointing", calls.append)  # the model here is a stand-in
    sample = Sample([1] * 40, [0] * 30 + [1] * 10)
    for kind, expect in (("FSDP", True), ("DEEPSPEED", True), ("NO", False)):
        runtime = SimpleNamespace(acc=SimpleNamespace(distributed_type=SimpleNamespace(name=kind)),
                                  device=torch.device("cpu"), world=1, decide=lambda flag: flag)
        derived = Derived(params=1, sequences_per_epoch=1)
        net = SimpleNamespace(name=kind)
        cfg = settle_checkpointing(SFTConfig(), tiny_model, [sample], [[0]], runtime, net, derived)
        assert cfg.gradient_checkpointing is expect and derived.gradient_checkpointing is expect
        assert (kind in derived.why[0]) is expect
    assert [n.name for n in calls] == ["FSDP", "DEEPSPEED"]


# ---- micro-batch: auto --------------------------------------------------------------------------------

def _rows(width: int):
    return lambda m: [Workload(rows=m, width=width, loss_tokens=m * width // 4, source="data")]


def test_the_micro_batch_is_the_largest_power_of_two_the_plan_fits_without_checkpointing(monkeypatch):
    """A 0.5B model at 4096 tokens: on an 80 GB card without checkpointing 4 rows fit and 8 do not;
    on 24 GB only 2 do; on 8 GB none does, so checkpointing goes on and the micro-batch is what fits with it."""
    monkeypatch.delenv("TRAJFORGE_DTYPE")  # bf16, as on a GPU (training tests here run in fp32)
    shape, cfg = model_shape("qwen2.5-0.5b"), SFTConfig()
    peak = {m: planned_peak_gb(cfg, shape, _rows(4096)(m), "cuda", 80 * GB, 1, False) for m in (1, 2, 4, 8, 16)}
    assert peak[4] <= CHECKPOINT_HEADROOM * 80 < peak[8]  # the premise, from the plan itself
    m, why = auto_micro_batch(cfg, shape, _rows(4096), "cuda", 80 * GB, 1, per_process=32)
    assert m == 4 and "without checkpointing" in why and f"({peak[4]:.1f} GB)" in why
    assert auto_micro_batch(cfg, shape, _rows(4096), "cuda", 80 * GB, 1, per_process=2)[0] == 2  # never past its share
    assert peak[2] <= CHECKPOINT_HEADROOM * 24 < peak[4]
    assert auto_micro_batch(cfg, shape, _rows(4096), "cuda", 24 * GB, 1, per_process=32)[0] == 2
    assert peak[1] > CHECKPOINT_HEADROOM * 8
    m, why = auto_micro_batch(cfg, shape, _rows(4096), "cuda", 8 * GB, 1, per_process=32)
    assert m >= 1 and "with checkpointing" in why
    assert planned_peak_gb(cfg, shape, _rows(4096)(m), "cuda", 8 * GB, 1, True) <= CHECKPOINT_HEADROOM * 8
    # Checkpointing given: the micro-batch is sized with the setting given.
    given = cfg.model_copy(update={"gradient_checkpointing": True})
    assert auto_micro_batch(given, shape, _rows(4096), "cuda", 80 * GB, 1, 32)[0] == 32


def test_without_a_plan_the_micro_batch_is_the_old_default():
    m, why = auto_micro_batch(SFTConfig(), None, _rows(512), "cpu", 1e12, 1, per_process=8)
    assert m == MICRO_BATCH_FALLBACK and "no memory plan" in why
    assert auto_micro_batch(SFTConfig(), model_shape("qwen2.5-0.5b"), _rows(512), "mps", 1e12, 1, 8)[0] == 2
    assert auto_micro_batch(SFTConfig(), None, _rows(512), "cpu", 1e12, 1, per_process=1)[0] == 1


def test_settle_makes_up_the_effective_batch_by_accumulation(monkeypatch):
    monkeypatch.delenv("TRAJFORGE_DTYPE")
    derived = Derived(params=1, sequences_per_epoch=4000, effective_batch=32)
    cfg = settle_micro_batch(SFTConfig(), derived, model_shape("qwen2.5-0.5b"), _rows(4096), "cuda", 80 * GB)
    assert (cfg.batch_size, cfg.grad_accum) == (4, 8) and derived.effective_batch == 32
    assert (derived.batch_size, derived.grad_accum) == (4, 8) and derived.why[-1].endswith("effective batch 32")
    # Sixteen processes: each takes 2 of the 32 in one pass.
    derived = Derived(params=1, sequences_per_epoch=4000, effective_batch=32)
    cfg = settle_micro_batch(SFTConfig(), derived, model_shape("qwen2.5-0.5b"), _rows(4096), "cuda", 80 * GB, 16)
    assert (cfg.batch_size, cfg.grad_accum, derived.effective_batch) == (2, 1, 32)


def test_train_sft_sizes_its_micro_batch_for_its_device(tiny_model, expert_trajs, tmp_path, monkeypatch):
    """On a device of 10 MB nothing fits: one sequence per pass, checkpointed, four accumulated."""
    import trajforge.train.sft as sft_mod

    monkeypatch.setattr(sft_mod, "device_memory_bytes", lambda runtime: 1e7)
    train_sft(expert_trajs[:6], tiny_model, tmp_path / "tight", SFTConfig(max_steps=1, r=4, replay_share=0.0),
              progress=False)
    meta = json.loads((tmp_path / "tight" / "trajforge_adapter.json").read_text())
    config = meta["config"]
    assert (config["batch_size"], config["grad_accum"], config["gradient_checkpointing"]) == (1, 4, True)
    assert any(line.startswith("micro-batch 1: even one sequence with checkpointing is planned") for line in meta["derived"]["why"])


def test_the_derived_micro_batch_never_changes_which_sequences_make_a_step():
    """The memory knob is a cost, not a learning setting: at any derived micro-batch a step holds
    the same sequences (one length group a step, ``step_length_unit``); only how they are cut,
    sorted by length within the step, differs."""
    import random

    from trajforge.train.defaults import PAIRED_STEP, step_length_unit
    from trajforge.train.sequences import Sample
    from trajforge.train.sft import epoch_rows, run_rows

    rng = random.Random(3)
    samples = [Sample([1] * rng.randint(300, 900), [0] * 10) for _ in range(203)]
    assert step_length_unit(16) == 16
    groups = [sorted(rows) for rows in epoch_rows(samples, 1.0, 16, 0)]  # one length group of 16 a step
    for m in (1, 2, 4, 8, 16):
        cfg = SFTConfig(batch_size=m, grad_accum=16 // m, epochs=1.0)
        new = run_rows(samples, cfg, world=1, derived_batch=True)
        per = 16 // m
        steps = [sorted(i for rows in new[k: k + per] for i in rows) for k in range(0, len(new), per)]
        assert steps == groups
        assert all(len(rows) == m for rows in new[:-1])
    # Two processes of 8 cut the same steps as one process of 16.
    two = run_rows(samples, SFTConfig(batch_size=8, grad_accum=1, epochs=1.0), world=2, derived_batch=True)
    assert [sorted(two[k] + two[k + 1]) for k in range(0, len(two) - 1, 2)] == groups[: len(two) // 2]
    # Less padding than the random pairs of stop 55 at micro-batches of 8 and 16.
    padded = lambda micro: sum(max(len(samples[i].input_ids) for i in r) * len(r) for r in micro)
    for m in (8, 16):
        pairs = epoch_rows(samples, 1.0, m, 0, unit=MICRO_BATCH_FALLBACK, step=16)
        ours = run_rows(samples, SFTConfig(batch_size=m, grad_accum=16 // m, epochs=1.0), world=1, derived_batch=True)
        assert padded(ours) < 0.95 * padded(pairs)
    # A step of PAIRED_STEP or less keeps the pairs (the demo pool's no-flag run, 4 × 1, is unchanged).
    assert PAIRED_STEP == 4 and step_length_unit(4) == step_length_unit(2) == MICRO_BATCH_FALLBACK
    assert step_length_unit(8) == 8
    assert (run_rows(samples, SFTConfig(batch_size=4, grad_accum=1, epochs=1.0), 1, True)
            == epoch_rows(samples, 1.0, 4, 0, unit=MICRO_BATCH_FALLBACK, step=4))
    # A micro-batch the user gave groups by its step: by itself at accumulation 1 on one process,
    # as always; else the step, so that processes sharing it get rows of similar length.
    assert run_rows(samples, SFTConfig(batch_size=4, grad_accum=1, epochs=1.0), 1, False) == epoch_rows(samples, 1.0, 4, 0)
    given = run_rows(samples, SFTConfig(batch_size=4, grad_accum=2, epochs=1.0), 2, False)
    assert [sorted(sum(given[k: k + 4], [])) for k in range(0, len(given) - 3, 4)] == groups[: len(given) // 4]


# ---- host allocator (CPU): auto ---------------------------------------------------------------------

def test_glibcs_fast_threshold_is_kept_only_where_three_times_the_plan_fits():
    from trajforge.train.defaults import GLIBC_RETENTION, auto_host_allocator

    memory = 25 * GB
    fits = CHECKPOINT_HEADROOM * 25 / GLIBC_RETENTION
    keep, why = auto_host_allocator(fits * 0.99, memory)
    assert keep and why.startswith("host allocator: glibc's dynamic mmap threshold kept")
    keep, why = auto_host_allocator(fits * 1.01, memory)
    assert not keep and "fixed at 1 MiB" in why and "over 80%" in why


def test_train_sft_settles_the_host_allocator_unless_told(tiny_model, expert_trajs, tmp_path, monkeypatch):
    import trajforge.train.host_memory as host_memory
    import trajforge.train.sft as sft_mod

    applied = []
    monkeypatch.setattr(host_memory, "_applied", None)
    monkeypatch.setattr(host_memory, "return_freed_blocks", lambda: applied.append("fixed") or 0)
    monkeypatch.delenv("TRAJFORGE_MMAP_THRESHOLD", raising=False)
    cfg = SFTConfig(max_steps=1, r=4, replay_share=0.0)
    train_sft(expert_trajs[:6], tiny_model, tmp_path / "roomy", cfg, progress=False)
    why = json.loads((tmp_path / "roomy" / "trajforge_adapter.json").read_text())["derived"]["why"]
    assert any(line.startswith("host allocator: glibc's dynamic mmap threshold kept") for line in why)
    assert host_memory._applied == 0 and applied == []
    # A host of 10 MB: memory is given back.
    monkeypatch.setattr(host_memory, "_applied", None)
    monkeypatch.setattr(sft_mod, "device_memory_bytes", lambda runtime: 1e7)
    train_sft(expert_trajs[:6], tiny_model, tmp_path / "tight", cfg, progress=False)
    why = json.loads((tmp_path / "tight" / "trajforge_adapter.json").read_text())["derived"]["why"]
    assert any("fixed at 1 MiB" in line for line in why) and applied == ["fixed"]
    # The variable set: it decides, nothing is derived.
    monkeypatch.setattr(host_memory, "_applied", None)
    monkeypatch.setenv("TRAJFORGE_MMAP_THRESHOLD", "0")
    train_sft(expert_trajs[:6], tiny_model, tmp_path / "told", cfg, progress=False)
    why = json.loads((tmp_path / "told" / "trajforge_adapter.json").read_text())["derived"]["why"]
    assert not any(line.startswith("host allocator") for line in why) and applied == ["fixed", "fixed"]
