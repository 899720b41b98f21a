"""``trajforge plan``: memory per device for LoRA training and vLLM serving, time and cost — before a run.

    trajforge plan --model qwen2.5-7b --max-len 4096 --batch 4 --grad-accum 8 --json
    trajforge plan --model smollm2-135m --data store/ --device cpu          # this machine, this data
    trajforge plan --model dense-17b --serve-max-len 8192 --serve-concurrency 4

Pure Python and JSON (no torch at import): the numbers are arithmetic on the model's shape
(``train/shapes.py``) and ``train sft``'s settings, whose defaults it takes from ``SFTConfig``.
GB means 10^9 bytes. The training estimate is for the largest micro-batch: ``batch_size`` rows
of ``max_len`` tokens, or with ``--data`` the widest micro-batch the store's samples make (read
with the real tokenizer and sequence builder, ``plan_data``).

Training memory per device, component by component:

- **weights**: every parameter at the base dtype's width; 4-bit (NF4 + double quantization, the
  QLoRA recipe ``policies/loading.py`` builds) is 4.127 bits per linear weight, 8-bit one byte, and
  under both peft's ``prepare_model_for_kbit_training`` casts the rest (embeddings, LM head,
  norms) to fp32. ZeRO-3 and FSDP shard the weights over the GPUs and gather about two layers at
  a time; DDP and ZeRO-2 replicate them.
- **lora**: adapter weights, gradients and AdamW's two moments, all fp32: 16 bytes per trainable
  parameter (+4 for DDP's gradient buckets). ZeRO-2 shards gradients and moments, ZeRO-3 and FSDP
  everything.
- **activations**: what autograd keeps for the backward pass (``layer_bytes_per_token``, counted
  op by op for a transformers Llama-style layer under peft LoRA with dropout). With gradient
  checkpointing each layer keeps only its input and one layer at a time is recomputed; without,
  every layer keeps everything. Plus the backward pass's working set.
- **logits**: the chunked LM head (``train/losses.py``) runs only loss positions, at most
  ``chunk_tokens(vocab)`` at a time: about four fp32 copies of a chunk's logits at the peak of its
  backward (logits, log-softmax, their gradients).
- **runtime**: on CUDA the context and the caching allocator's slack (not in
  ``torch.cuda.max_memory_allocated``, which ``allocated_gb`` predicts); on a CPU the interpreter
  and libraries, and glibc's retention of freed activation memory (``CPU_RUNTIME_GB``,
  ``CPU_ALLOCATOR_FACTOR``: measured by ``benchmarks/plan_check.py``).

Serving (vLLM): weights + KV cache (2 × layers × kv_heads × head_dim × bytes × max_len ×
concurrency) + buffers (CUDA context, CUDA graphs, the profiling pass's activations at
``max_num_batched_tokens``, the sampler's logits), and the tensor-parallel size that makes one
GPU's share fit. Time: tokens per epoch × epochs ÷ tokens/s (``--tokens-per-s``, ``--calibrate``
on this hardware, else an estimate from FLOPs), and cost at ``--price-per-hour`` per GPU.
"""

from __future__ import annotations

import math
import os
from typing import Literal, NamedTuple

from pydantic import BaseModel

from trajforge.train.losses import MIN_SHARED_PREFIX, chunk_tokens  # pure Python: no torch at import
from trajforge.train.settings import Quantization
from trajforge.train.shapes import Shape

GB = 1e9
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
ADAPTER_BYTES = 4
"""LoRA weights stay fp32 under a bf16/fp16 base, and peft casts the branch's input to them: its
dropout runs in fp32 (its matmuls, under autocast, in bf16)."""
NF4_BYTES = 4.127 / 8
"""NF4 with double quantization: 4 bits + 8-bit absmax per 64 + fp32 per 256 blocks (QLoRA paper)."""
LORA_BYTES = 16
"""fp32 adapter weight + gradient + AdamW exp_avg + exp_avg_sq, per trainable parameter."""
LOGIT_COPIES = 3
"""fp32 copies of a chunk's logits alive at the peak of its backward: the log-softmax output
(saved), the gradient the gather scatters into it, and the gradient of the logits. Measured on a
CPU with training's 1 MiB mmap threshold (``benchmarks/head_memory.py``: one micro-batch's peak
resident set above the resident set before it, tiny llamas, 1,066 and 2,200 loss positions, with
and without checkpointing, every or the top 2 layers adapted): all eight within 4% of the plan's
activations plus three copies. Stop 16 fitted four to a whole ``train sft`` run, whose resident
set between steps moves by 0.1 GB; that over-predicted the runs whose peak is the head."""

