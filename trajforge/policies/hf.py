"""Local transformers policy: batched generation across episodes, optional LoRA adapter.

Prompts are rendered by ``Dialect.chat_text`` — the dialect's chat messages through the
tokenizer's own chat template — exactly as the SFT dataset builder renders them; with
``render_mode="template"`` a chat template that takes ``tools`` shows them itself. Generation is
left-padded and batched across all episodes waiting for a turn. Prompt and sampled token ids are
returned so training can use the exact tokens.

The dialect, unless given: the adapter's (what it was trained in), else the embedded model's,
else ``Dialect.for_model(model, chat_template)``; the render mode and the chat template likewise
follow the adapter (its meta records the template text it was trained with), so an adapter acts
exactly as it was trained with no flag. An adapter trained with retrieved demonstrations (``train
sft --demos K``) recorded its pool: ``demos`` says where, and the harness shows the same block in
every episode (``harness/demos.py``). ``chat_template=FILE`` (spec ``?chat_template=FILE``)
chooses the template of a model without an adapter (``policies/loading.py``: a model with none gets
the default); it is refused for an adapter trained with another.
"""

from __future__ import annotations

from pathlib import Path

from trajforge.parse import RENDER_MODES, Dialect, get_dialect
from trajforge.policies.base import ContextExceeded, Generation, TurnRequest
from trajforge.policies.loading import load_model, read_chat_template
from trajforge.policies.models import EMBEDDED
from trajforge._jsonl import read_json_object
from trajforge.policies.turn_cache import TurnCache, common_prefix

ADAPTER_META = "trajforge_adapter.json"


def _cache_kw() -> str:
    """``generate`` takes ``cache=`` from transformers 5.x on, ``past_key_values=`` before."""
    import inspect

    from transformers import GenerationMixin

    return "cache" if "cache" in inspect.signature(GenerationMixin.prepare_inputs_for_generation).parameters \
        else "past_key_values"



class AdapterMismatch(ValueError):
    """An adapter was trained for a different toolset than the one it is asked to act with."""


def read_adapter_meta(adapter_dir: str | Path) -> dict:
    path = Path(adapter_dir) / ADAPTER_META
    if not path.exists():
        raise FileNotFoundError(f"{adapter_dir} is not a trajforge adapter (no {ADAPTER_META})")
    return read_json_object(path, "retrain or restore the adapter's meta")


def check_adapter(adapter_dir: str | Path, fingerprint: str) -> dict:
    """Refuse an adapter trained against other toolsets, naming them (an adapter trained on a
    mixed pool accepts each of its toolsets)."""
    meta = read_adapter_meta(adapter_dir)
    known = trained_fingerprints(meta)
    if fingerprint not in known:
        raise AdapterMismatch(
            f"adapter {adapter_dir} was trained for toolset(s) {', '.join(known) or '(none recorded)'} but the "
            f"environment's toolset is {fingerprint}; retrain, migrate the adapter (`trajforge migrate "
            "--adapter`), or pass the matching environment"
        )
    return meta


def trained_fingerprints(meta: dict) -> list[str]:
    """Every toolset fingerprint an adapter's meta says it was trained on."""
    listed = meta.get("toolset_fingerprints")
    if listed:
        return list(listed)
    return [meta["toolset_fingerprint"]] if meta.get("toolset_fingerprint") else []


def adapter_lineage(adapter: str | Path) -> list[str]:
    """The adapters to merge, oldest first: DPO/GRPO adapters train on top of an earlier one
    (recorded as ``init_adapter`` in their meta), so loading one means loading its ancestors."""
    chain: list[str] = []
    current: str | None = str(adapter)
    while current:
        if current in chain:
            raise ValueError(f"adapter lineage loops at {current}")
        chain.append(current)
        meta_path = Path(current) / ADAPTER_META
        current = read_adapter_meta(current).get("init_adapter") if meta_path.exists() else None
    return chain[::-1]


