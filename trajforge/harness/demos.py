"""Retrieved demonstrations: the k most similar solved training tasks, shown in the first user turn.

A small model cannot memorise every idiom of a schema, but it can copy one it is shown. A
``DemoPool`` holds solved training tasks — the question (the first user message the episode
had) and the calls that solved it, rendered compactly (``run_sql(query="SELECT ...")``) — and a
pure-python BM25 retriever over the questions' words. ``Demos`` (a pool and k) puts the k most
similar tasks in a delimited block above the first user message::

    pool = DemoPool.from_trajectories(graded_train_trajectories)
    pool.write("demos.jsonl")                      # content-hashed: pool_sha256("demos.jsonl")
    text = Demos(pool, 3).show(first_message, task_id="sql-12", tools=["run_sql", "submit_answer"])

One function builds the block wherever a prompt is made, so the bytes agree: SFT rewrites each
sample's first user message with it (``train/demo_rule.py``), the harness puts it into each
episode's (``HarnessConfig.demos``, or an ``hf:`` adapter that recorded a pool), and
``trajforge serve`` into each request's. What is left out is the same everywhere, and never
depends on who asks: the task itself (its id), every pool task with the same question, and every
task solved by the same calls as one of those (a paraphrase of the task: copying it would be
copying the answer). Only tasks whose calls use tools the episode is shown are candidates.

The pool is what the model was trained on, never the split being evaluated: ``train sft --demos
K`` builds it from its own training data (or a store's train split) and copies it into the
adapter, and evaluation and serving read it from there.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Iterable, NamedTuple

from pydantic import BaseModel, ConfigDict

from trajforge.schema import Message, ToolCall, Trajectory

DEMO_FILE = "demos.jsonl"
"""The pool's file name inside an adapter folder."""
HEAD = "[Solved examples: similar tasks and the tool calls that solved them]\n"
TAIL = "[End of solved examples]\n\n"
"""The block's delimiters: the block is ``HEAD + entries + TAIL``, then the message as it was."""
_K1, _B = 1.2, 0.75
"""BM25's term-frequency saturation and length normalisation (the usual values)."""


class DemoEntry(BaseModel):
    """One solved task in a pool (one JSONL line)."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    """The task it solved."""
    split: str
    """The task's split (a pool holds training tasks)."""
    question: str
    """The first user message of the solving episode (the task's prompt and what reset showed)."""
    calls: tuple[str, ...]
    """The executed calls that solved it, one ``name(arg=value, ...)`` line each."""
    tools: tuple[str, ...]
    """The tools those calls use (an episode shown other tools is never given this entry)."""


def call_line(call: ToolCall) -> str:
    """``run_sql(query="SELECT 1")``: the call's name and its arguments as JSON values."""
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call.arguments.items())
    return f"{call.name}({args})"


def words(text: str) -> list[str]:
    """The retriever's tokens: NFKC-normalised, casefolded runs of word characters."""
    return re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold())


def solving_calls(traj: Trajectory) -> list[ToolCall]:
    """The calls of ``traj`` that ran and succeeded, in order (a deliberate mistake's are left out)."""
    return [call for step in traj.steps if not step.mistake
            for call, result in zip(step.calls, step.results) if result.ok]


def first_user(messages: list[Message]) -> int | None:
    """Index of the first user message (None when there is none)."""
    return next((i for i, m in enumerate(messages) if m.role == "user"), None)


def without_block(content: str) -> str:
    """The message as it was before a demonstration block was put above it."""
    if content.startswith(HEAD) and TAIL in content:
        return content[content.index(TAIL) + len(TAIL):]
    return content


class DemoPool:
    """Solved tasks and a BM25 index over their questions' words; see the module docstring."""

    def __init__(self, entries: Iterable[DemoEntry]):
        self.entries = sorted(entries, key=lambda e: e.task_id)
        ids = [e.task_id for e in self.entries]
        if len(set(ids)) != len(ids):
            raise ValueError("a demonstration pool holds one entry per task id")
        self._terms = [Counter(words(e.question)) for e in self.entries]
        self._lengths = [sum(t.values()) for t in self._terms]
        self._mean = sum(self._lengths) / len(self._lengths) if self.entries else 0.0
        df = Counter(w for t in self._terms for w in t)
        n = len(self.entries)
        self._idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}
        self._norm = [" ".join(words(e.question)) for e in self.entries]

    def __len__(self) -> int:
        return len(self.entries)

    @classmethod
    def from_trajectories(cls, trajs: Iterable[Trajectory], split: str | None = None) -> "DemoPool":
        """One entry per task solved cleanly (tier ``success``), from the episode with the fewest
        calls; ``split``: that split's tasks only."""
        best: dict[str, DemoEntry] = {}
        for t in trajs:
            if t.outcome is None or t.outcome.tier != "success" or (split is not None and t.split != split):
                continue
            at = first_user(t.messages)
            calls = solving_calls(t)
            if at is None or not calls:
                continue
            question = without_block(t.messages[at].content)
            if HEAD in question or TAIL in question:
                continue  # a question quoting the delimiters would break the block apart
            entry = DemoEntry(task_id=t.task_id, split=t.split, question=question,
                              calls=tuple(map(call_line, calls)), tools=tuple(sorted({c.name for c in calls})))
            held = best.get(t.task_id)
            if held is None or (len(entry.calls), entry.calls) < (len(held.calls), held.calls):
                best[t.task_id] = entry
        return cls(best.values())

    def similar(self, question: str, k: int, task_id: str | None = None,
                tools: Iterable[str] | None = None) -> list[DemoEntry]:
        """The ``k`` entries most similar to ``question`` (BM25; ties by task id), leaving out the
        task itself and its paraphrases (module docstring) and entries using tools not in ``tools``."""
        tokens = words(question)
        query = " ".join(tokens)
        own = {i for i, e in enumerate(self.entries) if e.task_id == task_id or self._norm[i] == query}
        answers = {self.entries[i].calls for i in own}
        shown = None if tools is None else set(tools)
        scored = []
        for i, e in enumerate(self.entries):
            if i in own or e.calls in answers or (shown is not None and not shown.issuperset(e.tools)):
                continue
            scored.append((-self._score(i, tokens), e.task_id, e))
        return [e for _, _, e in sorted(scored, key=lambda s: s[:2])[:k]]

    def _score(self, i: int, query: list[str]) -> float:
        terms, norm = self._terms[i], 1 - _B + _B * self._lengths[i] / (self._mean or 1.0)
        total = 0.0
        for w in query:
            f = terms.get(w, 0)
            if f:
                total += self._idf[w] * f * (_K1 + 1) / (f + _K1 * norm)
        return total

    # ---- on disk ----------------------------------------------------------------------------------

    def text(self) -> str:
        """The JSONL file's content: one entry per line, by task id (the same pool, the same bytes)."""
        return "".join(json.dumps(e.model_dump(), ensure_ascii=False, sort_keys=True) + "\n" for e in self.entries)

    def sha256(self) -> str:
        """The sha256 of the pool's file content (``text``)."""
        return hashlib.sha256(self.text().encode()).hexdigest()

    def write(self, path: str | Path) -> str:
        """Write the pool to ``path``; returns its sha256."""
        Path(path).write_text(self.text(), encoding="utf-8")
        return self.sha256()


