"""What a run directory holds: trajectory stores, optional ``metrics.json``, optional learning curves.

A run directory is any directory; nothing about its layout is assumed beyond this:

- **Stores**: every ``*.jsonl`` file under it whose first line is a trajectory (has ``task_id``,
  ``policy`` and ``toolset_fingerprint``) is a store shard. Task pools (``tasks.jsonl``) and curves
  are recognised by their content and left out. ``trajforge demo`` leaves ``train_store/`` (the
  expert's training episodes) and ``eval_store/`` (base and tuned on the held-out split).
- **Policies** are the names recorded in the trajectories, in order of first appearance (shards in
  path order, lines in append order, so a policy evaluated first comes first).
- **Adapters**: every ``trajforge_adapter.json`` a trainer saved (its config: learning rate,
  epochs, tiers...; its result: samples, steps, tokens), outside checkpoint folders. One that is
  not a JSON object, or whose numbers ``trajforge doctor`` computes with are not numbers, is an
  error naming the file and the field (as is a ``metrics.json`` that is not an object).
- **Before / after**: given explicitly; else the first and last key of ``metrics.json``'s
  ``policies`` (what ``trajforge demo`` writes) when both are in the stores; else the two policies
  that attempted the most (task, sample) pairs in common, in order of appearance. With fewer than
  two policies, or none sharing a task, there is no pair and no flipped-task list.
- **Learning curves**: every ``curves.jsonl`` under the run directory, wherever the trainer's
  output directory is (``trajforge.train.curves`` writes ``<train out dir>/curves.jsonl``, e.g.
  ``RUN_DIR/adapter/curves.jsonl`` or ``RUN_DIR/train/<recipe>/curves.jsonl``). One JSON object a
  line, each with an integer ``step`` and any of:

      {"recipe": "sft", "step": 10, "loss": 1.234, "lr": 0.0002, "grad_norm": 0.8}
      {"recipe": "sft", "step": 50, "eval": {"completion": 0.41, "validity": 0.93, "avg_turns": 2.1}}

  ``loss`` (a number) is the training loss at that optimizer step; ``eval`` holds metrics of the
  evaluation run during training at that step: each numeric entry becomes a curve (``step`` and
  ``n`` inside it are bookkeeping and skipped; nested or null entries are not plottable and
  skipped). ``recipe`` names the curves in the report. Every other numeric key (``lr``,
  ``grad_norm``, ``memory_gb``, ``skipped_nonfinite``, GRPO's ``reward`` and ``solved``...)
  becomes a curve in ``Curves.scalars``, which ``trajforge doctor`` reads; ``NaN`` and
  ``Infinity`` are kept (a non-finite gradient norm is a finding); other keys are ignored. A torn last line (the trainer was killed mid-write) is skipped and noted; any other
  bad line is an error naming the file and line.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

from trajforge.schema import Trajectory
from trajforge.store import TrajectoryStore
from trajforge.store.migrate import ADAPTER_META

CURVES_FILE = "curves.jsonl"
METRICS_FILE = "metrics.json"
_TRAJECTORY_KEYS = ("task_id", "policy", "toolset_fingerprint")
_EVAL_BOOKKEEPING = ("step", "n")
_ROW_KEYS = ("step", "recipe", "loss", "eval")



class Curves(BaseModel):
    """One trainer's learning curves."""

    source: str
    """Path of the curves file, relative to the run directory."""
    recipe: str | None = None
    """Training recipe named in the rows (``sft``, ``dpo``, ``grpo``), if any."""
    loss: list[tuple[int, float]] = Field(default_factory=list)
    """(step, training loss) points."""
    evals: dict[str, list[tuple[int, float]]] = Field(default_factory=dict)
    """Metric name → (step, value) points from evaluation during training."""
    scalars: dict[str, list[tuple[int, float]]] = Field(default_factory=dict)
    """Any other numeric key of the step rows (``lr``, ``grad_norm``...) → (step, value) points."""


