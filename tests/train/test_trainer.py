"""The shared loop: a killed-and-resumed run equals an uninterrupted one; NaN steps are skipped."""

import json
import math
import subprocess
import sys
import textwrap

import pytest
import torch
from safetensors.torch import load_file

from trajforge.train.trainer import CallBatches, Checkpointer, LoraSettings, NonFiniteWeights, fit, lora_model

SCRIPT = textwrap.dedent("""
    import os, signal, sys, json
    os.environ["TRAJFORGE_DTYPE"] = "float32"
    import torch
    torch.set_num_threads(1)
    from trajforge.grade import graded
    from trajforge.harness import run_episodes
    from trajforge.policies import make_policy
    from trajforge.tasks import synthesize
    from trajforge.train.sft import SFTConfig, train_sft

    model, out, mode = sys.argv[1:4]
    tasks = [t for t in synthesize("sql", 40, seed=3).tasks if t.split == "train"]
    trajs = [graded(t) for t in run_episodes(tasks, make_policy("expert"))]

    class Killer:  # dies like a SIGKILLed job right after step 3 (checkpoint is at step 2)
        def hook(self, net, tok):
            def on_step(step):
                if step == 3:
                    os.kill(os.getpid(), signal.SIGKILL)
            return on_step

    cfg = SFTConfig(r=4, alpha=8, dropout=0.1, batch_size=2, grad_accum=2, max_steps=6, checkpoint_every=2,
                    lr=1e-2, replay_share=0.3)
    res = train_sft(trajs, model, out, cfg, progress=False, resume=(mode == "resume"),
                    evaluator=Killer() if mode == "kill" else None)
    print(json.dumps({"losses": res.losses, "resumed_from": res.resumed_from}))
""")


def _run(model, out, mode):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, model, str(out), mode], capture_output=True,
                          text=True, timeout=300)
    return proc


@pytest.mark.slow
def test_killed_and_resumed_training_matches_an_uninterrupted_run(tiny_model, tmp_path):
    killed = _run(tiny_model, tmp_path / "a", "kill")
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert (tmp_path / "a" / "checkpoints" / "latest").read_text() == "step-000002"
    resumed = _run(tiny_model, tmp_path / "a", "resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    straight = _run(tiny_model, tmp_path / "b", "fresh")
    assert straight.returncode == 0, straight.stderr[-2000:]
    r, s = (json.loads(p.stdout.strip().splitlines()[-1]) for p in (resumed, straight))
    assert r["resumed_from"] == 2 and s["resumed_from"] == 0
    assert len(r["losses"]) == len(s["losses"]) == 6
    assert r["losses"] == pytest.approx(s["losses"], rel=1e-5)
    wa = load_file(str(tmp_path / "a" / "adapter_model.safetensors"))
    wb = load_file(str(tmp_path / "b" / "adapter_model.safetensors"))
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-5, atol=1e-6)


def _ce(net, ids):
    logits = net(input_ids=ids).logits.float()
    return torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:])


def _steps():
    """One micro-batch per step that just names its step."""
    return CallBatches(lambda step: [{"step": step, "counts": {"n": 1}}])


def _adapter(net):
    return {n: p.detach().clone() for n, p in net.named_parameters() if p.requires_grad}