def pool_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def pool_path(path: str | Path) -> Path:
    """A pool file, or the pool inside a folder (an adapter trained with demonstrations)."""
    path = Path(path)
    return path / DEMO_FILE if path.is_dir() else path


def load_pool(path: str | Path, sha256: str | None = None) -> DemoPool:
    """The pool in ``path`` (a file, or an adapter folder holding one); ``sha256``: the content it
    must have (what an adapter recorded), refused otherwise."""
    file = pool_path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no demonstration pool at {file} (a {DEMO_FILE} file written by "
                                "`train sft --demos K`, or an adapter folder holding one)")
    return _cached_pool(str(file.resolve()), sha256, file.stat().st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _cached_pool(file: str, sha256: str | None, _mtime: int) -> DemoPool:
    data = Path(file).read_bytes()
    found = hashlib.sha256(data).hexdigest()
    if sha256 is not None and found != sha256:
        raise ValueError(f"demonstration pool {file} has sha256 {found[:12]}…, not the {sha256[:12]}… the "
                         "adapter was trained with; it was changed after training")
    lines = data.decode().splitlines()
    return DemoPool(DemoEntry.model_validate_json(line) for line in lines if line.strip())


class Demos(NamedTuple):
    """A pool and how many of its tasks to show."""

    pool: DemoPool
    k: int

    def block(self, question: str, task_id: str | None = None, tools: Iterable[str] | None = None) -> str:
        """The delimited block for ``question`` ("" when the pool has nothing to show)."""
        found = self.pool.similar(question, self.k, task_id, tools)
        if not found:
            return ""
        parts = [f"Task: {e.question}\nCalls:\n" + "\n".join(e.calls) + "\n\n" for e in found]
        return HEAD + "\n" + "".join(parts) + TAIL

    def show(self, content: str, task_id: str | None = None, tools: Iterable[str] | None = None) -> str:
        """``content`` (a first user message) with the block for it above; a block already there is
        replaced, so showing twice changes nothing."""
        question = without_block(content)
        return self.block(question, task_id, tools) + question

    def in_messages(self, messages: list[Message], task_id: str | None = None,
                    tools: Iterable[str] | None = None) -> list[Message]:
        """``messages`` with the first user message shown with its block: a new list (no message
        is changed in place), or ``messages`` itself when the block changes nothing."""
        at = first_user(messages)
        if at is None:
            return messages
        content = self.show(messages[at].content, task_id, tools)
        if content == messages[at].content:
            return messages
        return [*messages[:at], messages[at].model_copy(update={"content": content}), *messages[at + 1:]]


def episode_demos(cfg, policy) -> Demos | None:
    """The demonstrations an episode shows: ``cfg.demos`` tasks from ``cfg.demo_pool``, each
    defaulting to what the policy's adapter recorded (``HFPolicy.demos``); None when none."""
    recorded = getattr(policy, "demos", None) or {}
    k = cfg.demos if cfg.demos is not None else recorded.get("k", 0)
    if k < 0:  # a slice [:k] would show all but the last -k tasks
        raise ValueError(f"--demos must be 0 or more, not {k}")
    if not k:
        if cfg.demos is None and cfg.demo_pool is not None:
            raise ValueError(f"a demonstration pool ({cfg.demo_pool}) but no number to show: pass --demos K")
        return None
    path = cfg.demo_pool or recorded.get("pool")
    if path is None:
        raise ValueError(f"{k} demonstrations asked for but no pool: pass a demonstration pool "
                         "(--demo-pool FILE|ADAPTER|STORE) or an adapter trained with `--demos K`")
    sha = recorded.get("sha256") if cfg.demo_pool is None else None
    return Demos(load_pool(path, sha), k)
