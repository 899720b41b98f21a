"""The sequence lengths a store gives a model, read exactly as ``train sft`` reads them.

``trajforge plan --data STORE`` needs the widest micro-batch of the run and the tokens it trains
on. Both come from the real path: the store's trajectories, ``sft.select`` (the tiers SFT learns
from), the model's tokenizer and the one sequence builder (``sft.build_samples``: stored token ids
where they verify, else rendered; samples over ``max_len`` skipped), and ``sft.run_rows`` (the
length-grouped micro-batches). Replay samples (``replay_share``) are short self-distilled answers:
they are counted for time, never the widest batch.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from trajforge.train.plan import Workload

REPLAY_SAMPLE_TOKENS = 143
"""Mean length of a replay sample (chat-templated general prompt + at most 96 answer tokens),
measured on the embedded model's cached replay set."""


class DataStats(BaseModel):
    """What a store gives one model under ``train sft``'s settings."""

    store: str
    trajectories: int
    samples: int
    """Task samples within ``max_len``."""
    skipped: dict[str, int]
    tokens: int
    """Tokens of one pass over the task samples."""
    loss_tokens: int
    longest: int
    replay_samples: int
    """Replay samples mixed into each epoch (``replay_share``)."""
    replay_tokens: int
    replay_cached: bool = False
    """The replay samples are the run's own (the model's replay cache), not an estimate of
    ``REPLAY_SAMPLE_TOKENS`` each: then they take part in the micro-batches as in the run."""
    tokenizer: str
    """Whose tokenizer measured the lengths."""
    workloads: list[Workload] = []
    """Every distinct micro-batch shape of the run (rows, padded width, loss tokens, prefix); with
    ``max_steps`` only those of its first ``max_steps × grad_accum`` micro-batches."""
    batch_size: int
    grad_accum: int
    """The micro-batch and accumulation the workloads were cut with (derived ones settled for the
    plan's hardware, as ``train sft`` settles them for its device)."""


def tokenizer_for(model: str):
    """(tokenizer, folder it came from): the model's own when it is local, else the embedded one's
    (a hub-only model's lengths are then an approximation, and the plan says so)."""
    from transformers import AutoTokenizer

    from trajforge.policies.models import is_embedded, resolve

    folder = resolve(model) if is_embedded(model) else model
    if not (Path(folder) / "tokenizer_config.json").is_file():
        folder = resolve("smollm2-135m")
    tok = AutoTokenizer.from_pretrained(folder)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok, str(folder)