class Run(BaseModel):
    """Everything a report reads from a run directory."""

    root: Path
    """The run directory."""
    shards: list[str]
    """Store shards found, relative to ``root``."""
    episodes: list[Trajectory]
    """Every trajectory, shards in path order."""
    metrics: dict[str, Any] | None = None
    """``metrics.json`` when present."""
    curves: list[Curves] = Field(default_factory=list)
    """Learning curves found."""
    skipped: list[str] = Field(default_factory=list)
    """Torn lines skipped (``file:line``)."""
    adapters: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Adapter metadata files found (path relative to ``root`` → their JSON)."""

    @property
    def policies(self) -> list[str]:
        return list(dict.fromkeys(t.policy for t in self.episodes))


class Pair(NamedTuple):
    before: str
    after: str


def _is_trajectory_shard(path: Path, lines: int = 8) -> bool:
    """Whether the first JSON object among the first ``lines`` lines is a trajectory: a shard whose
    first line is torn, invalid UTF-8, not an object or nested too deeply is still a shard."""
    with open(path, "rb") as f:
        for line in itertools.islice((ln for ln in f if ln.strip()), lines):
            try:
                first = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(first, dict):
                return all(k in first for k in _TRAJECTORY_KEYS)
    return False


def find_shards(root: Path) -> list[Path]:
    """Trajectory shards under ``root`` (or ``root`` itself when it is one), in path order."""
    if root.is_file():
        return [root] if _is_trajectory_shard(root) else []
    return [p for p in sorted(root.rglob("*.jsonl"))
            if p.name != CURVES_FILE and not any(part.startswith(".") for part in p.relative_to(root).parts)
            and _is_trajectory_shard(p)]


def _number(value: Any, where: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: {what} must be a number, got {value!r:.60}")
    try:
        return float(value)
    except OverflowError:  # JSON integers have no size limit; floats do
        raise ValueError(f"{where}: {what} is too large for a float") from None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e})") from e


def _load_json(text: str, where: str) -> Any:
    """``json.loads`` whose every failure (torn, nested too deeply, an integer past the int-string
    limit) is a ValueError naming ``where``."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{where}: not valid JSON ({e})") from e


def read_curves(path: Path, root: Path) -> tuple[Curves, list[str]]:
    """Parse one ``curves.jsonl``; returns the curves and the torn lines skipped."""
    curves = Curves(source=str(path.relative_to(root)))
    skipped: list[str] = []
    lines = _read_text(path).split("\n")
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as e:  # torn, nested too deeply, past the int-string limit
            if lineno == len(lines):  # no trailing newline: the last write was cut short
                skipped.append(where)
                continue
            raise ValueError(f"{where}: not a JSON line ({e})") from e
        if not isinstance(row, dict) or "step" not in row:
            raise ValueError(f"{where}: a curves row must be an object with a 'step', got {line[:80]!r}")
        step = _number(row["step"], where, "'step'")
        if not math.isfinite(step):
            raise ValueError(f"{where}: 'step' must be a finite number, got {row['step']!r}")
        step = int(step)
        if curves.recipe is None and isinstance(row.get("recipe"), str):
            curves.recipe = row["recipe"]
        if "loss" in row:
            curves.loss.append((step, _number(row["loss"], where, "'loss'")))
        for name, value in row.items():
            if name not in _ROW_KEYS and isinstance(value, (int, float)) and not isinstance(value, bool):
                curves.scalars.setdefault(name, []).append((step, _number(value, where, repr(name))))
        if "eval" in row:
            if not isinstance(row["eval"], dict):
                raise ValueError(f"{where}: 'eval' must be an object of metric → number, got {row['eval']!r:.60}")
            for name, value in row["eval"].items():
                if name not in _EVAL_BOOKKEEPING and isinstance(value, (int, float)) and not isinstance(value, bool):
                    curves.evals.setdefault(name, []).append((step, _number(value, where, f"'eval.{name}'")))
    return curves, skipped


def _read_metrics(root: Path) -> dict[str, Any] | None:
    path = root / METRICS_FILE
    if root.is_file() or not path.exists():
        return None
    metrics = _load_json(_read_text(path), str(path))
    if not isinstance(metrics, dict):
        raise ValueError(f"{path}: must be a JSON object, got {type(metrics).__name__}")
    policies = metrics.get("policies")
    # pick_pair reads its keys (a list of names reads the same); anything else would pick nonsense
    if policies is not None and not (isinstance(policies, dict)
                                     or isinstance(policies, list) and all(isinstance(p, str) for p in policies)):
        raise ValueError(f"{path}: 'policies' must be an object keyed by policy name, got {policies!r:.60}")
    return metrics