CUDA_CONTEXT_GB = 0.5
"""CUDA context, cuBLAS workspace and kernels: memory a process holds outside torch's allocator."""
CUDA_ALLOCATOR_SLACK = 0.10
"""Reserved-but-unallocated share of the caching allocator at the peak (fragmentation)."""

CPU_RUNTIME_GB = 0.51
"""Resident memory of a training process besides weights and tensors: the interpreter, torch,
transformers, peft, accelerate, tokenizer, data and thread pools (``plan_check.py --fit`` over its
five runs at stop 24: 0.512; stop 16's fit, 0.75, was made when the resident set between steps of
the same tiny runs was ~0.5 GB higher)."""
MMAP_THRESHOLD_ENV = "TRAJFORGE_MMAP_THRESHOLD"
"""Training on a CPU fixes glibc's mmap threshold (``train/host_memory.py``) so freed activations
leave the process; set to 0, glibc's dynamic threshold keeps them in the brk heap and its
high-water mark stays resident (3.6 GB of heap, 4.7 GB resident, for the embedded model at the
defaults after 3-4 micro-batches, against 2.2 GB predicted). CPU predictions assume the fix."""
CPU_ALLOCATOR_FACTOR = 1.06
"""Resident bytes per live activation byte at the peak on a CPU (glibc keeps some freed memory,
blocks under the mmap threshold among them; ``plan_check.py --fit`` at stop 24: 1.062)."""

VLLM_BATCHED_TOKENS = 8192
"""vLLM's ``max_num_batched_tokens`` for its memory-profiling forward pass (its default with
chunked prefill on large GPUs)."""
VLLM_GRAPHS_GB = 0.5
"""CUDA graphs vLLM captures for decode batch sizes (typically 0.3-1 GB)."""
VLLM_SAMPLER_SEQS = 256
"""Sequences vLLM's sampler is profiled with (``max_num_seqs`` default): fp32 logits each."""

GPU_GB = 80.0
"""One GPU's memory when none is given or detected (an 80 GB A100/H100)."""
SERVE_CONCURRENCY = 8
"""Sequences of the full serving length the KV cache is sized for, unless told otherwise."""
VLLM_MAX_UTILIZATION = 0.95
"""The highest ``--gpu-memory-utilization`` the plan proposes (the rest: other processes, slack)."""
TP_SIZES = (1, 2, 4, 8)

GPU_TFLOPS = 989.0
"""Dense bf16 peak of an H100/H200 SXM, for the time estimate without a measured tokens/s."""
GPU_MFU = 0.35
"""Assumed share of that peak a LoRA SFT step reaches (an assumption: calibrate to replace it)."""
CPU_TRAIN_FLOPS = {"float32": 30e9, "bfloat16": 125e9}
"""FLOP/s (as ``train_flops_per_token`` counts them) LoRA SFT sustains on this project's 2-core CPU:
fp32 measured by ``plan_check.py``; bf16 (AMX) from the no-flag runs on the demo's pool, 378,623
tokens each: 234 tokens/s without checkpointing (125 GFLOP/s) and 172 with it (135), stops 53–54.
The shared-prefix saving is in the bf16 figure, not in the FLOP count."""


# ---- inputs ------------------------------------------------------------------------------------


class Workload(BaseModel):
    """The micro-batch the memory estimate is for."""

    rows: int
    """Sequences in it (``batch_size``)."""
    width: int
    """Padded length of each row."""
    loss_tokens: int
    """Positions that go through the LM head."""
    prefix: int = 0
    """Tokens every row shares (run once through a KV cache when ``share_prefix`` applies)."""
    source: str = "settings"
    """``settings`` (rows × max_len, every position a loss position) or ``data``."""