def test_nonfinite_step_is_skipped_and_never_checkpointed(tiny_model, tmp_path):
    cfg = LoraSettings(r=4, alpha=8, dropout=0.0, lr=1e-2, checkpoint_every=2)
    net, tok = lora_model(tiny_model, cfg)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    snapshots = {}

    def loss_fn(model, micro, totals):
        loss = model(_ce, ids)
        return (loss * math.nan if micro["step"] == 2 else loss), {}

    def on_step(step):
        snapshots[step] = _adapter(net)

    res = fit(net, 4, _steps(), loss_fn, cfg, tmp_path, progress=False, on_step=on_step)
    assert res.skipped_nonfinite == 1 and len(res.losses) == 3
    for k in snapshots[2]:  # step 3 (index 2) changed nothing
        assert torch.equal(snapshots[2][k], snapshots[3][k])
    assert any(not torch.equal(snapshots[1][k], snapshots[2][k]) for k in snapshots[1])
    ckpt = Checkpointer(tmp_path / "checkpoints")
    saved = load_file(str(ckpt.latest() / "adapter.safetensors"))
    assert all(torch.isfinite(v).all() for v in saved.values())
    rows = [json.loads(line) for line in (tmp_path / "curves.jsonl").read_text().splitlines()]
    assert [r.get("skipped_nonfinite") for r in rows] == [None, None, 1, None]
    # A NaN in the weights themselves: the checkpoint is refused and the last good one stays.
    with torch.no_grad():
        next(p for p in net.parameters() if p.requires_grad).fill_(math.nan)
    with pytest.raises(NonFiniteWeights):
        ckpt.save(9, net, torch.optim.AdamW([torch.zeros(1, requires_grad=True)]), {})
    assert ckpt.latest().name == "step-000002" and not list((tmp_path / "checkpoints").glob(".tmp*"))


def test_time_budget_stops_before_a_step_that_would_overrun(tiny_model, tmp_path, monkeypatch):
    import trajforge.train.loop as loop

    clock = {"now": 0.0}  # each step takes 10 s on a fake clock, so the test is exact
    monkeypatch.setattr(loop, "time", type("Clock", (), {"perf_counter": staticmethod(lambda: clock["now"])}))
    cfg = LoraSettings(r=4, alpha=8, dropout=0.0, lr=1e-2, max_seconds=25)
    net, _ = lora_model(tiny_model, cfg)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])

    def loss_fn(model, micro, totals):
        clock["now"] += 10.0
        return model(_ce, ids), {}

    res = fit(net, 10, _steps(), loss_fn, cfg, tmp_path, progress=False)
    # After 2 steps (20 s) a third would end at 30 s > 25 s: not started.
    assert len(res.losses) == 2 and res.stopped == "time budget"
    rows = [json.loads(line) for line in (tmp_path / "curves.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 2] and rows[-1]["stopped_for_time"] == 1
    unlimited = fit(net, 3, _steps(), loss_fn, cfg.model_copy(update={"max_seconds": 0}), tmp_path / "b",
                    progress=False)
    assert len(unlimited.losses) == 3 and unlimited.stopped is None


class _Crash(Exception):
    pass


def _crash_at(step_to_die):
    def on_step(step):
        if step == step_to_die:
            raise _Crash  # after step 4's curves row, before any checkpoint of it
    return on_step


def _nan_at_step_2(model, micro, totals):
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    loss = model(_ce, ids)
    return (loss * math.nan if micro["step"] == 1 else loss), {}


def _curve_rows(path):
    return [json.loads(line) for line in (path / "curves.jsonl").read_text().splitlines()]


def test_resume_after_a_skipped_step_matches_an_uninterrupted_run(tiny_model, tmp_path):
    """The schedule did not advance on the step the NaN guard dropped, so a resume must not advance
    it there either; and the crashed run's rows after its checkpoint are not in the curves twice."""
    cfg = LoraSettings(r=4, alpha=8, dropout=0.0, lr=1e-2, checkpoint_every=3)
    net, _ = lora_model(tiny_model, cfg)
    with pytest.raises(_Crash):
        fit(net, 8, _steps(), _nan_at_step_2, cfg, tmp_path / "a", progress=False, on_step=_crash_at(4))
    net, _ = lora_model(tiny_model, cfg)
    resumed = fit(net, 8, _steps(), _nan_at_step_2, cfg, tmp_path / "a", progress=False, resume=True)
    net, _ = lora_model(tiny_model, cfg)
    straight = fit(net, 8, _steps(), _nan_at_step_2, cfg, tmp_path / "b", progress=False)
    assert resumed.resumed_from == 3 and resumed.skipped_nonfinite == straight.skipped_nonfinite == 1
    assert resumed.losses == pytest.approx(straight.losses, rel=1e-6)
    a, b = _curve_rows(tmp_path / "a"), _curve_rows(tmp_path / "b")
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, 9))
    assert [r.get("lr") for r in a] == pytest.approx([r.get("lr") for r in b])