_ADAPTER_NUMBERS = {"config": ("lr", "epochs"), "result": ("samples", "tokens", "loss_tokens")}
"""The adapter metadata fields ``trajforge doctor`` computes with."""


def _check_adapter(meta: dict[str, Any], where: str) -> None:
    """The fields doctor computes with have the types it computes with: a hand-edited or foreign
    file is an error naming the field, not a TypeError deep in a rule."""
    for section, keys in _ADAPTER_NUMBERS.items():
        part = meta.get(section)
        if part is not None and not isinstance(part, dict):
            raise ValueError(f"{where}: '{section}' must be an object, got {part!r:.60}")
        for key in keys:
            if (part or {}).get(key) is not None:
                _number(part[key], where, f"'{section}.{key}'")
    rounds = meta["rft"].get("rounds") if isinstance(meta.get("rft"), dict) else None
    for r in rounds if isinstance(rounds, list) else []:
        if not isinstance(r, dict):
            raise ValueError(f"{where}: 'rft.rounds' must hold objects, got {r!r:.60}")
        for key in ("round", "kept", "verified"):
            if key in r:
                _number(r[key], where, f"'rft.rounds[].{key}'")


def _read_adapters(root: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in ([] if root.is_file() else sorted(root.rglob(ADAPTER_META))):
        rel = path.relative_to(root)
        if any(part.startswith(".") or part == "checkpoints" for part in rel.parts):
            continue
        try:
            meta = _load_json(_read_text(path), str(path))
        except OSError as e:
            raise ValueError(f"{path}: cannot be read ({e})") from e
        if not isinstance(meta, dict):
            raise ValueError(f"{path}: must be a JSON object, got {type(meta).__name__}")
        _check_adapter(meta, str(path))
        found[str(rel)] = meta
    return found


def load_run(root: str | Path, require_stores: bool = True) -> Run:
    """Read every store, ``metrics.json``, curves and adapter file under ``root``; a run without a
    store is an error unless ``require_stores`` is False (a training run that never evaluated)."""
    root = Path(root)
    if not root.exists():
        raise ValueError(f"run directory {root} does not exist")
    shards = find_shards(root)
    if not shards and require_stores:
        raise ValueError(f"no trajectory store under {root} (looked for *.jsonl files whose lines are "
                         f"trajectories)")
    base = root.parent if root.is_file() else root
    episodes: list[Trajectory] = []
    skipped: list[str] = []
    for shard in shards:
        store = TrajectoryStore(shard)
        episodes.extend(store)
        skipped.extend(f"{shard.relative_to(base)}:{t.split(':')[-1]}" for t in store.torn)
    curves = []
    for path in ([] if root.is_file() else sorted(root.rglob(CURVES_FILE))):
        c, torn = read_curves(path, root)
        curves.append(c)
        skipped.extend(torn)
    return Run(root=root, shards=[str(p.relative_to(base)) for p in shards], episodes=episodes,
               metrics=_read_metrics(root), curves=curves, skipped=skipped, adapters=_read_adapters(root))


def pick_pair(run: Run, before: str | None = None, after: str | None = None) -> Pair | None:
    """Which policy is "before" and which "after" (see the module docstring)."""
    policies = run.policies
    for name in (before, after):
        if name is not None and name not in policies:
            raise ValueError(f"policy {name!r} is not in {run.root} (policies there: {', '.join(policies)})")
    if before and after:
        return Pair(before, after)
    named = list((run.metrics or {}).get("policies") or {})
    named = [p for p in named if p in policies]
    if not (before or after) and len(named) >= 2:
        return Pair(named[0], named[-1])
    keys: dict[str, set[tuple[str, int]]] = {}
    for t in run.episodes:
        keys.setdefault(t.policy, set()).add((t.task_id, t.sample))
    shared = Counter({(a, b): len(keys[a] & keys[b]) for i, a in enumerate(policies) for b in policies[i + 1:]
                      if (before in (None, a, b)) and (after in (None, a, b))})
    if not shared or shared.most_common(1)[0][1] == 0:
        return None
    (a, b), _ = shared.most_common(1)[0]  # ties keep appearance order (Counter keeps insertion order)
    if before == b or after == a:
        a, b = b, a
    return Pair(a, b)