class Hardware(BaseModel):
    device: Literal["cpu", "cuda"] = "cuda"
    gpus: int = 1
    """Processes (one per GPU) training together."""
    gpu_gb: float = GPU_GB
    """Memory of one GPU, for "fits" and the serving tensor-parallel size."""


def resolve_dtype(dtype: str, device: str) -> str:
    """The dtype ``train sft`` computes in (``policies.devices.compute_dtype``, without torch):
    ``$TRAJFORGE_DTYPE`` wins, then ``dtype``; auto is bf16 on CUDA (Ampere and later) and on CPUs
    with native bf16, fp32 on other CPUs."""
    from trajforge.policies.devices import DTYPE_ENV, _cpu_has_native_bf16

    name = os.environ.get(DTYPE_ENV, dtype) or "auto"
    name = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(name, name)
    if name == "auto":
        return "bfloat16" if device == "cuda" or _cpu_has_native_bf16() else "float32"
    if name not in BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; use auto, float32, bfloat16 or float16")
    return name


# ---- training memory ---------------------------------------------------------------------------


def weight_bytes(shape: Shape, dtype: str, load_in: Quantization) -> float:
    """Bytes of the frozen base model's weights (see the module docstring for 4/8-bit)."""
    count = shape.params()
    if load_in == "none":
        return count.total * BYTES[dtype]
    per_linear = NF4_BYTES if load_in == "4bit" else 1.0
    return count.linear * per_linear + (count.total - count.linear) * 4


def activation_width(dtype: str, load_in: Quantization) -> int:
    """Bytes per activation value: the compute dtype; fp32 under 4/8-bit, where the fp32 norms and
    embeddings make the residual stream fp32 and no autocast runs."""
    return 4 if load_in != "none" else BYTES[dtype]


def layer_bytes_per_token(shape: Shape, s: int, r: int, targets: list[str], dropout: float,
                          device: str, padded: bool = True) -> float:
    """Bytes one decoder layer keeps for the backward pass per token (transformers Llama-style
    layer, frozen base under peft LoRA, activations of width ``s`` bytes), op by op:

    - each RMSNorm: its fp32 input copy and 1/rms (4H + 4);
    - each LoRA-targeted linear with input width d: dropout's output and mask, and lora_A's output
      (r wide); frozen linears keep nothing (no weight gradient). CUDA's fused dropout keeps a
      1-byte mask. peft casts a bf16 input to the fp32 adapter first, so the CPU kernel's noise
      tensor is fp32 (``ADAPTER_BYTES`` per element, whatever ``s`` is); under bf16 autocast
      lora_A then keeps its own ``s``-wide copy of its input, so without dropout too each adapted
      linear keeps one (in fp32 there is no cast, and linears sharing an input share it). Stop
      56, this CPU, bf16, no checkpointing, whole ``train sft`` runs (resident peak, 1 MiB
      allocator): the four-environment pool of ``benchmarks/composition.py`` at 8 × 2,376 tokens
      23.34 GB, planned 18.9 with the noise at ``s`` and 23.07 now; 4 × 3,640 22.86, planned 17.2
      and 21.0 now; the demo's pool at 4 × 928 5.88, planned 4.98 and 5.79 now;
    - attention (SDPA): q, k, v after RoPE, the output and the log-sum-exp; with padding
      transformers repeats k and v to all heads (``repeat_kv``) instead of SDPA's GQA mode;
    - the gated MLP: gate's output, its activation and up's output (3·s·I).
    """
    h, i = shape.hidden, shape.intermediate
    norms = shape.norms_per_layer * (4 * h + 4)
    inputs = {name: d_in for name, (d_in, _) in shape.linears().items() if name in targets}
    if dropout > 0:
        mask = 1 if device == "cuda" else ADAPTER_BYTES
        lora = sum((s + mask) * d + s * r for d in inputs.values())
    elif s == ADAPTER_BYTES:  # nn.Identity, no cast: lora_A keeps the layer's input, once per distinct input
        lora = s * sum(set(inputs.values())) + s * r * len(inputs)
    else:  # each adapted linear keeps its own autocast copy of its (fp32-cast) input
        lora = s * sum(inputs.values()) + s * r * len(inputs)
    kv = shape.q_dim if padded else shape.kv_dim
    attention = s * (2 * shape.q_dim + 2 * kv) + 4 * shape.heads
    mlp = 3 * s * i
    return norms + lora + attention + mlp


