"""Every tensor trajforge builds for a model names its device, and the device choice is one rule.

Why an audit and not a GPU: these machines have none. The audit runs the real code paths (an SFT,
a DPO and a GRPO step, the hf policy's batched generation, serve's token loop, replay) under a
``TorchFunctionMode`` that records every tensor factory called from trajforge's own code without a
device. A factory without one builds a CPU tensor whatever the model's device is: on a GPU that is
a crash or a silent host round-trip. Tensors deliberately kept on the CPU say so with a ``# cpu:``
comment on the line, which a second check enforces. The third test proves the audit can fail.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode

import trajforge

PACKAGE = Path(trajforge.__file__).parent
FACTORIES = {torch.tensor, torch.zeros, torch.ones, torch.full, torch.empty, torch.arange, torch.as_tensor,
             torch.rand, torch.randn, torch.randint, torch.linspace, torch.eye}


class DeviceAudit(TorchFunctionMode):
    """Records factory calls made directly from files under ``scope`` without a ``device``."""

    def __init__(self, scope: Path = PACKAGE):
        super().__init__()
        self.scope = str(scope)
        self.missing: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in FACTORIES and kwargs.get("device") is None:
            caller = sys._getframe(1)
            while caller and "/torch/" in caller.f_code.co_filename:
                caller = caller.f_back
            if caller and caller.f_code.co_filename.startswith(self.scope):
                self.missing.append(f"{Path(caller.f_code.co_filename).name}:{caller.f_lineno} {func.__name__}")
        return func(*args, **kwargs)


@pytest.mark.slow
def test_training_generation_and_serving_name_their_devices(tiny_model, expert_trajs, sql_tasks, tmp_path):
    from tests.train.rollouts import TokenScripted
    from trajforge.grade import graded
    from trajforge.harness import run_episodes
    from trajforge.policies.hf import HFPolicy, load_model
    from trajforge.serve.backend import HFBackend, Sampling
    from trajforge.train.dpo import DPOConfig, train_dpo
    from trajforge.train.grpo import GRPOConfig, train_grpo
    from trajforge.train.replay import answer_nll, self_distill
    from trajforge.train.sft import SFTConfig, train_sft

    net, tok = load_model(tiny_model)
    train = [t for t in sql_tasks if t.split == "train"][:2]
    samples = [graded(t) for t in run_episodes(train, TokenScripted(tiny_model, net, tok), samples=2)]
    small = dict(r=4, dropout=0.0, max_steps=1, replay_share=0.0)
    audit = DeviceAudit()
    with audit:
        train_sft(expert_trajs[:4], tiny_model, tmp_path / "sft", SFTConfig(**small, batch_size=2, grad_accum=2),
                  progress=False)
        train_sft(expert_trajs[:4], tiny_model, tmp_path / "sft-prefix",
                  SFTConfig(**small, batch_size=2, gradient_checkpointing=False), progress=False)
        train_dpo(samples, tiny_model, tmp_path / "dpo", DPOConfig(**small, batch_size=2), progress=False)
        train_grpo(train, tiny_model, tmp_path / "grpo", GRPOConfig(**small, steps=1, batch_size=2, group_size=2,
                                                                     max_turns=1, max_new_tokens=8, kl_beta=0.1),
                   progress=False)
        policy = HFPolicy(tiny_model, max_new_tokens=4, temperature=0.7)
        run_episodes(train, policy, samples=2)
        replay = self_distill(net, tok, ["Say hi.", "Count to three."], max_new_tokens=4)
        answer_nll(net, replay, tok.pad_token_id)
        backend = HFBackend(tiny_model)
        list(backend.tokens(None, tok("hello")["input_ids"], Sampling(max_tokens=3, top_p=0.9)))
    assert audit.missing == []


def test_deliberate_cpu_tensors_say_why():
    bare = []
    for path in PACKAGE.rglob("*.py"):
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"device=[\"']cpu[\"']", line) and "# cpu:" not in line:
                prev = path.read_text(encoding="utf-8").splitlines()[no - 2] if no > 1 else ""
                if "# cpu:" not in prev:
                    bare.append(f"{path.relative_to(PACKAGE)}:{no}")
    assert bare == []


def test_the_audit_catches_a_factory_without_a_device(tmp_path, monkeypatch):
    module = tmp_path / "careless.py"
    module.write_text("import torch\n\ndef batch(rows):\n    return torch.tensor(rows)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import careless

    audit = DeviceAudit(scope=tmp_path)
    with audit:
        careless.batch([[1, 2]])
    assert audit.missing == ["careless.py:4 tensor"]
