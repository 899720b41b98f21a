"""Loading a local model onto its device: base weights (optionally 4/8-bit), adapters merged or not.

Every local model — the hf policy, the trainer, replay distillation, ``serve`` — loads through
``load_base``, so they all land on the device ``policies.devices.pick_device`` chose, in the
dtype that device computes in. Weights are placed on the device as they are read
(``device_map``), never materialised on the CPU first: a 7B model in bf16 is 15 GB that a
24 GB host cannot hold twice.

QLoRA: ``quantization="4bit"`` / ``"8bit"`` loads the frozen base through bitsandbytes (CUDA only;
``pip install 'trajforge[qlora]'``). Elsewhere it is refused with a message that says why,
before any weights are read.

Chat template: every tokenizer loaded here gets the one it renders with (``settle_template``): the
one asked for (``chat_template=`` text, from ``?chat_template=FILE``, ``--chat-template FILE`` or an
adapter's meta), else the model's own, else ``DEFAULT_CHAT_TEMPLATE`` — a model with no template (a
base checkpoint) is usable, not a transformers ``ValueError``. Its eos token becomes the template's
end-of-turn token where the two differ (Gemma ends turns with ``<end_of_turn>``, Phi-3.5 with
``<|end|>``, while their eos is ``<eos>`` / ``<|endoftext|>``): generation stops there, and the
sequence builder closes each learned turn with it, as the template does.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from trajforge.policies.devices import compute_dtype, pick_device
from trajforge.policies.models import resolve

Quantization = Literal["none", "4bit", "8bit"]


DEFAULT_CHAT_TEMPLATE = (
    "{{- bos_token if bos_token else '' }}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + eos_token + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""The template of a model that has none: ChatML-shaped turns, each closed by the tokenizer's own eos
token (so a base model learns to stop with the token generation stops at), after its bos token
when it has one. It renders a system role and ``tool`` turns, and takes no ``tools`` argument, so
tools are the dialect's tool block in either render mode."""


def read_chat_template(path: str | Path) -> str:
    """The text of a Jinja chat template file (``?chat_template=FILE``, ``--chat-template FILE``)."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"chat template {path} is not a file")
    return file.read_text(encoding="utf-8")


def template_record(tokenizer: Any) -> dict[str, Any]:
    """How a tokenizer renders, for an adapter's meta: the template text, its sha256, and whether it
    is trajforge's default (the model had none). Eval and serve read it back so they render as
    training did, with no flag."""
    text = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else None
    return {"text": text, "sha256": hashlib.sha256((text or "").encode()).hexdigest(),
            "default": text == DEFAULT_CHAT_TEMPLATE}


def settle_template(tokenizer: Any, chat_template: str | None = None) -> Any:
    """Give ``tokenizer`` the template it renders with (``chat_template``, else its own, else
    ``DEFAULT_CHAT_TEMPLATE``), its eos the template's end-of-turn token, and a pad token."""
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    elif not tokenizer.chat_template:
        tokenizer.chat_template = DEFAULT_CHAT_TEMPLATE
    end = turn_end_token(tokenizer)
    if end is not None and end != tokenizer.eos_token:
        tokenizer.eos_token = end
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def turn_end_token(tokenizer: Any) -> str | None:
    """The control token a chat template closes an assistant turn with: rendered right after a
    probe reply. None when the template writes plain text there (or cannot render the probe)."""
    reply = "trajforge-probe-reply"
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": "trajforge-probe-user"},
                                              {"role": "assistant", "content": reply}], tokenize=False)
    except Exception:  # noqa: BLE001 - a template that refuses the probe keeps its eos as it is
        return None
    if not isinstance(text, str) or reply not in text:
        return None
    after = text[text.rindex(reply) + len(reply):]
    tokens = set(tokenizer.all_special_tokens) | set(tokenizer.get_added_vocab())
    return next((t for t in sorted(tokens, key=len, reverse=True) if t and after.startswith(t)), None)


def load_tokenizer(path: str, chat_template: str | None = None):
    """A tokenizer from a model or adapter folder (or hub id), settled (``settle_template``)."""
    from transformers import AutoTokenizer

    return settle_template(AutoTokenizer.from_pretrained(path), chat_template)


class QuantizationUnavailable(ValueError):
    """4/8-bit loading was asked for where bitsandbytes cannot run."""


def quantization_config(quantization: Quantization, device: str, dtype):
    """A transformers ``BitsAndBytesConfig`` for ``quantization`` on ``device`` (None for "none")."""
    if quantization in (None, "none"):
        return None
    if quantization not in ("4bit", "8bit"):
        raise ValueError(f"unknown quantization {quantization!r}; use none, 4bit or 8bit")
    if not device.startswith("cuda"):
        raise QuantizationUnavailable(
            f"--load-in-{quantization} needs a CUDA device (bitsandbytes kernels); this run's device is "
            f"{device!r}. Drop the flag to train the base in {str(dtype).removeprefix('torch.')}")
    try:
        import bitsandbytes  # noqa: F401  (only checks it is installed)
    except ImportError:
        raise QuantizationUnavailable(
            f"--load-in-{quantization} needs bitsandbytes: pip install 'trajforge[qlora]'") from None
    from transformers import BitsAndBytesConfig

    if quantization == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    # NF4 with double quantization and bf16 compute: the QLoRA paper's recipe.
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=dtype)


def load_base(model: str, dtype: str = "auto", device: str | None = None,
              quantization: Quantization = "none", chat_template: str | None = None):
    """(model, tokenizer, device): the base model on ``device`` (default ``pick_device()``); the
    tokenizer renders with ``chat_template`` (text), else the model's own, else the default."""
    from transformers import AutoModelForCausalLM

    device = pick_device(device)
    torch_dtype = compute_dtype(dtype, device)
    quant = quantization_config(quantization, device, torch_dtype)
    path = resolve(model)
    tok = load_tokenizer(path, chat_template)
    kwargs = {"dtype": torch_dtype}
    if quant is not None:
        kwargs["quantization_config"] = quant
    if device != "cpu":
        kwargs["device_map"] = {"": device}  # read straight onto the device
    net = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    return net, tok, device


def load_model(model: str, adapter: str | None = None, dtype: str = "auto", device: str | None = None,
               chat_template: str | None = None):
    """(model, tokenizer) in eval mode on its device, left-padded for batched generation; the
    adapter's lineage (SFT, then DPO on it, ...) merged in when given: merged weights generate as
    fast as the base model. ``chat_template``: as ``load_base``."""
    net, tok, _ = load_base(model, dtype, device, chat_template=chat_template)
    tok.padding_side = "left"
    if adapter:
        from peft import PeftModel

        from trajforge.policies.hf import adapter_lineage

        for step in adapter_lineage(adapter):
            net = PeftModel.from_pretrained(net, step).merge_and_unload()
    net.eval()
    return net, tok
