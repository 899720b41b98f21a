"""Several processes: the Accelerator of a run, accelerate launch configs, ``--processes N``.

We never write cluster code: processes are started by ``accelerate launch`` (GPUs; DeepSpeed and
FSDP included) or ``torch.distributed.run`` (CPUs, where accelerate's own multi-CPU launcher wants
MPI), and every process builds the same ``Accelerator`` from the run's settings.

    trajforge train sft --processes 2 ...                      # this machine's GPUs (or 2 CPU processes)
    trajforge train sft --processes 8 --distributed zero2 ...  # DeepSpeed ZeRO-2 across 8 cards
    accelerate launch --config_file my.yaml -m trajforge.cli.main train sft ...   # your own config

``--processes N --distributed MODE`` writes ``accelerate.yaml`` into the output folder (the file
``accelerate launch --config_file`` takes; ``accelerate_config`` builds it) and relaunches the
same command under it. ZeRO and FSDP need CUDA; on CPUs only DDP over gloo runs.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from trajforge.train.settings import Distributed, LoraSettings

LAUNCHED_ENV = "TRAJFORGE_LAUNCHED"
"""Set in processes we started, so they do not relaunch themselves."""


def launched() -> bool:
    """Is this process one of several (accelerate launch, torchrun, --processes)?"""
    return int(os.environ.get("WORLD_SIZE", "1") or 1) > 1


def make_accelerator(cfg: LoraSettings):
    """The run's ``Accelerator``: device from ``policies.devices``, bf16 autocast where the base
    computes in bf16, gloo/NCCL process group when launched with several processes."""
    import torch
    from accelerate import Accelerator, DataLoaderConfiguration
    from accelerate.state import AcceleratorState, GradientState
    from accelerate.utils import DistributedDataParallelKwargs, InitProcessGroupKwargs

    from trajforge.policies.devices import compute_dtype, pick_device

    device = pick_device(cfg.device)
    if not launched():
        # One process may train several times (a library user, the tests): start each run from a
        # fresh accelerate state instead of the first run's device and precision.
        AcceleratorState._reset_state(reset_partial_state=True)
        GradientState._reset_state()
        if device.startswith("cuda:"):
            torch.cuda.set_device(int(device.split(":")[1]))
    bf16 = compute_dtype(cfg.dtype, device) == torch.bfloat16 and cfg.load_in == "none"
    return Accelerator(
        cpu=device == "cpu", mixed_precision="bf16" if bf16 else "no",
        step_scheduler_with_optimizer=False,  # our schedule counts optimizer steps, not samples
        dataloader_config=DataLoaderConfiguration(even_batches=False),  # no duplicated samples
        kwargs_handlers=[
            # In-loop evaluation runs on the main process while the others wait at a barrier.
            InitProcessGroupKwargs(timeout=timedelta(hours=2)),
            DistributedDataParallelKwargs(find_unused_parameters=False),
        ])


def decoder_layer_class(model_dir: str | None) -> str:
    """The transformer block class FSDP wraps one by one (from the model's config)."""
    if model_dir and (Path(model_dir) / "config.json").exists():
        import json

        arch = json.loads((Path(model_dir) / "config.json").read_text()).get("architectures", [""])[0]
        stem = arch.removesuffix("ForCausalLM")
        if stem:
            return f"{stem}DecoderLayer"
    return "LlamaDecoderLayer"


def accelerate_config(processes: int, mode: Distributed, cfg: LoraSettings, model_dir: str | None = None,
                      cpu: bool = False) -> dict[str, Any]:
    """The ``accelerate launch --config_file`` contents for ``processes`` on this machine."""
    mixed = "no" if cpu or cfg.dtype == "float32" else "bf16"
    base: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "machine_rank": 0, "num_machines": 1,
                            "num_processes": processes, "mixed_precision": mixed, "use_cpu": cpu,
                            "rdzv_backend": "static", "same_network": True, "main_training_function": "main",
                            "downcast_bf16": "no", "gpu_ids": "all"}
    if mode == "ddp":
        return {**base, "distributed_type": "MULTI_CPU" if cpu else "MULTI_GPU"}
    if cpu:
        raise ValueError(f"--distributed {mode} needs CUDA GPUs (DeepSpeed/FSDP); on CPUs use --distributed ddp")
    if mode in ("zero2", "zero3"):
        return {**base, "distributed_type": "DEEPSPEED", "deepspeed_config": {
            "zero_stage": int(mode[-1]), "gradient_accumulation_steps": cfg.grad_accum,
            "gradient_clipping": 1.0, "offload_optimizer_device": "none", "offload_param_device": "none",
            # ZeRO-3: build the frozen base already sharded; save the adapter gathered in 16 bit.
            "zero3_init_flag": mode == "zero3", "zero3_save_16bit_model": mode == "zero3"}}
    return {**base, "distributed_type": "FSDP", "fsdp_config": {
        "fsdp_version": 2, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_transformer_layer_cls_to_wrap": decoder_layer_class(model_dir),
        "fsdp_reshard_after_forward": True, "fsdp_state_dict_type": "FULL_STATE_DICT",
        "fsdp_cpu_ram_efficient_loading": True, "fsdp_offload_params": False,
        # LoRA trains a few parameters next to frozen ones in the same wrapped module.
        "fsdp_use_orig_params": True,
        # SFT's auto (None) is on under FSDP (train/defaults.auto_checkpointing).
        "fsdp_activation_checkpointing": cfg.gradient_checkpointing is not False}}