def eager_scores_bytes(shape: Shape, s: int, width: int) -> float:
    """Per query token, the attention scores an eager layer keeps (scores, soft-capped scores in
    ``s`` bytes, fp32 softmax): only for models SDPA cannot run (``Shape.eager_attention``)."""
    return shape.heads * width * (2 * s + 4) if shape.eager_attention else 0.0


def backward_bytes_per_token(shape: Shape, s: int) -> float:
    """The backward pass's working set per token beyond saved activations while one layer's
    backward runs: about one I-wide and two H-wide gradients (the layer's own saved tensors are
    freed as its backward consumes them). Fitted to profiled peaks (``tests/train/test_plan_activations.py``)."""
    return s * (shape.intermediate + 2 * shape.hidden)


class TrainMemory(BaseModel):
    """Predicted peak memory of one training process (GB): the components alive at the peak."""

    weights_gb: float
    lora_gb: float
    """Adapter weights, gradients and optimizer state."""
    activations_gb: float
    """Saved activations (or checkpoints) and the backward working set at the peak."""
    logits_gb: float
    """LM-head logits at the peak (0 when the peak is a layer's backward, after the head's)."""
    runtime_gb: float
    """CUDA: context + allocator slack. CPU: interpreter and libraries + allocator retention."""
    allocated_gb: float
    """Tensors alone: what ``torch.cuda.max_memory_allocated`` reports on a GPU."""
    total_gb: float
    """The predicted peak per device: on CUDA allocated + context + allocator slack; on a CPU the
    process's peak resident set."""
    fits: bool
    """``total_gb`` within one GPU's memory (``--gpu-gb``), or this host's memory on a CPU."""
    dtype: str
    """Weights and activations dtype the run uses (after auto and $TRAJFORGE_DTYPE)."""
    lora_params: int
    base_params: int
    unmatched_targets: list[str] = []
    """LoRA targets this architecture has no module for (peft skips them)."""


def train_memory(shape: Shape, cfg, hw: Hardware, work: Workload) -> TrainMemory:
    """The components of one process's peak for ``cfg`` (an ``SFTConfig``) on ``hw``."""
    dtype = resolve_dtype(cfg.dtype, hw.device)
    several = hw.gpus > 1
    weights = weight_bytes(shape, dtype, cfg.load_in)
    if several and cfg.distributed in ("zero3", "fsdp"):
        # Each GPU holds its shard plus about two gathered layers (the current one and the prefetch).
        weights = weights / hw.gpus + 2 * (weights / shape.layers)
    n_lora = shape.lora_params(cfg.r, cfg.targets, cfg.lora_layers)
    lora = n_lora * lora_state_bytes(cfg.distributed if several else "single", hw.gpus)
    peak = activation_peak(shape, cfg, work, activation_width(dtype, cfg.load_in), hw.device)
    allocated = weights + lora + peak.activations + peak.logits
    if hw.device == "cpu":
        runtime = CPU_RUNTIME_GB * GB + (CPU_ALLOCATOR_FACTOR - 1.0) * (peak.activations + peak.logits)
    else:
        runtime = CUDA_CONTEXT_GB * GB + CUDA_ALLOCATOR_SLACK * allocated
    total = allocated + runtime
    limit = hw.gpu_gb * GB if hw.device == "cuda" else host_memory_bytes()
    names = set(shape.linears())
    return TrainMemory(
        weights_gb=_gb(weights), lora_gb=_gb(lora), activations_gb=_gb(peak.activations),
        logits_gb=_gb(peak.logits), runtime_gb=_gb(runtime), allocated_gb=_gb(allocated), total_gb=_gb(total),
        fits=total <= limit, dtype=dtype, lora_params=n_lora, base_params=shape.params().total,
        unmatched_targets=[t for t in cfg.targets if t not in names])


