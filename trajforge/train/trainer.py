"""Deprecated home of the shared training loop; it now lives in smaller modules:

- ``train/settings.py``   ``LoraSettings`` (adapter, optimiser, hardware, checkpoints, budgets)
- ``train/model.py``      ``lora_model`` (base on its device + a fresh LoRA)
- ``train/loop.py``       ``fit`` on accelerate, ``FitResult``, ``out_of_time``
- ``train/checkpoint.py`` ``Checkpointer`` (safetensors + JSON, atomic, resumable)
- ``train/adapter.py``    ``save_adapter``
"""

from __future__ import annotations

from trajforge.train.adapter import save_adapter
from trajforge.train.checkpoint import CHECKPOINTS, Checkpointer, NonFiniteWeights
from trajforge.train.loop import CallBatches, FitResult, Runtime, fit, out_of_time
from trajforge.train.model import lora_model
from trajforge.train.settings import LoraSettings

__all__ = ["CHECKPOINTS", "CallBatches", "Checkpointer", "FitResult", "LoraSettings", "NonFiniteWeights",
           "Runtime", "fit", "lora_model", "out_of_time", "save_adapter"]


# Names this module imported in 0.1 (deprecated; see trajforge/_compat.py).
from trajforge._compat import moved_names  # noqa: E402

__getattr__ = moved_names(__name__, {
    "Curves": "trajforge.train.curves",
})
