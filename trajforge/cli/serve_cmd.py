"""``trajforge serve``: an OpenAI-compatible server over a local model and its LoRA adapters.

    trajforge serve --model smollm2-135m --adapter sql=runs/demo/adapter --port 8000
    trajforge serve --model smollm2-135m --adapter sql=runs/demo/adapter --print-vllm

The request's ``model`` picks the base model (its ``--model`` name) or an adapter (its NAME).
``--print-vllm`` prints the equivalent ``vllm serve`` command instead of serving.
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
    port: int = typer.Option(8000, help="TCP port"),
    host: str = typer.Option("127.0.0.1", help="address to bind (0.0.0.0 exposes it to the network)"),
    dialect: Optional[str] = typer.Option(None, help="tool-call dialect for the base model and for "
                                          "adapters without trajforge meta (default hermes)"),
    dtype: str = typer.Option("auto", help="auto, float32 or bfloat16"),
    print_vllm: bool = typer.Option(False, "--print-vllm", help="print the equivalent vLLM command and exit"),
    chat_template: Optional[str] = typer.Option(None, help="Jinja chat template file for the base model (default: "
                                                "its own, else trajforge's default); adapters use the one they "
                                                "were trained with; with --print-vllm: passed to vLLM"),
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
            from trajforge.serve.vllm import vllm_command

            cmd = vllm_command(model, adapters, dialect, chat_template)
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