def lora_state_bytes(mode: str, gpus: int) -> float:
    """Bytes per LoRA parameter on one device: replicated (one process; DDP adds its gradient
    buckets), gradients and moments sharded (zero2), or everything sharded (zero3, fsdp)."""
    if mode == "ddp":
        return LORA_BYTES + 4
    if mode == "zero2":
        return 4 + (LORA_BYTES - 4) / gpus
    if mode in ("zero3", "fsdp"):
        return LORA_BYTES / gpus
    return LORA_BYTES


class ActivationPeak(NamedTuple):
    activations: float
    """Saved activations and the backward working set alive at the peak (bytes)."""
    logits: float
    """LM-head logits alive at the peak (bytes)."""


def positions_run(work: Workload, share_prefix: bool = True) -> int:
    """Positions a micro-batch's forward pass runs: every row's, or with a shared prompt prefix
    (``losses.decoder_hidden``: more than one row, at least ``MIN_SHARED_PREFIX`` tokens) the
    prefix once and each row's suffix."""
    if share_prefix and work.rows > 1 and work.prefix >= MIN_SHARED_PREFIX:
        return work.prefix + work.rows * (work.width - work.prefix)
    return work.rows * work.width


def activation_peak(shape: Shape, cfg, work: Workload, s: int, device: str) -> ActivationPeak:
    """What one micro-batch's forward and backward hold at their highest point. Two candidates:
    the LM head's backward (every layer's saved activations or checkpointed inputs still alive,
    plus ``LOGIT_COPIES`` fp32 copies of a chunk's logits), or a layer's backward (with
    checkpointing: its recomputed activations on top of the checkpoints; the logits are gone).
    Only adapted layers keep anything: below the lowest one (``--lora-layers``) nothing needs a
    gradient, so autograd records nothing there."""
    layers = shape.adapted_layers(cfg.lora_layers)
    per_token = layer_bytes_per_token(shape, s, cfg.r, cfg.targets, cfg.dropout, device)
    per_token += eager_scores_bytes(shape, s, work.width)
    shared = cfg.share_prefix and not cfg.gradient_checkpointing
    tokens = positions_run(work, shared)
    expanded = 0.0
    if tokens < work.rows * work.width:  # the prefix ran once; its KV is expanded to every row
        expanded = layers * work.rows * work.prefix * 2 * s * (shape.kv_dim + shape.q_dim)
    # The final norm's fp32 input, the boolean attention mask, the loss positions' hidden states.
    model = tokens * (4 * shape.hidden + 4) + work.rows * work.width ** 2 + work.loss_tokens * s * shape.hidden
    backward = tokens * backward_bytes_per_token(shape, s)
    if cfg.gradient_checkpointing:
        kept = layers * tokens * s * shape.hidden + model
        in_layer = tokens * per_token + backward
    else:
        kept = layers * tokens * per_token + expanded + model
        in_layer = backward
    head = LOGIT_COPIES * min(work.loss_tokens, chunk_tokens(shape.vocab)) * shape.vocab * 4
    if head >= in_layer:
        return ActivationPeak(kept, head)
    return ActivationPeak(kept + in_layer, 0.0)


def settings_workload(cfg) -> Workload:
    """Without data: ``batch_size`` rows of ``max_len`` tokens, every position a loss position
    (the most the settings allow)."""
    return Workload(rows=cfg.batch_size, width=cfg.max_len, loss_tokens=cfg.batch_size * cfg.max_len)


def peak_workload(shape: Shape, cfg, hw: Hardware, workloads: list[Workload]) -> Workload:
    """The micro-batch whose activations peak highest."""
    s = activation_width(resolve_dtype(cfg.dtype, hw.device), cfg.load_in)
    return max(workloads, key=lambda w: sum(activation_peak(shape, cfg, w, s, hw.device)))


def device_budget_bytes(hw: Hardware) -> float:
    """One training process's memory on ``hw``: a GPU's, or its share of this host's (what the
    derived checkpointing and micro-batch plan against)."""
    return hw.gpu_gb * GB if hw.device == "cuda" else host_share_bytes(hw.gpus)


