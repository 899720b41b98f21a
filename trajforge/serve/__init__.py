"""OpenAI-compatible serving of a local model and its LoRA adapters (``trajforge serve``), and the
equivalent vLLM command line.

    server = start_server("smollm2-135m", adapters={"sql": "runs/adapter"})
    OpenAIPolicy(server.url, "sql", token_ids=True)   # a policy over one adapter
"""

from trajforge.serve.adapters import ServeConfigError, parse_adapter_specs, served_models
from trajforge.serve.backend import Backend, HFBackend, Sampling, Token
from trajforge.serve.http import Server, build_server, start_server
from trajforge.serve.protocol import ServeError
from trajforge.serve.service import ChatService, ServedModel
from trajforge.serve.vllm import VllmCommand, vllm_command

__all__ = [
    "Backend", "ChatService", "HFBackend", "Sampling", "ServeConfigError", "ServeError", "ServedModel",
    "Server", "Token", "VllmCommand", "build_server", "parse_adapter_specs", "served_models", "start_server",
    "vllm_command",
]
