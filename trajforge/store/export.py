"""Take trajectories anywhere: OpenAI chat fine-tuning JSONL, ShareGPT (LLaMA-Factory), HF datasets.

    from trajforge.store.export import write_openai_jsonl, import_openai_jsonl
    write_openai_jsonl(TrajectoryStore("store/").read(), "train.jsonl")
    trajs = import_openai_jsonl("train.jsonl", env="sql")

    trajforge export store/ --format openai|sharegpt|hf --out PATH
    trajforge import-openai train.jsonl --env sql --out store/

Every format round-trips: export, then import, gives back the same messages and calls. Exports
never lose data: each file is written to a temporary file beside it and renamed over the old one only
when complete (a failed export leaves the existing output as it was), and an output inside a
trajectory store is refused (``store/targets.py``). Imports read hostile files safely: every line
that is too long, not UTF-8, not JSON, nested too deeply or of the wrong shape is reported as
``file:line: what`` (``read_openai_jsonl``) while the other lines are read. Imported
trajectories are ``executed=False`` (never run here), carry one Step per assistant message whose
calls are validated against the environment's toolset (bad ones become typed errors, as in a
rollout), and render for training with ``trajforge.train.data.render_sample``.

Conventions where a format cannot say what a trajectory holds:

- Harness calls in text dialects have no ids; OpenAI needs them, so ``call_<turn>_<k>`` is made up.
- A parse error (no call, malformed call) is fed back to the model as a tool message that answers
  no call, which OpenAI's schema cannot express. It is exported as a ``user`` message with a
  ``name`` (the tool involved, or ``error``); on import a named user message is read back as such
  feedback. An assistant turn without a valid call exports its raw text, so the failed attempt
  stays visible.
- An assistant turn trajforge's training masks (``Trajectory.turn_learns``: a self-repair
  demonstration's mistake, a recovered episode's failed turn) is exported with OpenAI's
  ``"weight": 0`` (also in the HF dataset's messages) and read back as ``Step.train = False``.
  ShareGPT has no per-turn weight: there such turns are ordinary, and ``export`` says how many.
- ShareGPT keeps the text around a call inside ``<think>...</think>`` before the call JSON, which
  LLaMA-Factory's FunctionFormatter splits off as the thought; several results of one turn are one
  ``observation`` joined as LLaMA-Factory's OpenAI converter joins them; a trailing observation is
  dropped because LLaMA-Factory rejects conversations that do not end on an assistant turn (the
  final tool result carries no loss anyway).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from trajforge.parse import get_dialect
from trajforge.parse.openai import parse_tool_calls
from trajforge.schema import Message, Step, ToolCall, Toolset, Trajectory
from trajforge.store.targets import refuse_store_target
from trajforge._jsonl import MAX_LINE_BYTES, LineTooLong, jsonl_lines, read_json_object

FEEDBACK_NAME = "error"
"""``name`` of imported feedback whose tool is unknown (the harness's own default)."""
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
OBSERVATION_JOIN = "\n</tool_response>\n<tool_response>\n"
"""How LLaMA-Factory joins several tool results of one turn into one observation."""
_HF_STATE = "state.json"
"""What ``Dataset.save_to_disk`` leaves in its folder."""
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def env_toolset(env: str) -> Toolset:
    from trajforge.envs import env_toolset as current

    return current(env)


def _checked_toolset(traj: Trajectory) -> Toolset:
    """The toolset the trajectory was shown, looked up by its fingerprint (a store read earlier, or
    this process's environments, made it known)."""
    from trajforge.envs import toolset_for

    try:
        return toolset_for(traj.toolset_fingerprint)
    except KeyError:
        raise ValueError(
            f"{traj.task_id}: its toolset {traj.toolset_fingerprint} is unknown (not in its store's toolsets/, "
            f"not the current {traj.env} toolset {env_toolset(traj.env).fingerprint}); exporting would pair "
            "it with the wrong tool schema (trajforge migrate upgrades old stores)") from None


# ---- one trajectory → turns ------------------------------------------------------------------


def _turns(traj: Trajectory) -> list[dict[str, Any]]:
    """Format-neutral turns: system/user text, assistant (content, calls with ids), tool results
    (answering a call id) and feedback (answering none).

    A tool message answers a call when it carries that call's id, or, in harness trajectories whose
    calls have no ids, when it is among the first ``len(step.results)`` tool messages of its turn
    (the harness appends results first, then error feedback).
    """
    out: list[dict[str, Any]] = []
    turn, ids, answered, n_results = -1, [], 0, 0
    for m in traj.messages:
        if m.role == "assistant":
            turn += 1
            step = traj.steps[turn] if turn < len(traj.steps) else None
            ids = [c.id or f"call_{turn}_{k}" for k, c in enumerate(m.tool_calls)]
            n_results = len(step.results) if step is not None else len(ids)
            answered = 0
            content = m.content
            if not m.tool_calls and m.raw is not None:
                content = m.raw  # a failed attempt: keep what the model actually wrote
            calls = [c.model_copy(update={"id": i}) for c, i in zip(m.tool_calls, ids)]
            out.append({"role": "assistant", "content": content, "calls": calls, "learns": traj.turn_learns(turn)})
        elif m.role == "tool":
            if m.tool_call_id is not None and m.tool_call_id in ids:
                out.append({"role": "result", "content": m.content, "id": m.tool_call_id, "name": m.name})
                answered += 1
            elif m.tool_call_id is None and answered < min(n_results, len(ids)):
                out.append({"role": "result", "content": m.content, "id": ids[answered], "name": m.name})
                answered += 1
            else:
                out.append({"role": "feedback", "content": m.content, "name": m.name or FEEDBACK_NAME})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def _step(index: int, content: str, calls: list[ToolCall], toolset: Toolset, dialect: str) -> Step:
    """One imported assistant turn, its calls validated like a rollout's."""
    parsed = parse_tool_calls(
        [{"id": c.id, "function": {"name": c.name, "arguments": json.dumps(c.arguments)}} for c in calls],
        content, toolset)
    raw = get_dialect(dialect).render_assistant(content, parsed.calls)
    return Step(index=index, raw=raw, calls=parsed.calls, errors=parsed.errors, repairs=parsed.repairs)


def _trajectory(messages: list[Message], toolset: Toolset, *, env: str, task_id: str, policy: str,
                dialect: str, sample: int = 0, tier: str = "", split: str = "") -> Trajectory:
    steps = []
    for m in messages:
        if m.role == "assistant":
            step = _step(len(steps), m.content, m.tool_calls, toolset, dialect)
            m.tool_calls = step.calls
            steps.append(step)
    from trajforge.envs.toolsets import KNOWN

    # The model was shown the environment's tools under the record's own system message.
    system = next((m.content for m in messages if m.role == "system"), "")
    shown = KNOWN.canonical(toolset.with_instructions(system))
    return Trajectory(task_id=task_id, sample=sample, policy=policy, env=env, tier=tier, split=split,
                      toolset_fingerprint=shown.fingerprint, dialect=dialect, messages=messages,
                      steps=steps, executed=False)


def _import_toolset(env: str, tools: list[dict[str, Any]] | None, where: str) -> Toolset:
    toolset = env_toolset(env)
    if tools:
        for i, entry in enumerate(tools):
            fn = entry.get("function", entry) if isinstance(entry, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise ValueError(f"{where}: tools[{i}] must be an object with a function name")
        given = Toolset.from_openai(tools)
        if given.tools_fingerprint != toolset.tools_fingerprint:
            raise ValueError(
                f"{where}: its tools (fingerprint {given.tools_fingerprint}, {given.names}) are not the {env} "
                f"environment's (fingerprint {toolset.tools_fingerprint}, {toolset.names})")
    return toolset


# ---- OpenAI chat fine-tuning -----------------------------------------------------------------


def to_openai(traj: Trajectory) -> dict[str, Any]:
    """``{"messages": [...], "tools": [...]}`` as OpenAI chat fine-tuning expects."""
    toolset = _checked_toolset(traj)
    messages: list[dict[str, Any]] = []
    for t in _turns(traj):
        if t["role"] == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": t["content"]}
            if not t["learns"]:
                # OpenAI's per-message weight: 0 keeps a self-repair mistake or a recovered
                # episode's failed turn in the context without training on it, as our SFT masks it.
                msg["weight"] = 0
            if t["calls"]:
                msg["tool_calls"] = [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                    for c in t["calls"]]
            messages.append(msg)
        elif t["role"] == "result":
            messages.append({"role": "tool", "tool_call_id": t["id"], "content": t["content"]})
        elif t["role"] == "feedback":
            messages.append({"role": "user", "name": t["name"], "content": t["content"]})
        else:
            messages.append({"role": t["role"], "content": t["content"]})
    return {"messages": messages, "tools": toolset.openai()}


def from_openai(record: dict[str, Any], env: str, *, task_id: str, policy: str = "imported",
                dialect: str = "hermes") -> Trajectory:
    """One OpenAI chat record back into an (unexecuted) Trajectory; a record of the wrong shape
    raises ValueError naming the field."""
    record = _typed(record, dict, "the record", task_id)
    toolset = _import_toolset(env, _typed(record.get("tools"), (list, type(None)), "tools", task_id), task_id)
    names: dict[str, str] = {}
    unanswered: list[str] = []  # the current turn's call ids that no tool message has answered yet
    messages: list[Message] = []
    weights: list[int] = []
    for i, m in enumerate(_typed(record.get("messages") or [], list, "messages", task_id)):
        m = _typed(m, dict, f"messages[{i}]", task_id)
        role = m.get("role")
        content = _typed(m.get("content") or "", str, f"messages[{i}].content", task_id)
        if role == "assistant":
            calls = []
            for k, tc in enumerate(_typed(m.get("tool_calls") or [], list, f"messages[{i}].tool_calls", task_id)):
                where = f"messages[{i}].tool_calls[{k}]"
                tc = _typed(tc, dict, where, task_id)
                fn = _typed(tc.get("function", {}), dict, f"{where}.function", task_id)
                name = _typed(fn.get("name", ""), str, f"{where}.function.name", task_id)
                # An id-less call gets the id export makes up, so that its result pairs with it.
                call_id = _typed(tc.get("id"), (str, type(None)), f"{where}.id", task_id) or f"call_{len(weights)}_{k}"
                args = fn.get("arguments", "{}")
                try:
                    args = json.loads(args) if isinstance(args, str) else args
                except (ValueError, RecursionError) as e:  # not JSON, past the int-string limit, too deep
                    raise ValueError(f"{task_id}: messages[{i}] call arguments are not JSON: "
                                     f"{_short(e)}") from None
                calls.append(ToolCall(name=name, arguments=_typed(args, dict, f"{where}.function.arguments",
                                                                  task_id), id=call_id))
                names[call_id] = name
            unanswered = [c.id for c in calls]
            messages.append(Message(role="assistant", content=content, tool_calls=calls))
            weights.append(_weight(m.get("weight", 1), f"{task_id}: messages[{i}].weight"))
        elif role == "tool":
            cid = _typed(m.get("tool_call_id"), (str, type(None)), f"messages[{i}].tool_call_id", task_id)
            if cid is None and unanswered:
                cid = unanswered[0]  # an id-less result answers its turn's calls in order
            if cid in unanswered:
                unanswered.remove(cid)
            messages.append(Message(role="tool", content=content, tool_call_id=cid, name=names.get(cid)))
        elif role == "user" and m.get("name"):
            name = _typed(m["name"], str, f"messages[{i}].name", task_id)
            messages.append(Message(role="tool", content=content, name=name))
        elif role in ("system", "user"):
            messages.append(Message(role=role, content=content))
        else:
            shown = role if isinstance(role, (str, type(None))) else type(role).__name__
            raise ValueError(f"{task_id}: messages[{i}] has unsupported role {shown!r}")
    traj = _trajectory(messages, toolset, env=env, task_id=task_id, policy=policy, dialect=dialect)
    for step, weight in zip(traj.steps, weights):
        if weight == 0:
            step.train = False  # the file said not to train on this turn; the rule decides the rest
    return traj


def unlearned_turns(trajs: Iterable[Trajectory]) -> int:
    """Assistant turns that training masks (weight 0 in an OpenAI export)."""
    return sum(not t.turn_learns(k) for t in trajs for k in range(len(t.steps)))


def _weight(value: Any, where: str) -> int:
    """An assistant message's ``weight``: 0 or 1, as OpenAI's fine-tuning format allows."""
    if isinstance(value, bool) or value not in (0, 1):
        raise ValueError(f"{where} must be 0 or 1, not {value!r}")
    return int(value)


def _typed(value: Any, kind: type | tuple[type, ...], where: str, task_id: str) -> Any:
    """``value`` when it is of ``kind``; else a ValueError naming the field."""
    if not isinstance(value, kind):
        raise ValueError(f"{task_id}: {where} must be {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {dict: "an object", list: "an array", str: "a string", type(None): "null"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _short(e: BaseException) -> str:
    return str(e)[:200]


def write_openai_jsonl(trajs: Iterable[Trajectory], path: str | Path) -> int:
    """Write one OpenAI chat record per line; returns the count."""
    refuse_store_target(path)
    return _write_jsonl((to_openai(t) for t in trajs), path)


class ImportReport(NamedTuple):
    """What an import read: the trajectories, and the lines it could not read."""

    trajectories: list[Trajectory]
    rejected: list[str]
    """``file:line: what was wrong``, one per unreadable line."""


def read_openai_jsonl(path: str | Path, env: str, policy: str = "imported", dialect: str = "hermes",
                      max_line_bytes: int = MAX_LINE_BYTES) -> ImportReport:
    """Every readable record of an OpenAI chat JSONL file; each bad line is reported, not fatal."""
    return _read_records(Path(path), lambda rec, task_id: from_openai(
        rec, env, task_id=task_id, policy=policy, dialect=dialect), max_line_bytes)


def import_openai_jsonl(path: str | Path, env: str, policy: str = "imported",
                        dialect: str = "hermes") -> list[Trajectory]:
    """The file's trajectories; ValueError naming every bad line if there is any."""
    return _all_or_raise(read_openai_jsonl(path, env, policy, dialect))


# ---- ShareGPT / LLaMA-Factory ----------------------------------------------------------------


def dataset_info_entry(file_name: str) -> dict[str, Any]:
    """The LLaMA-Factory ``dataset_info.json`` entry for a ShareGPT file written here."""
    return {
        "file_name": file_name,
        "formatting": "sharegpt",
        "columns": {"messages": "conversations", "system": "system", "tools": "tools"},
        "tags": {"role_tag": "from", "content_tag": "value", "user_tag": "human",
                 "assistant_tag": "gpt", "function_tag": "function_call", "observation_tag": "observation"},
    }


def to_sharegpt(traj: Trajectory) -> dict[str, Any]:
    toolset = _checked_toolset(traj)
    system, conv = "", []
    for t in _turns(traj):
        role = t["role"]
        if role == "system":
            system = t["content"]
        elif role == "user":
            conv.append({"from": "human", "value": t["content"]})
        elif role == "assistant" and t["calls"]:
            calls = [{"name": c.name, "arguments": c.arguments} for c in t["calls"]]
            value = json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)
            if t["content"]:
                value = f"{THINK_OPEN}{t['content']}{THINK_CLOSE}{value}"
            conv.append({"from": "function_call", "value": value})
        elif role == "assistant":
            conv.append({"from": "gpt", "value": t["content"]})
        elif conv and conv[-1]["from"] == "observation":  # one observation per turn
            conv[-1]["value"] += OBSERVATION_JOIN + t["content"]
        else:
            conv.append({"from": "observation", "value": t["content"]})
    while conv and conv[-1]["from"] in ("observation", "human"):
        conv.pop()  # LLaMA-Factory needs the last turn to be the assistant's
    tools = json.dumps([t.model_dump() for t in toolset.tools], ensure_ascii=False)
    return {"conversations": conv, "system": system, "tools": tools}


def from_sharegpt(record: dict[str, Any], env: str, *, task_id: str, policy: str = "imported",
                  dialect: str = "hermes") -> Trajectory:
    record = _typed(record, dict, "the record", task_id)
    tools = json.loads(_typed(record["tools"], str, "tools", task_id)) if record.get("tools") else None
    toolset = _import_toolset(env, _typed(tools, (list, type(None)), "tools", task_id), task_id)
    messages = [Message(role="system", content=record.get("system") or "")]
    calls: list[ToolCall] = []
    for i, turn in enumerate(_typed(record.get("conversations") or [], list, "conversations", task_id)):
        turn = _typed(turn, dict, f"conversations[{i}]", task_id)
        kind = turn.get("from")
        value = _typed(turn.get("value") or "", str, f"conversations[{i}].value", task_id)
        if kind == "human":
            messages.append(Message(role="user", content=value))
        elif kind == "gpt":
            calls = []
            messages.append(Message(role="assistant", content=value))
        elif kind == "function_call":
            content = ""
            if value.startswith(THINK_OPEN) and THINK_CLOSE in value:
                content, _, value = value[len(THINK_OPEN):].partition(THINK_CLOSE)
            try:
                obj = json.loads(value)
            except json.JSONDecodeError as e:
                raise ValueError(f"{task_id}: conversations[{i}] function_call is not JSON: {e}") from e
            objs = [_typed(o, dict, f"conversations[{i}] function_call", task_id)
                    for o in (obj if isinstance(obj, list) else [obj])]
            calls = [ToolCall(name=o.get("name", ""), arguments=o.get("arguments") or {},
                              id=f"call_{i}_{k}") for k, o in enumerate(objs)]
            messages.append(Message(role="assistant", content=content, tool_calls=calls))
        elif kind == "observation":
            for k, part in enumerate(value.split(OBSERVATION_JOIN)):
                if k < len(calls):
                    messages.append(Message(role="tool", content=part, name=calls[k].name,
                                            tool_call_id=calls[k].id))
                else:
                    messages.append(Message(role="tool", content=part, name=FEEDBACK_NAME))
        else:
            raise ValueError(f"{task_id}: conversations[{i}] has unknown 'from' {kind!r}")
    return _trajectory(messages, toolset, env=env, task_id=task_id, policy=policy, dialect=dialect)


def write_sharegpt(trajs: Iterable[Trajectory], out_dir: str | Path, name: str = "trajforge") -> Path:
    """Write ``<name>.jsonl`` and a ``dataset_info.json`` naming it into ``out_dir``; returns the file.

    An existing ``dataset_info.json`` keeps its other entries.
    """
    out_dir = Path(out_dir)
    path, info_path = out_dir / f"{name}.jsonl", out_dir / "dataset_info.json"
    for target in (out_dir, path, info_path):
        refuse_store_target(target)
    info = _dataset_info(info_path)  # a broken one fails first
    info[name] = dataset_info_entry(path.name)
    _write_jsonl((to_sharegpt(t) for t in trajs), path)
    with _replacing(info_path) as tmp:
        tmp.write_text(json.dumps(info, indent=2) + "\n")
    return path


def _dataset_info(path: Path) -> dict[str, Any]:
    """The entries of an existing ``dataset_info.json`` (none when there is no file); ValueError naming
    the file when it is not a JSON object, as LLaMA-Factory's is."""
    if not path.exists():
        return {}
    return read_json_object(path, "it must be an object of datasets; fix or remove it")


def import_sharegpt(path: str | Path, env: str, policy: str = "imported",
                    dialect: str = "hermes") -> list[Trajectory]:
    return _all_or_raise(_read_records(Path(path), lambda rec, task_id: from_sharegpt(
        rec, env, task_id=task_id, policy=policy, dialect=dialect)))


# ---- Hugging Face datasets -------------------------------------------------------------------

HF_META = ("task_id", "sample", "policy", "env", "dialect", "tier", "split")


def to_hf_dataset(trajs: Iterable[Trajectory]):
    """A ``datasets.Dataset`` with OpenAI-style ``messages`` and ``tools`` plus episode metadata.

    ``messages`` and ``tools`` are JSON strings: Arrow would turn each call's ``arguments`` object
    into a struct whose fields are the union over all rows (absent ones filled with null), which does
    not round-trip. ``json.loads(row["messages"])`` gives the OpenAI list back.
    """
    from datasets import Dataset

    rows: dict[str, list[Any]] = {k: [] for k in ("messages", "tools", *HF_META)}
    for t in trajs:
        rec = to_openai(t)
        rows["messages"].append(json.dumps(rec["messages"], ensure_ascii=False))
        rows["tools"].append(json.dumps(rec["tools"], ensure_ascii=False))
        for k in HF_META:
            rows[k].append(getattr(t, k))
    return Dataset.from_dict(rows)


def from_hf_dataset(ds, policy: str | None = None) -> list[Trajectory]:
    """Trajectories from a dataset made by ``to_hf_dataset`` (metadata kept unless ``policy``)."""
    out = []
    for row in ds:
        rec = {"messages": json.loads(row["messages"]), "tools": json.loads(row["tools"])}
        traj = from_openai(rec, row["env"], task_id=row["task_id"], policy=policy or row["policy"],
                           dialect=row["dialect"])
        out.append(traj.model_copy(update={"sample": row["sample"], "tier": row["tier"], "split": row["split"]}))
    return out


def save_hf(trajs: Iterable[Trajectory], out: str | Path) -> Path:
    """``to_parquet`` when ``out`` ends in ``.parquet``, else ``save_to_disk`` (a folder)."""
    out = Path(out)
    refuse_store_target(out)
    ds = to_hf_dataset(trajs)
    if out.suffix == ".parquet":
        with _replacing(out) as tmp:
            ds.to_parquet(str(tmp))
    else:
        _save_dataset_dir(ds, out)
    return out


def _save_dataset_dir(ds, out: Path) -> None:
    """``save_to_disk`` into a new folder beside ``out``, then swap it in. Only an earlier saved
    dataset is replaced: any other non-empty folder is refused, never deleted."""
    if out.exists() and not (out.is_dir() and (not any(out.iterdir()) or (out / _HF_STATE).is_file())):
        raise ValueError(f"{out} exists and is not a saved dataset folder; pick a new folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = _beside(out)
    tmp.mkdir()
    try:
        ds.save_to_disk(str(tmp))
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.rename(out, old)
        os.rename(tmp, out)
        if old is not None:
            shutil.rmtree(old)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_hf(path: str | Path, policy: str | None = None) -> list[Trajectory]:
    from datasets import Dataset, load_from_disk

    path = Path(path)
    ds = Dataset.from_parquet(str(path)) if path.suffix == ".parquet" else load_from_disk(str(path))
    return from_hf_dataset(ds, policy=policy)


# ---- files -----------------------------------------------------------------------------------


def _beside(path: Path) -> Path:
    """A fresh hidden name in ``path``'s folder (same file system, so a rename is atomic)."""
    return path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")


@contextmanager
def _replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path``, renamed over it when the block ends without an error
    (fsynced first); on an error it is removed and ``path`` is left as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _beside(path)
    tmp.touch(exist_ok=False)  # not mkstemp: the file gets the umask's mode, as a plain open would
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> int:
    n = 0
    with _replacing(Path(path)) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    return n


def _read_records(path: Path, convert: Callable[[Any, str], Trajectory],
                  max_line_bytes: int = MAX_LINE_BYTES) -> ImportReport:
    """``convert(record, task_id)`` over every line; a line that cannot be read or converted is
    rejected with its reason and the rest are read."""
    trajs, rejected = [], []
    for lineno, line in jsonl_lines(path, max_line_bytes):
        try:
            if isinstance(line, LineTooLong):
                raise line
            record = json.loads(line)
            if _SURROGATE_ESCAPE.search(line):  # a lone surrogate would fail every later write
                json.dumps(record, ensure_ascii=False).encode("utf-8")
            trajs.append(convert(record, f"{path.stem}:{lineno - 1}"))
        except RecursionError:
            rejected.append(f"{path}:{lineno}: nested too deeply")
        except ValueError as e:  # not UTF-8 or JSON, past the int-string limit, a lone surrogate, a bad field
            rejected.append(f"{path}:{lineno}: {_short(e)}")
    return ImportReport(trajs, rejected)


def _all_or_raise(report: ImportReport) -> list[Trajectory]:
    if report.rejected:
        more = f" (and {len(report.rejected) - 5} more)" if len(report.rejected) > 5 else ""
        raise ValueError("; ".join(report.rejected[:5]) + more)
    return report.trajectories