def write_accelerate_config(path: Path, config: dict[str, Any]) -> Path:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=True))
    return path


def launch_command(argv: list[str], processes: int, config_file: Path, cpu: bool) -> list[str]:
    """The command that runs ``trajforge <argv>`` in ``processes`` processes.

    GPUs: ``accelerate launch --config_file FILE -m trajforge.cli.main ...``. CPUs: this module's
    ``main``, torch's elastic launcher (what ``torchrun --standalone`` runs) called directly — gloo;
    accelerate's multi-CPU launcher wants MPI, and torchrun's own argument parser would take our
    ``--r`` for an abbreviation of its ``--role``. accelerate picks the process group up from the
    environment either way."""
    if cpu:
        return [sys.executable, "-m", "trajforge.train.distributed", str(processes), *argv]
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config_file),
            "-m", "trajforge.cli.main", *argv]


def relaunch(argv: list[str], processes: int, mode: Distributed, cfg: LoraSettings, out_dir: Path,
             model_dir: str | None) -> int:
    """Run this train command again in ``processes`` processes; returns their exit status."""
    from trajforge.policies.devices import pick_device, threads_per_process

    cpu = pick_device(cfg.device) == "cpu"
    config = write_accelerate_config(out_dir / "accelerate.yaml",
                                     accelerate_config(processes, mode, cfg, model_dir, cpu))
    cmd = launch_command(argv, processes, config, cpu)
    env = {**os.environ, LAUNCHED_ENV: "1"}
    if cpu:
        env.setdefault("OMP_NUM_THREADS", str(threads_per_process(processes)))
    print(f"launching {processes} processes: {shlex.join(cmd)}", file=sys.stderr)
    return subprocess.run(cmd, env=env).returncode


def main(argv: list[str]) -> int:
    """``python -m trajforge.train.distributed N ARGS...``: ``trajforge ARGS`` in N local processes."""
    import uuid

    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    processes, args = int(argv[0]), argv[1:]
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=processes, run_id=str(uuid.uuid4()),
                          rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0,
                          start_method="spawn")
    try:
        elastic_launch(config, sys.executable)("-m", "trajforge.cli.main", *args)
    except Exception as e:  # ChildFailedError: the processes already printed their tracebacks
        print(f"training processes failed: {type(e).__name__}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