def read_data(store: str | Path, model: str, cfg, hw=None, derived=None) -> DataStats:
    """``DataStats`` of ``store`` for ``model`` under ``cfg`` (an ``SFTConfig``). A derived micro-batch
    (``batch_size`` None) is settled for ``hw`` (plan.Hardware; None: one CPU process here) and
    recorded in ``derived`` (defaults.Derived) when given."""
    from trajforge.store import TrajectoryStore
    from trajforge.train.sft import build_samples, run_rows, select

    trajs = TrajectoryStore(store).read()
    if not trajs:
        raise ValueError(f"no trajectories in {store}")
    data, skipped = select(trajs, cfg)
    if not data:
        raise ValueError(f"no trajectories of tiers {cfg.tiers} in {store} (skipped: {skipped})")
    from trajforge.train.defaults import derive, model_params

    cfg, record = derive(cfg, model_params(model), len(data), hw.gpus if hw else 1)  # derived values, made concrete
    derived = derived if derived is not None else record
    tok, folder = tokenizer_for(model)
    samples, _ = build_samples(data, tok, model, cfg, skipped)
    if not samples:
        raise ValueError(f"no sample of {store} fits --max-len {cfg.max_len} (skipped: {skipped})")
    n_task = len(samples)
    cached = cached_replay_samples(model, tok) if cfg.replay_share > 0 else None
    replay = round(n_task * cfg.replay_share / (1 - cfg.replay_share)) if cfg.replay_share > 0 else 0
    if cached:  # the run's own mix: replay samples share the length-grouped micro-batches
        from trajforge.train.replay import mix_replay

        mixed = mix_replay(cached, n_task, cfg.replay_share, cfg.seed)
        replay_tokens = sum(len(s.input_ids) for s in mixed)
        samples = samples + mixed
    else:
        replay_tokens = replay * REPLAY_SAMPLE_TOKENS

    world = hw.gpus if hw else 1
    settled = cfg.batch_size is None  # derived here: cut as train sft cuts a derived micro-batch

    def rows_at(at) -> list[list[int]]:
        rows = run_rows(samples, at.model_copy(update={"epochs": min(cfg.epochs, 1.0)}), world, settled)
        if cfg.max_steps > 0:  # a short run meets only its first micro-batches
            rows = rows[: cfg.max_steps * at.grad_accum * world]
        return rows

    if settled:
        from trajforge.train.defaults import accumulation
        from trajforge.train.shapes import model_shape

        def at(m: int):
            return cfg.model_copy(update={"batch_size": m, "grad_accum": accumulation(derived.effective_batch, m, world)})

        cfg = settle_for(cfg, derived, model_shape(model), hw, lambda m: data_workloads(samples, rows_at(at(m))))
    rows = rows_at(cfg)
    return DataStats(
        store=str(store), trajectories=len(trajs), samples=n_task, skipped=skipped,
        tokens=sum(len(s.input_ids) for s in samples[:n_task]),
        loss_tokens=sum(sum(s.loss_mask[1:]) for s in samples[:n_task]),
        longest=max(len(s.input_ids) for s in samples[:n_task]), replay_samples=replay,
        replay_tokens=replay_tokens, replay_cached=bool(cached), tokenizer=folder,
        workloads=data_workloads(samples, rows), batch_size=cfg.batch_size, grad_accum=cfg.grad_accum)


def settle_for(cfg, derived, shape, hw, workloads_for=None):
    """``defaults.settle_micro_batch`` on the plan's hardware (None: one CPU process here);
    ``workloads_for`` None: rows of ``max_len`` tokens (``plan.settings_workload``)."""
    from trajforge.train.defaults import settle_micro_batch
    from trajforge.train.plan import Hardware, device_budget_bytes, settings_workload

    hw = hw or Hardware(device="cpu")  # cpu: no hardware given, this host
    workloads_for = workloads_for or (lambda m: [settings_workload(cfg.model_copy(update={"batch_size": m}))])
    return settle_micro_batch(cfg, derived, shape, workloads_for, hw.device, device_budget_bytes(hw), hw.gpus)


def data_workloads(samples, rows: list[list[int]]) -> list[Workload]:
    """The distinct micro-batch shapes of ``rows`` (lists of indices into ``samples``)."""
    shapes = {micro_batch([samples[i] for i in r]) for r in rows}
    return [Workload(rows=r, width=w, loss_tokens=n, prefix=p, source="data") for r, w, n, p in sorted(shapes)]


def cached_replay_samples(model: str, tok):
    """The self-distilled replay samples ``train sft`` would mix in, when the model's replay cache
    holds them (the first run makes it); None otherwise: generating them needs the model."""
    from trajforge.policies.models import home, resolve
    from trajforge.train.replay import cached_replay, general_prompts

    try:
        return cached_replay(resolve(model), None, tok, general_prompts()[0], home() / "replay")
    except AttributeError:  # not cached: self_distill reached for the model we did not load
        return None


def micro_batch(rows) -> tuple[int, int, int, int]:
    """(rows, padded width, loss positions, shared prefix) of one micro-batch of samples, as
    ``sequences.collate`` pads it and ``losses.common_prefix_len`` finds its prefix."""
    from trajforge.train.sequences import PAD_MULTIPLE

    longest = max(len(s.input_ids) for s in rows)
    width = -(-longest // PAD_MULTIPLE) * PAD_MULTIPLE
    loss = sum(sum(s.loss_mask[1:]) for s in rows)
    prefix = 0
    first = rows[0]
    shortest = min(len(s.input_ids) for s in rows)
    while (prefix < shortest and not any(s.loss_mask[prefix] for s in rows)
           and all(s.input_ids[prefix] == first.input_ids[prefix] for s in rows)):
        prefix += 1
    return len(rows), width, loss, prefix
