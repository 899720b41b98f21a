"""``--distributed ddp|zero2|zero3|fsdp`` writes what ``accelerate launch`` expects.

DeepSpeed and multi-GPU machines are not here, so the generated file goes through accelerate's own
launch path up to the point where it would start processes: its config-file loader (which refuses
unknown keys), ``launch_command`` (which picks the launcher from the file), and the environment
its launchers hand to each process — then accelerate's plugins are built from that environment,
as they are inside a launched process. Only the final ``subprocess`` call is replaced.
"""

from __future__ import annotations

import pytest

accelerate_launch = pytest.importorskip("accelerate.commands.launch")

from accelerate.utils import FullyShardedDataParallelPlugin  # noqa: E402
from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env  # noqa: E402

from trajforge.train.distributed import accelerate_config, write_accelerate_config  # noqa: E402
from trajforge.train.model import fsdp_checkpoints  # noqa: E402
from trajforge.train.settings import LoraSettings  # noqa: E402


def _launch_env(tmp_path, monkeypatch, mode: str, cfg: LoraSettings, processes: int = 8) -> dict[str, str]:
    """The environment accelerate's launcher gives each process for our config of ``mode``."""
    seen: dict[str, object] = {}
    monkeypatch.setattr(accelerate_launch, "deepspeed_launcher",
                        lambda args: seen.update(ds=True, env=prepare_deepspeed_cmd_env(args)[1]))
    monkeypatch.setattr(accelerate_launch, "multi_gpu_launcher",
                        lambda args: seen.update(env=prepare_multi_gpu_env(args), procs=args.num_processes))
    monkeypatch.setattr(accelerate_launch, "simple_launcher", lambda args: seen.update(simple=True))
    path = write_accelerate_config(tmp_path / f"{mode}.yaml", accelerate_config(processes, mode, cfg, None))
    args = accelerate_launch.launch_command_parser().parse_args(
        ["--config_file", str(path), "-m", "trajforge.cli.main", "train", "sft"])
    accelerate_launch.launch_command(args)
    assert "simple" not in seen, f"{mode}: accelerate would start a single process"
    return {k: str(v) for k, v in seen["env"].items()}  # type: ignore[union-attr]


def test_ddp_config_starts_one_process_per_gpu(tmp_path, monkeypatch):
    env = _launch_env(tmp_path, monkeypatch, "ddp", LoraSettings(dtype="bfloat16"))
    assert env["ACCELERATE_MIXED_PRECISION"] == "bf16"
    assert "ACCELERATE_USE_DEEPSPEED" not in env and "ACCELERATE_USE_FSDP" not in env


@pytest.mark.parametrize("mode,stage", [("zero2", "2"), ("zero3", "3")])
def test_zero_configs_reach_deepspeed_with_our_accumulation_and_clipping(tmp_path, monkeypatch, mode, stage):
    env = _launch_env(tmp_path, monkeypatch, mode, LoraSettings(grad_accum=16))
    assert env["ACCELERATE_USE_DEEPSPEED"] == "true"
    assert env["ACCELERATE_DEEPSPEED_ZERO_STAGE"] == stage
    # DeepSpeed owns accumulation and clipping under ZeRO: they must be ours, not its defaults.
    assert env["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] == "16"
    assert env["ACCELERATE_GRADIENT_CLIPPING"] == "1.0"
    assert env["ACCELERATE_DEEPSPEED_ZERO3_INIT"] == ("true" if mode == "zero3" else "false")
    assert env["ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"] == "none"


def test_fsdp_config_builds_accelerates_plugin_and_checkpoints_once(tmp_path, monkeypatch):
    env = _launch_env(tmp_path, monkeypatch, "fsdp", LoraSettings(gradient_checkpointing=True))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    plugin = FullyShardedDataParallelPlugin()  # reads the launched process's environment
    # FSDP2 shards each parameter on its own, so trainable LoRA weights next to frozen ones in one
    # wrapped layer need no flat-parameter workaround (use_orig_params is a FSDP1 setting).
    assert plugin.fsdp_version == 2
    assert plugin.transformer_cls_names_to_wrap == ["LlamaDecoderLayer"]
    assert plugin.activation_checkpointing is True
    # FSDP checkpoints the layers, so the model's own checkpointing is left off (not both).
    assert fsdp_checkpoints()
    monkeypatch.setenv("FSDP_ACTIVATION_CHECKPOINTING", "false")
    assert not fsdp_checkpoints()


def test_fsdp_wraps_the_models_own_decoder_layer(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["Qwen2ForCausalLM"]}')
    cfg = accelerate_config(4, "fsdp", LoraSettings(), str(model))
    assert cfg["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"] == "Qwen2DecoderLayer"


@pytest.mark.parametrize("mode", ["zero2", "zero3", "fsdp"])
def test_sharded_modes_are_refused_on_cpus_with_the_way_out(mode):
    with pytest.raises(ValueError, match="needs CUDA GPUs.*--distributed ddp"):
        accelerate_config(2, mode, LoraSettings(), cpu=True)


def test_cpu_ddp_config_is_multi_cpu_in_fp32():
    cfg = accelerate_config(2, "ddp", LoraSettings(dtype="bfloat16"), cpu=True)
    assert cfg["distributed_type"] == "MULTI_CPU" and cfg["use_cpu"] and cfg["mixed_precision"] == "no"
