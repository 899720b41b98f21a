"""``trajforge serve``: an OpenAI-compatible server over a local model and its LoRA adapters.

    trajforge serve --model smollm2-135m --adapter sql=runs/demo/adapter --port 8000
    trajforge serve --model smollm2-135m --adapter sql=runs/demo/adapter --print-vllm

The request's ``model`` picks the base model (its ``--model`` name) or an adapter (its NAME).
``--print-vllm`` prints the equivalent ``vllm serve`` command instead of serving, sized by
``trajforge plan`` (``--tensor-parallel-size``, ``--gpu-memory-utilization``, ``--max-model-len``
from its serving estimate at ``--serve-concurrency`` on GPUs of ``--gpu-gb``; given flags win).
"""

from __future__ import annotations

from typing import Optional

import typer

from trajforge.serve.adapters import ServeConfigError, parse_adapter_specs, served_models


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def serve(
    model: str = typer.Option(..., help="smollm2-135m (embedded), a local folder, or a hub id"),
    adapter: list[str] = typer.Option([], help="NAME=DIR of a LoRA adapter; repeat for several"),
    port: int = typer.Option(8000, min=0, max=65535, help="TCP port"),
    host: str = typer.Option("127.0.0.1", help="address to bind (0.0.0.0 exposes it to the network)"),
    dialect: Optional[str] = typer.Option(None, help="tool-call dialect for the base model and for "
                                          "adapters without trajforge meta (default hermes)"),
    dtype: str = typer.Option("auto", help="auto, float32 or bfloat16"),
    print_vllm: bool = typer.Option(False, "--print-vllm", help="print the equivalent vLLM command and exit"),
    chat_template: Optional[str] = typer.Option(None, help="Jinja chat template file for the base model (default: "
                                                "its own, else trajforge's default); adapters use the one they "
                                                "were trained with; with --print-vllm: passed to vLLM"),
    tensor_parallel_size: Optional[int] = typer.Option(None, help="with --print-vllm (default: the plan's)"),
    gpu_memory_utilization: Optional[float] = typer.Option(None, help="with --print-vllm (default: the plan's)"),
    max_model_len: Optional[int] = typer.Option(None, help="with --print-vllm (default: train sft's --max-len)"),
    serve_concurrency: Optional[int] = typer.Option(None, help="with --print-vllm: sequences of max-model-len the "
                                                    "plan sizes the KV cache for (default 8)"),
    gpu_gb: Optional[float] = typer.Option(None, help="with --print-vllm: one GPU's memory in GB (default 80)"),
    verbose: bool = typer.Option(False, help="log every request"),
    allow_adapter_updates: bool = typer.Option(
        False, "--allow-adapter-updates",
        help="open POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's runtime LoRA API; "
             "GRPO --rollout-server uses them); anyone who can reach the port can then load a folder"),
) -> None:
    """Serve a local model and LoRA adapters over the OpenAI chat-completions API."""
    try:
        adapters = parse_adapter_specs(adapter)
        if print_vllm:
            from trajforge.serve.adapters import adapter_rank, check_adapter_dir
            from trajforge.serve.vllm import VllmLaunch, planned_launch, vllm_command

            rank = max((adapter_rank(check_adapter_dir(n, p)) for n, p in adapters.items()), default=0)
            launch, note = planned_launch(model, VllmLaunch(tensor_parallel_size, gpu_memory_utilization, max_model_len),
                                          serve_concurrency, gpu_gb, rank)
            cmd = vllm_command(model, adapters, dialect, chat_template, launch)
            if note:
                cmd.notes.append(note)
            for note in cmd.notes:
                typer.echo(f"# note: {note}", err=True)
            typer.echo(cmd.line)
            return
        served_models(model, adapters, dialect)  # refuse bad adapters before loading any weights
    except ServeConfigError as e:
        _fail(str(e))
    from trajforge.policies.loading import read_chat_template
    from trajforge.serve.http import build_server

    try:
        template = read_chat_template(chat_template) if chat_template else None
        server = build_server(model, adapters, dialect, host, port, dtype, verbose, allow_adapter_updates, template)
    except OSError as e:
        _fail(str(e))
    typer.echo(f"serving {', '.join(server.service.models)} at {server.url}  (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