def test_resume_refuses_a_run_planned_otherwise(tiny_model, tmp_path):
    cfg = LoraSettings(r=4, alpha=8, dropout=0.0, lr=1e-2, checkpoint_every=3)
    net, _ = lora_model(tiny_model, cfg)
    with pytest.raises(_Crash):
        fit(net, 8, _steps(), _nan_at_step_2, cfg, tmp_path, progress=False, on_step=_crash_at(4))
    for total, changed, named in ((8, {"lr": 1e-3}, "lr"), (8, {"grad_accum": 2}, "grad_accum"),
                                  (10, {}, "steps")):
        with pytest.raises(ValueError, match=f"cannot resume .*{named}"):
            fit(net, total, _steps(), _nan_at_step_2, cfg.model_copy(update=changed), tmp_path,
                progress=False, resume=True)
    # A budget, the checkpoint cadence or in-loop evaluation may change on resume.
    ok = fit(net, 8, _steps(), _nan_at_step_2, cfg.model_copy(update={"max_seconds": 600, "checkpoint_every": 2}),
             tmp_path, progress=False, resume=True)
    assert ok.resumed_from == 3 and len(ok.losses) == 7


def test_resume_refuses_another_number_of_processes(tiny_model, tmp_path):
    """A checkpoint of 2 processes has an RNG file for process 0: resumed by 1 process it loaded, and
    the data loader skipped half the micro-batches the 2 processes had used."""
    cfg = LoraSettings(r=4, alpha=8, dropout=0.0, lr=1e-2, checkpoint_every=3)
    net, _ = lora_model(tiny_model, cfg)
    with pytest.raises(_Crash):
        fit(net, 8, _steps(), _nan_at_step_2, cfg, tmp_path, progress=False, on_step=_crash_at(4))
    state_file = Checkpointer(tmp_path / "checkpoints").latest() / "state.json"
    state = json.loads(state_file.read_text())
    state["processes"] = 2  # as 2 processes write it
    for record in (state, {k: v for k, v in state.items() if k != "plan"}):  # with and without a plan
        if "plan" in record:
            record["plan"]["processes"] = 2
        state_file.write_text(json.dumps(record))
        with pytest.raises(ValueError, match="processes: 2 then, 1 now"):
            fit(net, 8, _steps(), _nan_at_step_2, cfg, tmp_path, progress=False, resume=True)


def test_an_earlier_runs_later_checkpoints_do_not_prune_this_runs(tiny_model, tmp_path):
    cfg = LoraSettings(r=4, alpha=8, dropout=0.0)
    net, _ = lora_model(tiny_model, cfg)
    opt = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad])
    ckpt = Checkpointer(tmp_path, keep=2)
    for step in (8, 10):  # a longer run in the same folder
        ckpt.save(step, net, opt, {})
    ckpt.save(2, net, opt, {})  # a fresh run's first checkpoint
    assert ckpt.latest() is not None and ckpt.latest().name == "step-000002"
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-000002"]
    ckpt.save(4, net, opt, {})
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-000002", "step-000004"]