def trained_template(meta: dict, chat_template: str | Path | None, adapter: str | None = None) -> str | None:
    """The template text to render with: ``chat_template`` (a file) when given, else the one the
    adapter's meta records; None leaves the model's own (or the default). A file that differs
    from the adapter's recorded template is refused: the adapter would see prompts it never saw."""
    recorded = (meta.get("chat_template") or {}).get("text")
    if chat_template is None:
        return recorded
    text = read_chat_template(chat_template)
    if recorded is not None and text != recorded:
        raise ValueError(f"adapter {adapter} was trained with another chat template than {chat_template} "
                         f"(its {ADAPTER_META} records the one it was trained with); drop the chat_template "
                         "option to render as in training")
    return text


def trained_demos(meta: dict, adapter: str | Path) -> dict | None:
    """The demonstrations an adapter was trained with, from its meta: ``{"pool": file in the
    adapter folder, "sha256", "k"}``; None when it was trained without."""
    demos = meta.get("demos")
    if not demos or not demos.get("k"):
        return None
    return {"pool": str(Path(adapter) / demos["pool"]), "sha256": demos.get("sha256"), "k": int(demos["k"])}


def _trained_with(adapter: str | None) -> dict:
    """The adapter's meta (dialect, render mode) when it is a trajforge adapter, else empty."""
    if adapter and (Path(adapter) / ADAPTER_META).exists():
        return read_adapter_meta(adapter)
    return {}


DEFAULT_TURN_TOKENS = 160
"""Tokens one turn may generate when nothing says more: a tool call with a sentence before it."""


def turn_budget(adapter: str | None) -> int:
    """``DEFAULT_TURN_TOKENS``, or more where the adapter (or one it was trained on top of) learned
    longer turns (``longest_turn`` in its meta) plus a margin: a turn cut off mid-call by a
    budget shorter than the turns trained is a truncated call the model never made."""
    if not adapter:
        return DEFAULT_TURN_TOKENS
    longest = max((read_adapter_meta(a).get("longest_turn") or 0 for a in adapter_lineage(adapter)
                   if (Path(a) / ADAPTER_META).exists()), default=0)
    return max(DEFAULT_TURN_TOKENS, longest + 32)


