"""Migrate a store to the current tool schema: rewrite stored calls, re-execute, keep what holds.

    trajforge migrate store/ --tasks tasks.jsonl --out store-v2/ --mapping rename.toml
    trajforge migrate store/ --tasks tasks.jsonl --out store-v2/ --rename-arg run_sql.query=sql
    trajforge migrate --adapter runs/demo/adapter          # an adapter from before toolsets were stored

A mapping says how the tool schema changed (TOML or JSON, or the same as flags)::

    [[tools]]
    tool = "run_sql"              # the tool as the stored calls name it
    rename = "query_db"           # its new name (optional)
    rename_args = { query = "sql" }
    drop_args = ["explain"]
    defaults = { limit = 50 }     # set where a stored call lacks it

Every record of the source store is read (``NewerFormatError`` stops on records this version
cannot read) and ends up in one of three bins, counted in the report (``migration.json`` in the
new store):

- **relabelled**: no call changed and the environment's tools are the ones the record was shown;
  only the fingerprint is recomputed (the 0.1 fingerprint covered the tools alone; the current one
  covers the instructions too), so the record is kept as it was, token ids included;
- **re-verified**: calls were rewritten, then every dispatched call was executed again, in order,
  in a fresh environment of the task; kept only if each call validates against the current
  toolset, each result is the stored result (same text, same ok) and ``verify()`` gives the
  stored verdict. Its text is re-rendered from the rewritten calls and its token ids are dropped
  (they no longer match the text, so training re-renders it); grade and reward still hold, since
  every fact they were computed from does;
- **dropped**, by reason: ``no_task`` (the task is not in the pool given), ``invalid_call``,
  ``tool_error`` / ``result_changed`` (step and tool named in the report), ``verdict_changed``,
  ``env_fault`` (an infrastructure fault proves nothing either way), ``not_executed`` (an
  imported conversation has no results to re-verify) and ``schema_changed`` (calls unchanged but
  the tools differ from the record's: a mapping is missing).

The new store carries the current toolsets in ``toolsets/`` and the old → new fingerprint map in
its report. This replaces training with ``allow_mismatch``: old data is brought to the schema the
model will be trained and served with, never re-rendered silently with a prompt it never saw.
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trajforge.envs import env_toolset, make_env
from trajforge.envs.toolsets import KNOWN
from trajforge.parse import get_dialect
from trajforge.parse.validate import validate_call
from trajforge.schema import Step, Task, ToolCall, Toolset, Trajectory
from trajforge.store.jsonl import TrajectoryStore
from trajforge._jsonl import read_json_object

REPORT = "migration.json"
ADAPTER_META = "trajforge_adapter.json"
"""The adapter's trajforge meta (``trajforge.policies.hf.ADAPTER_META``)."""


class ToolChange(BaseModel):
    """How one tool changed between the stored calls and the current schema."""

    tool: str
    """The tool's name in the stored calls."""
    rename: str | None = None
    """Its new name."""
    rename_args: dict[str, str] = Field(default_factory=dict)
    """Old argument name → new."""
    drop_args: list[str] = Field(default_factory=list)
    """Arguments the tool no longer takes."""
    defaults: dict[str, Any] = Field(default_factory=dict)
    """Values for (new) arguments a stored call lacks."""

    def apply(self, call: ToolCall) -> ToolCall:
        args = {self.rename_args.get(k, k): v for k, v in call.arguments.items() if k not in self.drop_args}
        for key, value in self.defaults.items():
            args.setdefault(key, value)
        return call.model_copy(update={"name": self.rename or call.name, "arguments": args})