def test_a_save_killed_midway_leaves_the_previous_adapter_whole(tiny_model, tmp_path, monkeypatch):
    """The adapter folder is replaced at the end of a save: a kill while its files were written left
    new weights under the previous run's meta (or a torn weights file)."""
    from trajforge.policies.hf import ADAPTER_META
    from trajforge.train.adapter import save_adapter

    cfg = LoraSettings(r=4, alpha=8, dropout=0.0)
    net, tok = lora_model(tiny_model, cfg)
    save_adapter(net, tok, tmp_path, {"recipe": "sft", "run": 1})
    before = load_file(str(tmp_path / "adapter_model.safetensors"))
    with torch.no_grad():
        for p in net.parameters():
            if p.requires_grad:
                p.add_(1.0)  # the second run's weights

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # stands for the SIGKILL that interrupts writing the tokenizer files

    monkeypatch.setattr(type(tok), "save_pretrained", killed)
    with pytest.raises(KeyboardInterrupt):
        save_adapter(net, tok, tmp_path, {"recipe": "sft", "run": 2})
    after = load_file(str(tmp_path / "adapter_model.safetensors"))
    assert json.loads((tmp_path / ADAPTER_META).read_text())["run"] == 1
    assert all(torch.equal(before[k], after[k]) for k in before)
    monkeypatch.undo()
    save_adapter(net, tok, tmp_path, {"recipe": "sft", "run": 2})  # the rerun completes the save
    assert json.loads((tmp_path / ADAPTER_META).read_text())["run"] == 2
    saved = load_file(str(tmp_path / "adapter_model.safetensors"))
    assert all(not torch.equal(before[k], saved[k]) for k in before)
    assert not list(tmp_path.glob(".adapter-staging*"))


def test_sft_counts_the_tokens_of_the_steps_it_took_when_a_budget_stops_it(tiny_model, expert_trajs, tmp_path,
                                                                           monkeypatch):
    import trajforge.train.loop as loop
    from trajforge.train.sft import SFTConfig, train_sft

    cfg = SFTConfig(r=4, lr=1e-3, batch_size=2, grad_accum=1, replay_share=0.0, gradient_checkpointing=False)
    two = train_sft(expert_trajs[:8], tiny_model, tmp_path / "a", cfg.model_copy(update={"max_steps": 2}),
                    progress=False)
    monkeypatch.setattr(loop, "out_of_time", lambda began, done, budget: done >= 2)  # the budget ends at 2 steps
    stopped = train_sft(expert_trajs[:8], tiny_model, tmp_path / "b", cfg.model_copy(update={"max_seconds": 1}),
                        progress=False)
    assert stopped.stopped == "time budget" and stopped.steps == two.steps == 2
    assert (stopped.tokens, stopped.loss_tokens) == (two.tokens, two.loss_tokens)
    meta = json.loads((tmp_path / "b" / "trajforge_adapter.json").read_text())
    assert meta["result"]["tokens"] == two.tokens


def test_a_run_the_time_budget_stopped_resumes_from_the_stop(tiny_model, tmp_path, monkeypatch):
    """The stop writes a checkpoint (checkpoints on): a resume with a larger budget goes on from
    the step it stopped at, not from the last periodic checkpoint, and ends as an uninterrupted run."""
    import trajforge.train.loop as loop

    monkeypatch.setattr(loop, "out_of_time", lambda began, done, budget: budget > 0 and done >= 3)
    cfg = LoraSettings(r=4, alpha=8, dropout=0.1, lr=1e-2, checkpoint_every=2)

    def run(out, **changed):
        torch.manual_seed(0)
        net, _ = lora_model(tiny_model, cfg)
        res = fit(net, 6, _steps(), _nan_at_step_2, cfg.model_copy(update=changed), out, progress=False,
                  resume=True)
        return res, _adapter(net)

    stopped, _ = run(tmp_path / "a", max_seconds=60)
    assert stopped.stopped == "time budget" and len(stopped.losses) == 2 and stopped.skipped_nonfinite == 1
    assert Checkpointer(tmp_path / "a" / "checkpoints").latest().name == "step-000003"
    resumed, wa = run(tmp_path / "a")
    straight, wb = run(tmp_path / "b")
    assert resumed.resumed_from == 3 and resumed.stopped is None and straight.resumed_from == 0
    assert resumed.skipped_nonfinite == straight.skipped_nonfinite == 1
    assert resumed.losses == pytest.approx(straight.losses, rel=1e-6)
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-6, atol=1e-7)
    a, b = _curve_rows(tmp_path / "a"), _curve_rows(tmp_path / "b")
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, 7))
    assert [r.get("lr") for r in a] == pytest.approx([r.get("lr") for r in b])