class HFPolicy:
    def __init__(
        self,
        model: str,
        adapter: str | None = None,
        name: str | None = None,
        dialect: Dialect | None = None,
        max_new_tokens: int | None = None,
        temperature: float = 0.0,
        batch_size: int = 32,
        seed: int = 0,
        share_prefix: bool = True,
        dtype: str = "auto",
        loaded=None,
        render_mode: str | None = None,
        device: str | None = None,
        chat_template: str | Path | None = None,
        gen_chunk: int = 32,
        keep_turns: bool = True,
    ):
        self.model_name = model
        self.adapter = adapter
        self.name = name or (f"hf:{model}@{adapter}" if adapter else f"hf:{model}")
        trained = _trained_with(adapter)
        self.render_mode = render_mode or trained.get("render_mode", "dialect")
        """How prompts are rendered (``Dialect.chat_text``): ``dialect`` or ``template``."""
        if self.render_mode not in RENDER_MODES:
            raise ValueError(f"unknown render mode {self.render_mode!r}; use one of {', '.join(RENDER_MODES)}")
        self.demos = trained_demos(trained, adapter) if adapter else None
        """The retrieved demonstrations its adapter was trained with (``trained_demos``), else None."""
        self.max_new_tokens = max_new_tokens or turn_budget(adapter)
        """Tokens one turn may generate: given, else ``turn_budget``."""
        self.temperature = temperature
        self.batch_size = batch_size
        self.seed = seed
        self.share_prefix = share_prefix
        self.gen_chunk = gen_chunk
        """New tokens per ``generate`` call before finished rows leave the batch (``_generate``); 0: one call."""
        self.turns = TurnCache() if keep_turns else None
        """Each episode's KV cache from its last turn (``policies/turn_cache.py``); None: prefill every turn."""
        self._checked: set[str] = set()
        self._draws = 0
        template = trained_template(trained, chat_template, adapter)
        self.model, self.tokenizer = loaded or load_model(model, adapter, dtype, device, template)
        default = trained.get("dialect") or EMBEDDED.get(model, {}).get("dialect")
        self.dialect = dialect or (get_dialect(default) if default else
                                   Dialect.for_model(model, getattr(self.tokenizer, "chat_template", None)))
        config = getattr(self.model, "config", None)
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        self.context: int | None = getattr(config, "max_position_embeddings", None)
        """Most positions (prompt + completion) the model takes; None: not known, nothing refused."""

    def check_toolset(self, fingerprint: str) -> None:
        if self.adapter and fingerprint not in self._checked:
            check_adapter(self.adapter, fingerprint)
            self._checked.add(fingerprint)

    def prompt_ids(self, req: TurnRequest) -> list[int]:
        text = self.dialect.chat_text(self.tokenizer, req.messages, req.toolset, self.render_mode)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def act(self, requests: list[TurnRequest]) -> list[Generation]:
        prompts = [self.prompt_ids(r) for r in requests]
        self._check_fits(requests, prompts)
        temps = [r.temperature if r.temperature is not None else self.temperature for r in requests]
        keys = [(r.task.id, r.sample) for r in requests]
        reuse = [self.turns.take(k, r.turn, p) if self.turns else None for k, r, p in zip(keys, requests, prompts)]
        made: list[list[int]] = [[] for _ in requests]
        # Rows that resume a kept cache and fresh rows (a new episode of a wave) go in two batches.
        for rows in ([i for i, r in enumerate(reuse) if r is None], [i for i, r in enumerate(reuse) if r]):
            if not rows:
                continue
            batch = [prompts[i] for i in rows]
            if reuse[rows[0]] is None:
                ids, mask, cache = self._batch(batch)
            else:
                ids, mask, cache = self.turns.batch(batch, [reuse[i] for i in rows], self.tokenizer.pad_token_id,
                                                    self.model.device)

            def keep(j, completion, cache_, at, mask_, rows=rows):
                i = rows[j]
                self.turns.keep(keys[i], requests[i].turn, prompts[i] + completion[:-1], cache_, at, mask_)

            for i, completion in zip(rows, self._generate(ids, mask, cache, [temps[i] for i in rows],
                                                          keep if self.turns else None)):
                made[i] = completion
        if self.turns:
            self.turns.retain(set(keys))
        eos = self.tokenizer.eos_token_id
        return [Generation(text=self.tokenizer.decode([t for t in c if t != eos], skip_special_tokens=False),
                           prompt_ids=p, completion_ids=c) for p, c in zip(prompts, made)]

    def _check_fits(self, requests: list[TurnRequest], prompts: list[list[int]]) -> None:
        """Refuse, before generating, a prompt that leaves no room for ``max_new_tokens`` in the
        model's context, as a server does: ``ContextExceeded`` once the model has taken a turn (its
        own turns made it that long; the harness asks again one request at a time, so only that
        episode ends ``context_exceeded``), else a ``ValueError`` (the setup's). Past its context a
        model with rotary positions generates garbage without a word, one with learned positions
        raises an IndexError."""
        for req, prompt in zip(requests, prompts):
            if self.context and len(prompt) + self.max_new_tokens > self.context:
                why = (f"the prompt is {len(prompt)} tokens and up to {self.max_new_tokens} are generated; "
                       f"{self.model_name} takes at most {self.context}")
                raise ContextExceeded(why) if req.turn > 0 else ValueError(why)

    def forget(self, task_id: str, sample: int) -> None:
        """The episode ended (the harness says so): drop its kept cache."""
        if self.turns:
            self.turns.entries.pop((task_id, sample), None)

    def _generate(self, ids, mask, cache, temps: list[float], keep=None) -> list[list[int]]:
        """Each row's completion (through its eos, if it reached one), ``gen_chunk`` new tokens per
        ``generate`` call: after each call the rows that ended leave the batch and the rest go on
        from their KV cache. ``generate`` steps every row of a batch until the longest ends, and
        agent turns end far apart (a 40-token call beside a 160-token ramble), so without this most
        of a wave's decoding steps went to finished rows. Rows keep their positions and cache, so a
        greedy row decodes the same tokens either way. ``keep(row, completion, cache, position,
        mask)`` is told each row's final state before it leaves (``TurnCache.keep``)."""
        import torch

        eos, pad = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
        rows = list(range(len(temps)))
        made: list[list[int]] = [[] for _ in temps]
        left = self.max_new_tokens
        while rows and left > 0:
            step = min(self.gen_chunk, left) if self.gen_chunk > 0 else left
            extra = {_cache_kw(): cache} if cache is not None else {}
            with torch.no_grad():
                out = self.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=step,
                                          pad_token_id=pad, eos_token_id=eos, return_dict_in_generate=True,
                                          **self._sampling([temps[r] for r in rows]), **extra)
            new = out.sequences[:, ids.shape[1]:]
            left -= new.shape[1]
            cache = getattr(out, "cache", None) or out.past_key_values
            mask = torch.cat([mask, torch.ones_like(new)], dim=1)  # an unfinished row's tokens are all real
            going = []
            for i, (row, tokens) in enumerate(zip(rows, new.tolist())):
                if eos in tokens:
                    made[row] += tokens[: tokens.index(eos) + 1]
                else:
                    made[row] += tokens
                    going.append(i)
                if keep is not None and (eos in tokens or left <= 0):
                    keep(row, made[row], cache, i, mask[i])
            if not going or left <= 0:
                break
            still = torch.tensor(going, device=ids.device)
            if len(going) < len(rows):
                cache.batch_select_indices(still)
            ids, mask = out.sequences[still], mask[still]
            rows = [rows[i] for i in going]
        return made

    def _sampling(self, temps: list[float]) -> dict:
        """generate() options for the rows' temperatures: greedy, one shared temperature, or a
        per-row one (guided exploration cools single episodes inside a batch). A checkpoint's own
        ``generation_config`` may ship a repetition penalty (Qwen2.5: 1.05) that generate() would
        apply; it is turned off, so greedy is the argmax and a sample comes from the softmax that
        ``trajforge serve`` samples and training scores."""
        import torch

        plain = {"repetition_penalty": 1.0}
        if all(t <= 0 for t in temps):
            return {"do_sample": False, **plain}
        torch.manual_seed(self.seed + self._draws)  # reproducible, but a fresh stream per turn
        self._draws += 1
        if len(set(temps)) == 1:
            return {"do_sample": True, "temperature": temps[0], "top_p": 1.0, "top_k": 0, **plain}
        from transformers import LogitsProcessorList

        return {"do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0, **plain,
                "logits_processor": LogitsProcessorList([RowTemperature(temps, self.model.device)])}

    def _batch(self, prompts: list[list[int]]):
        """Padded batch, with the prompts' common prefix prefilled once into a shared KV cache.

        Every episode of a toolset starts with the same system prompt; prefilling it once and
        padding *between* the prefix and each row's own suffix (positions follow the attention
        mask) turns most of each turn's prefill into one small forward pass.
        """
        import torch

        pad = self.tokenizer.pad_token_id
        shared = common_prefix(prompts) if len(prompts) > 1 and self.share_prefix else 0
        shared = min(shared, min(len(p) for p in prompts) - 1)
        if shared < 32:
            shared = 0
        width = max(len(p) for p in prompts) - shared
        rows, masks = [], []
        for p in prompts:
            gap = width - (len(p) - shared)
            rows.append(p[:shared] + [pad] * gap + p[shared:])
            masks.append([1] * shared + [0] * gap + [1] * (len(p) - shared))
        device = self.model.device
        ids, mask = torch.tensor(rows, device=device), torch.tensor(masks, device=device)
        if not shared:
            return ids, mask, None
        with torch.no_grad():
            head = self.model(input_ids=ids[:1, :shared], use_cache=True)
        cache = getattr(head, "cache", None) or head.past_key_values
        cache.batch_repeat_interleave(len(prompts))
        return ids, mask, cache


class RowTemperature:
    """Logits processor dividing each row's scores by its own temperature (0 → effectively greedy)."""

    def __init__(self, temps: list[float], device=None):
        import torch

        self.temps = torch.tensor([max(t, 1e-4) for t in temps], device=device).unsqueeze(-1)

    def __call__(self, input_ids, scores):
        return scores / self.temps.to(scores.dtype)


# Names this module imported in 0.1 (deprecated; see trajforge/_compat.py).
from trajforge._compat import moved_names  # noqa: E402

__getattr__ = moved_names(__name__, {
    "default_dtype": "trajforge.policies.devices:compute_dtype",
    "resolve": "trajforge.policies.models",
})