def host_share_bytes(processes: int) -> float:
    """One of ``processes`` training processes' share of this host's memory (auto checkpointing's budget on a CPU)."""
    return host_memory_bytes() / max(1, processes)


def host_memory_bytes() -> float:
    """This machine's memory (MemTotal), or infinity where /proc/meminfo cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return math.inf


# ---- serving (vLLM) ----------------------------------------------------------------------------


class ServeMemory(BaseModel):
    """vLLM memory for the base model (and its adapters) at a context length and concurrency (GB)."""

    weights_gb: float
    kv_cache_gb: float
    """2 × layers × kv_heads × head_dim × bytes × max_model_len × concurrency."""
    buffers_gb: float
    """CUDA context, CUDA graphs, the profiling pass's activations, the sampler's logits, LoRA slots."""
    total_gb: float
    tensor_parallel_size: int
    """The fewest GPUs (1, 2, 4, 8 dividing the heads) whose share fits ``gpu_memory_utilization``."""
    per_gpu_gb: float
    gpu_memory_utilization: float
    """vLLM's budget share of one GPU: weights + buffers + exactly this KV cache."""
    max_model_len: int
    concurrency: int
    fits: bool


def serve_memory(shape: Shape, dtype: str, max_len: int, concurrency: int, gpu_gb: float,
                 lora_r: int = 0, targets: list[str] = ()) -> ServeMemory:
    """vLLM serving memory; weights in 16 bit (``dtype`` when it is 16-bit, else bf16)."""
    width = BYTES[dtype] if BYTES[dtype] == 2 else 2
    weights = shape.params().total * width
    kv_token = shape.kv_bytes_per_token(width)
    kv = kv_token * max_len * concurrency
    adapters = shape.lora_params(lora_r, list(targets)) * width if lora_r else 0.0
    chosen = None
    for tp in TP_SIZES:
        if shape.heads % tp:
            continue
        # KV heads are split over the GPUs; below one head per GPU vLLM replicates them.
        kv_share = kv * max(1, shape.kv_heads // tp) / shape.kv_heads
        per_gpu = weights / tp + kv_share + vllm_buffers(shape, width, tp) + adapters / tp
        chosen = (tp, per_gpu)
        if per_gpu <= VLLM_MAX_UTILIZATION * gpu_gb * GB:
            break
    tp, per_gpu = chosen
    utilization = min(VLLM_MAX_UTILIZATION, math.ceil(100 * per_gpu / (gpu_gb * GB) + 2) / 100)
    buffers = vllm_buffers(shape, width, 1) + adapters
    return ServeMemory(weights_gb=_gb(weights), kv_cache_gb=_gb(kv), buffers_gb=_gb(buffers),
                       total_gb=_gb(weights + kv + buffers), tensor_parallel_size=tp, per_gpu_gb=_gb(per_gpu),
                       gpu_memory_utilization=utilization, max_model_len=max_len, concurrency=concurrency,
                       fits=per_gpu <= VLLM_MAX_UTILIZATION * gpu_gb * GB)


def vllm_buffers(shape: Shape, width: int, tp: int) -> float:
    """Per GPU: context + CUDA graphs + the profiling forward's peak activations (hidden, q/k/v and
    the MLP's gate/up and activation for ``VLLM_BATCHED_TOKENS``, split by tensor parallelism) +
    the sampler's fp32 logits and probabilities for ``VLLM_SAMPLER_SEQS`` sequences."""
    per_token = width * (2 * shape.hidden + (shape.q_dim + 2 * shape.kv_dim + 3 * shape.intermediate) / tp)
    sampler = VLLM_SAMPLER_SEQS * shape.vocab * 4 * 2
    return (CUDA_CONTEXT_GB + VLLM_GRAPHS_GB) * GB + VLLM_BATCHED_TOKENS * per_token + sampler


# ---- time and cost -----------------------------------------------------------------------------


class Timing(BaseModel):
    tokens: int
    """Tokens the run trains on (all epochs, replay included)."""
    flops_per_token: float
    tokens_per_s: float | None
    tokens_per_s_source: str
    """``given`` (--tokens-per-s), ``calibrated`` (a measured run here) or an estimate's assumption."""
    hours: float | None
    gpu_hours: float | None
    cost: float | None
    """gpu_hours × --price-per-hour."""


def train_flops_per_token(shape: Shape, cfg, width: int, loss_share: float) -> float:
    """Forward FLOPs per token (2 × linear parameters + causal attention + the head on loss
    positions) × passes: the forward, the backward's input gradients (a frozen base computes no
    weight gradients), and a recomputed forward under gradient checkpointing. The backward and the
    recomputation run through the adapted layers only (``--lora-layers``)."""
    count = shape.params()
    lora = shape.lora_params(cfg.r, cfg.targets, cfg.lora_layers)
    attention = 2 * 2 * shape.layers * shape.q_dim * width / 2
    forward = 2 * (count.linear + lora) + attention
    head = 2 * shape.vocab * shape.hidden * loss_share
    backward = (2 if cfg.gradient_checkpointing else 1) * shape.adapted_layers(cfg.lora_layers) / shape.layers
    return (1 + backward) * forward + 2 * head


def timing(shape: Shape, cfg, hw: Hardware, tokens: int, width: int, loss_share: float,
           tokens_per_s: float | None, source: str, price_per_hour: float | None) -> Timing:
    flops = train_flops_per_token(shape, cfg, width, loss_share)
    if tokens_per_s is None and hw.device == "cuda":
        tokens_per_s = hw.gpus * GPU_TFLOPS * 1e12 * GPU_MFU / flops
        source = f"estimated: {GPU_MFU:.0%} of {GPU_TFLOPS:.0f} TFLOP/s per GPU (H100/H200 dense bf16)"
    elif tokens_per_s is None:
        dtype = resolve_dtype(cfg.dtype, hw.device)
        sustained = CPU_TRAIN_FLOPS.get(dtype, CPU_TRAIN_FLOPS["float32"])
        tokens_per_s = sustained / flops
        source = f"estimated: {sustained / 1e9:.0f} GFLOP/s in {dtype} (this project's 2-core CPU, measured)"
    hours = tokens / tokens_per_s / 3600
    gpu_hours = hours * (hw.gpus if hw.device == "cuda" else 1)
    return Timing(tokens=tokens, flops_per_token=round(flops), tokens_per_s=round(tokens_per_s, 1),
                  tokens_per_s_source=source, hours=round(hours, 4), gpu_hours=round(gpu_hours, 4),
                  cost=round(gpu_hours * price_per_hour, 2) if price_per_hour is not None else None)


def _gb(n: float) -> float:
    return round(n / GB, 3)


# ---- the whole plan ----------------------------------------------------------------------------


class Plan(BaseModel):
    """What ``trajforge plan`` prints (``--json``: this, as JSON)."""

    model: Shape
    params: int
    hardware: Hardware
    settings: dict
    """The ``train sft`` settings planned for (``SFTConfig`` fields)."""
    workload: Workload
    """The micro-batch the training peak is for."""
    train: TrainMemory
    serve: ServeMemory
    time: Timing
    data: dict | None = None
    """``--data``: samples, tokens, longest, skipped (``plan_data.DataStats`` without workloads)."""
    notes: list[str] = []


def make_plan(shape: Shape, cfg, hw: Hardware, data=None, serve_max_len: int | None = None,
              serve_concurrency: int = SERVE_CONCURRENCY, price_per_hour: float | None = None,
              tokens_per_s: float | None = None, tokens_source: str = "given", samples: int = 1000) -> Plan:
    """The plan for training ``shape`` with ``cfg`` (an ``SFTConfig``) on ``hw``; ``data`` is a
    ``plan_data.DataStats`` (else ``samples`` samples of ``max_len`` tokens are assumed for time)."""
    from trajforge.train.defaults import auto_checkpointing, derive

    cfg, derived = derive(cfg, shape.params().total, data.samples if data is not None else samples, hw.gpus)
    notes = [f"derived: {why}" for why in derived.why]
    if cfg.batch_size is None and data is not None:  # read_data settled it for the data's micro-batches
        cfg = cfg.model_copy(update={"batch_size": data.batch_size, "grad_accum": data.grad_accum})
    elif cfg.batch_size is None:  # train sft's derived micro-batch, for rows of max_len on this hardware
        from trajforge.train.plan_data import settle_for

        cfg = settle_for(cfg, derived, shape, hw)
        notes.append(f"derived: {derived.why[-1]}")
    if cfg.gradient_checkpointing is None:  # train sft's auto, for the same micro-batches on this hardware
        memory = device_budget_bytes(hw)
        on, why = auto_checkpointing(cfg, shape, data.workloads if data is not None else [settings_workload(cfg)],
                                     hw.device, memory, hw.gpus)
        cfg = cfg.model_copy(update={"gradient_checkpointing": on})
        notes.append(f"derived: {why}")
    if data is not None:
        work = peak_workload(shape, cfg, hw, data.workloads)
        per_epoch = data.tokens + data.replay_tokens
        loss_share = data.loss_tokens / max(1, data.tokens)
        width = data.tokens / max(1, data.samples)
    else:
        work = settings_workload(cfg)
        per_epoch = samples * cfg.max_len
        loss_share, width = 1.0, cfg.max_len
        notes.append(f"no --data: the peak assumes {cfg.batch_size} rows of {cfg.max_len} tokens, all loss "
                     f"positions; time assumes {samples} samples of {cfg.max_len} tokens")
    train = train_memory(shape, cfg, hw, work)
    if train.unmatched_targets:
        notes.append(f"{shape.architecture} has no {', '.join(train.unmatched_targets)}: peft leaves them out "
                     f"(its linears: {', '.join(shape.linears())})")
    if cfg.load_in != "none":
        notes.append(f"--load-in-{cfg.load_in}: arithmetic only (bitsandbytes is not installed where this was "
                     "checked); non-linear weights are fp32 after prepare_model_for_kbit_training")
    if hw.device == "cpu" and not os.environ.get(MMAP_THRESHOLD_ENV, "").strip():  # train sft's derived allocator
        from trajforge.train.defaults import auto_host_allocator

        keep, why = auto_host_allocator(train.total_gb, device_budget_bytes(hw))
        notes.append(f"derived: {why}" + (" (the resident peak may then run up to that multiple of this plan)"
                                          if keep else ""))
    if hw.device == "cpu" and os.environ.get(MMAP_THRESHOLD_ENV, "").strip() == "0":
        notes.append(f"{MMAP_THRESHOLD_ENV}=0: glibc's dynamic mmap threshold keeps freed activations in "
                     "the heap, so CPU peaks run well above this plan (the embedded model at defaults: 4.7 GB "
                     "resident measured vs 1.77 GB with training's own setting; benchmarks/host_memory.py)")
    if hw.gpus > 1 and hw.device == "cpu" and cfg.distributed != "ddp":
        notes.append(f"--distributed {cfg.distributed} needs CUDA; on CPUs only ddp runs")
    tokens = round(per_epoch * cfg.epochs)
    if cfg.max_steps > 0:
        per_step = cfg.batch_size * cfg.grad_accum * hw.gpus
        tokens = min(tokens, round(cfg.max_steps * per_step * per_epoch / max(1, _samples(data, samples))))
    serve = serve_memory(shape, train.dtype, serve_max_len or cfg.max_len, serve_concurrency, hw.gpu_gb,
                         cfg.r, cfg.targets)
    time = timing(shape, cfg, hw, tokens, round(width), loss_share, tokens_per_s, tokens_source, price_per_hour)
    settings = {k: getattr(cfg, k) for k in PLANNED_SETTINGS}
    return Plan(model=shape, params=shape.params().total, hardware=hw, settings=settings, workload=work,
                train=train, serve=serve, time=time, notes=notes,
                data=data.model_dump(exclude={"workloads"}) if data is not None else None)


PLANNED_SETTINGS = ("r", "targets", "lora_layers", "dropout", "batch_size", "grad_accum", "max_len", "max_steps", "epochs",
                    "dtype", "gradient_checkpointing", "share_prefix", "load_in", "distributed", "replay_share")
"""The ``SFTConfig`` fields the plan depends on."""


def _samples(data, samples: int) -> int:
    return (data.samples + data.replay_samples) if data is not None else samples
