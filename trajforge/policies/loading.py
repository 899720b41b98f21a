"""Loading a local model onto its device: base weights (optionally 4/8-bit), adapters merged or not.

Every local model — the hf policy, the trainer, replay distillation, ``serve`` — loads through
``load_base``, so they all land on the device ``policies.devices.pick_device`` chose, in the
dtype that device computes in. Weights are placed on the device as they are read
(``device_map``), never materialised on the CPU first: a 7B model in bf16 is 15 GB that a
24 GB host cannot hold twice.

QLoRA: ``quantization="4bit"`` / ``"8bit"`` loads the frozen base through bitsandbytes (CUDA only;
``pip install 'trajforge[qlora]'``). Elsewhere it is refused with a message that says why,
before any weights are read.
"""

from __future__ import annotations

from typing import Literal

from trajforge.policies.devices import compute_dtype, pick_device
from trajforge.policies.models import resolve

Quantization = Literal["none", "4bit", "8bit"]


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
              quantization: Quantization = "none"):
    """(model, tokenizer, device): the base model on ``device`` (default ``pick_device()``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = pick_device(device)
    torch_dtype = compute_dtype(dtype, device)
    quant = quantization_config(quantization, device, torch_dtype)
    path = resolve(model)
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    kwargs = {"dtype": torch_dtype}
    if quant is not None:
        kwargs["quantization_config"] = quant
    if device != "cpu":
        kwargs["device_map"] = {"": device}  # read straight onto the device
    net = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    return net, tok, device


def load_model(model: str, adapter: str | None = None, dtype: str = "auto", device: str | None = None):
    """(model, tokenizer) in eval mode on its device, left-padded for batched generation; the
    adapter's lineage (SFT, then DPO on it, ...) merged in when given: merged weights generate as
    fast as the base model."""
    net, tok, _ = load_base(model, dtype, device)
    tok.padding_side = "left"
    if adapter:
        from peft import PeftModel

        from trajforge.policies.hf import adapter_lineage

        for step in adapter_lineage(adapter):
            net = PeftModel.from_pretrained(net, step).merge_and_unload()
    net.eval()
    return net, tok
