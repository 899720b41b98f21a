"""Each running episode's KV cache, kept from one turn to the next (local transformers policy).

Turn *k+1*'s prompt is turn *k*'s prompt, its completion, the tool results and a new assistant
header. Without this every turn prefills the whole conversation again; on the demo's held-out split
the second turn's prefill (39 rows × ~200 tokens) cost more than its decoding. The kept keys and
values cover the tokens that were really computed (prompt and completion but its last token), so a
new prompt that starts with them prefills only what follows (the longest common prefix counts:
a dialect that re-renders the assistant turn differently reuses up to the difference). It works
like a server's prefix cache, keyed by episode (task id, sample) and turn, so a rerun of the same
task, whose turn 0 starts a new episode, never sees another run's states (the weights may have
been trained since).

Only plain caches (every layer a ``DynamicLayer``: full attention) are kept; a model with
sliding-window or linear-attention layers prefills every turn as before. Entries live while their
episode is in the batch: ``retain`` drops the others after every turn.
"""

from __future__ import annotations

from typing import Any, NamedTuple

Key = tuple[str, int]
"""An episode: (task id, sample)."""


class Kept(NamedTuple):
    ids: list[int]
    """The tokens whose keys and values are kept."""
    layers: list[tuple[Any, Any]]
    """Per layer (keys, values), each [1, kv heads, len(ids), head dim]."""
    turn: int
    """The turn that computed them: only turn + 1 of the same episode reuses them."""


class Reuse(NamedTuple):
    kept: Kept
    common: int
    """Leading prompt tokens covered by ``kept`` (always at least one prompt token is left to prefill)."""


def plain(cache) -> bool:
    """Whether ``cache`` is made of full-attention ``DynamicLayer``s whose rows can be cut out."""
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers)


def common_prefix(seqs: list[list[int]]) -> int:
    """Leading tokens all of ``seqs`` share."""
    n = 0
    for column in zip(*seqs):
        if any(t != column[0] for t in column):
            break
        n += 1
    return n


class TurnCache:
    def __init__(self, min_reuse: int = 16):
        self.min_reuse = min_reuse
        """Fewer common tokens than this are prefilled as a fresh row (not worth a batch of its own)."""
        self.entries: dict[Key, Kept] = {}
        self.reused_tokens = 0
        """Prompt tokens not prefilled again, in total (tests and benchmarks read it)."""

    def take(self, key: Key, turn: int, prompt: list[int]) -> Reuse | None:
        kept = self.entries.get(key)
        if kept is None or kept.turn != turn - 1:
            return None
        common = min(common_prefix([kept.ids, prompt]), len(prompt) - 1)
        return Reuse(kept, common) if common >= self.min_reuse else None

    def keep(self, key: Key, turn: int, ids: list[int], cache, row: int, mask) -> None:
        """Keep row ``row`` of a batch ``cache`` for ``ids``: its first ``len(ids)`` attended
        columns (``mask``: the row's attention mask over the batch's columns) hold them."""
        if not plain(cache) or not ids:
            return
        columns = mask.nonzero().flatten()[: len(ids)]
        if len(columns) < len(ids) or int(columns[-1]) >= cache.get_seq_length():
            return  # not all of them were computed (cannot happen with generate; never guess)
        self.entries[key] = Kept(ids, [(layer.keys[row: row + 1, :, columns], layer.values[row: row + 1, :, columns])
                                       for layer in cache.layers], turn)

    def retain(self, keys: set[Key]) -> None:
        for key in [k for k in self.entries if k not in keys]:
            del self.entries[key]

    def batch(self, prompts: list[list[int]], reuse: list[Reuse], pad: int, device):
        """(ids, mask, cache) for rows that resume: row i is [pad][its kept tokens][pad][the rest
        of its prompt], the kept part already in the cache; positions follow the mask."""
        import torch
        from transformers import DynamicCache

        width = max(r.common for r in reuse)
        rest = [p[r.common:] for p, r in zip(prompts, reuse)]
        tail = max(map(len, rest))
        ids, masks = [], []
        for p, r, new in zip(prompts, reuse, rest):
            gap = tail - len(new)
            ids.append([pad] * (width - r.common) + p[: r.common] + [pad] * gap + new)
            masks.append([0] * (width - r.common) + [1] * r.common + [0] * gap + [1] * len(new))
        cache = DynamicCache()
        for n, _ in enumerate(reuse[0].kept.layers):
            k0, v0 = reuse[0].kept.layers[n]
            keys = k0.new_zeros((len(reuse), k0.shape[1], width, k0.shape[3]))
            values = v0.new_zeros((len(reuse), v0.shape[1], width, v0.shape[3]))
            for i, r in enumerate(reuse):
                k, v = r.kept.layers[n]
                keys[i, :, width - r.common:] = k[0, :, : r.common]
                values[i, :, width - r.common:] = v[0, :, : r.common]
            cache.update(keys, values, n)
        self.reused_tokens += sum(r.common for r in reuse)
        return torch.tensor(ids, device=device), torch.tensor(masks, device=device), cache