class Migration(BaseModel):
    """A tool-schema change to bring stored calls to (empty: only recompute fingerprints)."""

    tools: list[ToolChange] = Field(default_factory=list)
    """One entry per changed tool."""
    env: str | None = None
    """Apply to this environment's records only (None: every record)."""

    @classmethod
    def read(cls, path: str | Path) -> "Migration":
        """From a ``.toml`` or ``.json`` file; ValueError naming the file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
            data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
            return cls.model_validate(data)
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: not a migration mapping ({e})") from None

    @classmethod
    def from_flags(cls, rename_tool: list[str] = (), rename_arg: list[str] = (), drop_arg: list[str] = (),
                   default: list[str] = (), env: str | None = None) -> "Migration":
        """From ``OLD=NEW``, ``TOOL.OLD=NEW``, ``TOOL.ARG`` and ``TOOL.ARG=JSON`` strings."""
        changes: dict[str, ToolChange] = {}

        def change(tool: str) -> ToolChange:
            return changes.setdefault(tool, ToolChange(tool=tool))

        for spec in rename_tool:
            old, new = _pair(spec, "--rename-tool", "OLD=NEW")
            change(old).rename = new
        for spec in rename_arg:
            key, new = _pair(spec, "--rename-arg", "TOOL.OLD=NEW")
            tool, arg = _dotted(key, "--rename-arg", "TOOL.OLD=NEW")
            change(tool).rename_args[arg] = new
        for spec in drop_arg:
            tool, arg = _dotted(spec, "--drop-arg", "TOOL.ARG")
            change(tool).drop_args.append(arg)
        for spec in default:
            key, raw = _pair(spec, "--default", "TOOL.ARG=JSON")
            tool, arg = _dotted(key, "--default", "TOOL.ARG=JSON")
            try:
                change(tool).defaults[arg] = json.loads(raw)
            except json.JSONDecodeError:
                change(tool).defaults[arg] = raw  # a bare word is a string
        return cls(tools=list(changes.values()), env=env)

    def apply(self, call: ToolCall) -> ToolCall:
        for change in self.tools:
            if change.tool == call.name:
                return change.apply(call)
        return call


def _pair(spec: str, flag: str, shape: str) -> tuple[str, str]:
    key, sep, value = spec.partition("=")
    if not sep or not key or not value:
        raise ValueError(f"{flag} {spec!r}: expected {shape}")
    return key, value


def _dotted(key: str, flag: str, shape: str) -> tuple[str, str]:
    tool, sep, arg = key.partition(".")
    if not sep or not tool or not arg:
        raise ValueError(f"{flag} {key!r}: expected {shape}")
    return tool, arg


class Dropped(BaseModel):
    """One record that did not survive, and why."""

    task_id: str
    policy: str
    sample: int
    reason: str
    detail: str = ""


class MigrationReport(BaseModel):
    """What ``migrate_store`` did (written as ``migration.json`` into the new store)."""

    source: str
    out: str
    mapping: Migration
    records: int = 0
    relabelled: int = 0
    """Kept unchanged but for the fingerprint (token ids kept)."""
    migrated: int = 0
    """Records brought to the changed schema (their calls rewritten, or shown tools that changed),
    kept or not."""
    reverified: int = 0
    """Migrated records re-executed with every result and the verdict as stored (kept)."""
    dropped: dict[str, int] = Field(default_factory=dict)
    """Records not kept, by reason."""
    fingerprints: dict[str, str] = Field(default_factory=dict)
    """Old toolset fingerprint → new, for every record kept."""
    failures: list[Dropped] = Field(default_factory=list)
    """The dropped records one by one (task, policy, sample, reason, detail)."""

    @property
    def kept(self) -> int:
        return self.relabelled + self.reverified


class _Drop(Exception):
    def __init__(self, reason: str, detail: str = "", migrated: bool = True):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail
        self.migrated = migrated
        """Whether the record had been taken to the new schema (counted as migrated) before it failed."""


def migrate_store(source: str | Path, out: str | Path, migration: Migration | None = None,
                  tasks: Mapping[str, Task] | None = None) -> MigrationReport:
    """Migrate every record of ``source`` into a new store at ``out`` (see the module docstring).

    ``tasks`` (task id → Task) are needed to re-execute records whose calls change; ``out`` must
    not hold records yet."""
    migration = migration or Migration()
    src, dst = TrajectoryStore(source), TrajectoryStore(out)
    if dst.shards():
        raise ValueError(f"{out} already holds records; migrate into a new directory")
    if Path(out).resolve() == Path(source).resolve():
        raise ValueError("migrate writes a new store: --out must differ from the source")
    report = MigrationReport(source=str(source), out=str(out), mapping=migration)
    dropped: Counter[str] = Counter()
    kept: list[Trajectory] = []
    for traj in src:
        report.records += 1
        try:
            new, migrated = migrate_record(traj, migration, tasks or {})
        except _Drop as d:
            dropped[d.reason] += 1
            report.migrated += d.migrated
            report.failures.append(Dropped(task_id=traj.task_id, policy=traj.policy, sample=traj.sample,
                                           reason=d.reason, detail=d.detail))
            continue
        report.migrated += migrated
        report.reverified += migrated
        report.relabelled += not migrated
        report.fingerprints[traj.toolset_fingerprint] = new.toolset_fingerprint
        kept.append(new)
    Path(out).mkdir(parents=True, exist_ok=True)
    if kept:
        dst.rewrite(kept)  # one shard; the toolsets the records name go into toolsets/
    report.dropped = dict(sorted(dropped.items()))
    (Path(out) / REPORT).write_text(report.model_dump_json(indent=1) + "\n")
    return report


def migrate_record(traj: Trajectory, migration: Migration, tasks: Mapping[str, Task]) -> tuple[Trajectory, bool]:
    """(the record under the current schema, whether it was migrated and re-verified rather than
    only relabelled); ``_Drop`` if it does not survive."""
    applies = migration.env is None or migration.env == traj.env
    steps = [s.model_copy(update={"calls": [migration.apply(c) if applies else c for c in s.calls]})
             for s in traj.steps]
    rewritten = any(new.calls != old.calls for new, old in zip(steps, traj.steps))
    current = env_toolset(traj.env)
    system = next((m.content for m in traj.messages if m.role == "system"), current.instructions)
    shown = KNOWN.canonical(current.with_instructions(system))
    if not rewritten and _same_tools(traj.toolset_fingerprint, current):
        return traj.model_copy(update={"toolset_fingerprint": shown.fingerprint}), False
    if not rewritten and not (applies and migration.tools):
        raise _Drop("schema_changed", f"the {traj.env} tools are not the ones this record was shown "
                    f"({traj.toolset_fingerprint}); give the mapping of what changed", migrated=False)
    # Calls rewritten, or none to rewrite but shown tools that changed: either way the record now
    # says the model saw the new schema, so it must still hold when run under it.
    if traj.end == "env_fault" or (traj.outcome is not None and traj.outcome.tier == "env_fault"):
        raise _Drop("env_fault", "an infrastructure fault ended it")
    if not traj.executed:
        raise _Drop("not_executed", "an imported conversation has no results to re-verify")
    if sum(1 for m in traj.messages if m.role == "assistant") != len(traj.steps):
        raise _Drop("not_executed", "its messages do not pair with its steps")
    task = tasks.get(traj.task_id)
    if task is None:
        raise _Drop("no_task", f"task {traj.task_id} is not in the pool given (--tasks)")
    return _rerendered(traj, _reexecute(traj, steps, task, shown), shown), True


def _same_tools(fingerprint: str, current: Toolset) -> bool:
    """Whether a record's fingerprint names the current tools: a stored toolset with the same
    tools, or a 0.1 fingerprint (tools alone) equal to theirs."""
    if fingerprint == current.tools_fingerprint:
        return True
    try:
        return KNOWN.get(fingerprint).tools_fingerprint == current.tools_fingerprint
    except KeyError:
        return False


def _reexecute(traj: Trajectory, steps: list[Step], task: Task, toolset: Toolset) -> list[Step]:
    """Run the rewritten calls in a fresh environment; the steps with the calls as validated (safe
    coercions applied, as the harness would), or ``_Drop`` at the first thing that differs."""
    env = make_env(task.env, seed=task.seed)
    out = []
    try:
        env.reset(task)
        for step in steps:
            calls = []
            for k, call in enumerate(step.calls):
                valid, error, _ = validate_call(call.name, call.arguments, toolset)
                if error is not None:
                    raise _Drop("invalid_call", f"step {step.index} {call.name}: {error.kind}: {error.message}")
                calls.append(valid)
                if k >= len(step.results):
                    continue  # the episode ended before this call ran; it runs now neither
                stored, result = step.results[k], env.execute(valid)
                if result.fault:
                    raise _Drop("env_fault", f"step {step.index} {call.name}: {result.content}")
                if result.ok != stored.ok or result.content != stored.content:
                    reason = "tool_error" if stored.ok and not result.ok else "result_changed"
                    raise _Drop(reason, f"step {step.index} {call.name}: now {result.content[:200]!r}, "
                                f"stored {stored.content[:200]!r}")
            out.append(step.model_copy(update={"calls": calls}))
        verdict = env.verify()
    finally:
        env.close()
    stored = traj.verdict
    if stored is None or (verdict.correct, verdict.submitted) != (stored.correct, stored.submitted):
        raise _Drop("verdict_changed", f"now {verdict.detail!r}, stored {stored.detail if stored else None!r}")
    return out


def _rerendered(traj: Trajectory, steps: list[Step], toolset: Toolset) -> Trajectory:
    """The record with the rewritten calls everywhere they stand (steps, messages, raw text,
    result names) and no token ids: the text changed, so the ids the model sampled no longer
    describe it, and training renders it afresh."""
    if "+" in traj.dialect:  # a pipeline's roles may speak several dialects
        raise _Drop("mixed_dialects", f"cannot re-render turns of dialects {traj.dialect}")
    dialect = get_dialect(traj.dialect)
    new_steps, renames = [], []
    texts = [m.content for m in traj.messages if m.role == "assistant"]
    for old, step, text in zip(traj.steps, steps, texts):
        changed = step.calls != old.calls
        raw = dialect.render_assistant(text, step.calls) if changed and not step.native else step.raw
        names = {a.name: b.name for a, b in zip(old.calls, step.calls)}
        renames.append(names)
        new_steps.append(step.model_copy(update={
            "raw": raw, "prompt_ids": None, "completion_ids": None, "completion_logprobs": None,
            "results": [r.model_copy(update={"name": names.get(r.name, r.name)}) for r in step.results]}))
    messages, turn = [], -1
    for m in traj.messages:
        if m.role == "assistant":
            turn += 1
            step = new_steps[turn]
            m = m.model_copy(update={"tool_calls": step.calls, "raw": None if step.native else step.raw})
        elif m.role == "tool" and turn >= 0 and m.name in renames[turn]:
            m = m.model_copy(update={"name": renames[turn][m.name]})
        messages.append(m)
    return traj.model_copy(update={"messages": messages, "steps": new_steps, "toolset_fingerprint": toolset.fingerprint})


# ---- adapters ---------------------------------------------------------------------------------

def migrate_adapter(adapter_dir: str | Path, env: str | None = None) -> dict[str, str]:
    """Bring an adapter's recorded toolset fingerprint to the current one, when the tools it was
    trained with are the environment's current tools (a 0.1 fingerprint covered the tools alone).

    The adapter's meta keeps the old value as ``migrated_from``; returns ``{"old", "new", "env"}``.
    ValueError when the tools differ: such an adapter was trained on another schema, and no
    relabelling makes it act in this one (migrate its data and retrain)."""
    path = Path(adapter_dir) / ADAPTER_META
    if not path.is_file():
        raise ValueError(f"{adapter_dir} is not a trajforge adapter (no {ADAPTER_META})")
    meta = read_json_object(path, "retrain or restore the adapter's meta")
    env = env or meta.get("env")
    if not env:
        raise ValueError(f"{adapter_dir}: its meta names no environment; pass env=")
    old, current = meta.get("toolset_fingerprint"), env_toolset(env)
    if old == current.fingerprint or current.fingerprint in (meta.get("toolset_fingerprints") or ()):
        return {"old": old, "new": old, "env": env}  # trained with the current toolset (among others)
    if not _same_tools(str(old), current):
        raise ValueError(f"{adapter_dir} was trained for toolset {old}, whose tools are not the current {env} "
                         f"tools ({current.tools_fingerprint}); migrate its training data and retrain")
    meta.update(toolset_fingerprint=current.fingerprint, toolset_fingerprints=[current.fingerprint], migrated_from=old)
    path.write_text(json.dumps(meta, indent=2))
    return {"old": old, "new": current.fingerprint, "env": env}


__all__ = ["Migration", "MigrationReport", "REPORT", "ToolChange", "migrate_adapter", "migrate_record",
           "migrate_store"]
