"""MCP-style tool environments: a tool-list JSON plus a module of functions, no class to write.

    tools.json   [{"name": "put", "description": "Store a value.",
                   "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}, ...},
                                   "required": ["key", ...]}}, ...]
    tools.py     def put(state, key: str, value: str) -> str: ...

A task whose ``env`` is ``"mcp:path/to/tools.json"`` runs in this environment; the implementations
are the sibling module with the same stem (``path/to/tools.py``). The path is used as written:
relative paths resolve against the working directory, so keep pools and tool files together or
write absolute paths. ``mcp_env_class(tools, module)`` builds one from any pair of files.

The tool list is the MCP ``tools/list`` shape (``name``, ``description``, ``inputSchema``; a bare
list or ``{"tools": [...]}``); OpenAI function tools (``{"type": "function", "function": {name,
description, parameters}}``) are read too. The Toolset comes from that JSON, not from Python
signatures, so the schema the model sees, the harness validates against and the fingerprint all
are exactly the user's. Each listed tool needs a function of the same name whose parameters are
the schema's properties (checked when the environment is built: a missing function or a
parameter mismatch is a ``ValueError`` naming both sides).

Module conventions (all optional):

* ``make_state(task) -> state``: the episode state, created at reset (default ``{}``). A function
  whose first parameter is named ``state`` receives it; the rest are the tool's arguments. The
  state must survive ``copy.deepcopy`` (snapshot/restore copy it).
* ``final_tool = "submit"``: calling that tool ends the episode; its argument is the answer (the
  single argument's value, or the arguments object when it has several).
* ``verify(state, answer) -> bool``: whether the episode succeeded; without it, the answer is
  compared with ``task.expected`` like the SQL environment's answers.
* ``instructions = "..."``: the system instructions above the tool block.

Raise ``trajforge.envs.ToolError`` in a tool for a mistake the model should see ("no such key"),
with a ``kind`` that becomes the fail reason. Any other exception is the model's too (it crashed
the tool with its arguments: ``tool_exception``), except ``trajforge.envs.InfraError``, which you
raise for a failure of your own machinery (a backend that is down), and an ``ImportError`` (a
missing dependency): only those are infrastructure faults (``env_fault``), retried and never
held against the model.

Trust: building the environment imports the module, which runs its code with your permissions,
like any Python you import. That is the point (it is your tool implementation), but a task pool's
``env`` string picks which local file is imported, so only run pools you trust, and never point
this at model-written or downloaded code.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, NamedTuple

import jsonschema

from trajforge.envs.answers import answers_match
from trajforge.envs.base import Environment, InfraError, ToolError, Verdict
from trajforge.envs.registry import MCP_PREFIX as PREFIX
from trajforge.envs.registry import EnvSpec
from trajforge.schema import Task, Toolset, ToolSpec

HOOKS = ("make_state", "verify")
"""Module functions with a meaning of their own; no tool may have these names."""


def read_tool_list(path: str | Path) -> Toolset:
    """The Toolset described by an MCP tool list or OpenAI tools JSON file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:  # unreadable, not UTF-8, not JSON, nested too deeply
        raise ValueError(f"{path}: cannot read the tool list: {e}") from None
    entries = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{path}: expected a non-empty list of tools (or {{\"tools\": [...]}})")
    specs = [_spec(entry, f"{path}: tools[{i}]") for i, entry in enumerate(entries)]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"{path}: tool names listed twice: {dupes}")
    return Toolset(tools=tuple(specs))


def _spec(entry: Any, where: str) -> ToolSpec:
    """One MCP (``inputSchema``) or OpenAI (``parameters``) tool entry as a ToolSpec."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object, got {type(entry).__name__}")
    fn = entry["function"] if entry.get("type") == "function" and "function" in entry else entry
    if not isinstance(fn, dict):
        raise ValueError(f"{where}: 'function' must be an object, got {type(fn).__name__}")
    name = fn.get("name")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{where}: tool name must be a Python identifier, got {name!r}")
    if name in HOOKS:
        raise ValueError(f"{where}: {name!r} is reserved for the module's {name}() hook")
    schema = fn.get("inputSchema", fn.get("parameters"))
    if schema is None:
        raise ValueError(f"{where} ({name}): no inputSchema (MCP) or parameters (OpenAI)")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError(f"{where} ({name}): the argument schema must be a JSON Schema object "
                         "with \"type\": \"object\"")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        raise ValueError(f"{where} ({name}): invalid JSON Schema: {e.message}") from None
    return ToolSpec(name=name, description=str(fn.get("description", "")), parameters=schema)


class Implementation(NamedTuple):
    """A tool's function and how to call it."""

    fn: Callable[..., Any]
    takes_state: bool
    """The first parameter is ``state``: pass the episode state."""
    accepts: frozenset[str] | None
    """Argument names it takes (None: it has ``**kwargs``)."""


def check_implementation(spec: ToolSpec, fn: Callable[..., Any], module: str) -> Implementation:
    """Check ``fn`` can take exactly the schema's arguments; returns how to call it.

    Each schema property needs a parameter; each parameter (past ``state``) needs a property;
    a parameter without a default must be required by the schema, or a call that leaves the
    argument out would crash instead of being refused.
    """
    where = f"{module}.{spec.name}()"
    params = list(inspect.signature(fn).parameters.values())
    takes_state = bool(params) and params[0].name == "state"
    if takes_state:
        params = params[1:]
    if any(p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL) for p in params):
        raise ValueError(f"{where}: tool arguments arrive by name; positional-only and *args "
                         "parameters cannot receive them")
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in params)
    named = {p.name: p for p in params if p.kind is not p.VAR_KEYWORD}
    props = set(spec.parameters.get("properties", {}))
    required = set(spec.parameters.get("required", []))
    if not accepts_any and props - set(named):
        raise ValueError(f"{where} has no parameter for schema argument(s) "
                         f"{sorted(props - set(named))}; its parameters: {sorted(named)}")
    if set(named) - props:
        raise ValueError(f"{where}: parameter(s) {sorted(set(named) - props)} are not in the "
                         f"tool's schema (properties: {sorted(props)})")
    optional = [n for n, p in named.items() if p.default is p.empty and n not in required]
    if optional:
        raise ValueError(f"{where}: parameter(s) {optional} have no default but the schema does "
                         "not require them; give them defaults or list them in \"required\"")
    return Implementation(fn, takes_state, None if accepts_any else frozenset(named))


def load_module(path: str | Path) -> ModuleType:
    """Import a Python file as a module (runs its code: see the trust note above)."""
    path = Path(path).resolve()
    name = f"trajforge_mcp_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path}: not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[name]
        raise
    return module


class McpEnv(Environment):
    """Tools from a JSON list, implemented by a module's functions (one subclass per pair)."""

    module: ClassVar[ModuleType]
    implementations: ClassVar[dict[str, Implementation]] = {}
    tools: ClassVar[Toolset]
    state_fields = ("state", "answer")

    def __init__(self, seed: int = 0):
        super().__init__(seed=seed)
        self.state: Any = {}
        self.answer: Any = None

    @classmethod
    def toolset(cls) -> Toolset:
        # The schema is the user's JSON, not derived from signatures; the instructions are the
        # module's (or the default below), shown above it.
        return cls.tools.with_instructions(cls.instructions)

    def reset(self, task: Task) -> str:
        super().reset(task)
        make_state = getattr(self.module, "make_state", None)
        self.state = make_state(task) if make_state is not None else {}
        self.answer = None
        return ""

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        impl = self.implementations[name]
        extra = set(arguments) - impl.accepts if impl.accepts is not None else set()
        if extra:  # the schema allows more properties than the function takes
            raise ToolError(f"{name}: unexpected argument(s) {sorted(extra)}; it takes "
                            f"{sorted(impl.accepts)}", kind="invalid_args")
        try:
            out = impl.fn(self.state, **arguments) if impl.takes_state else impl.fn(**arguments)
        except ImportError as e:  # the user's module needs something this machine lacks
            raise InfraError(f"{name} needs a module that cannot be imported here: {e}",
                             kind="missing_dependency") from None
        self.reach(name)
        if name == self.final_tool:
            self.answer = next(iter(arguments.values())) if len(arguments) == 1 else dict(arguments)
        return out if isinstance(out, str) else json.dumps(out, default=str)

    def verify(self) -> Verdict:
        # Without a final tool the episode runs to max_turns and its end state is judged.
        submitted = self.done if self.final_tool else True
        check = getattr(self.module, "verify", None)
        if check is not None:
            try:
                correct = check(self.state, self.answer)
            except Exception as e:  # a broken verifier must be loud, not a silent "wrong"
                raise RuntimeError(f"{self.name}: verify() raised {type(e).__name__}: {e}") from e
            if not isinstance(correct, bool):
                raise TypeError(f"{self.name}: verify() must return True or False, "
                                f"got {type(correct).__name__}")
            detail = "verify() accepted" if correct else "verify() rejected the episode"
        else:
            expected = self.task.expected if self.task else None
            correct = self.answer is not None and answers_match(self.answer, expected)
            detail = f"expected {expected!r}, got {self.answer!r}"
        return Verdict(submitted=submitted, answer=self.answer, correct=submitted and correct,
                       milestones=list(self.milestones), detail=detail)


def mcp_env_class(tools_path: str | Path, module_path: str | Path | None = None,
                  name: str | None = None) -> type[McpEnv]:
    """An Environment class for a tool list and its implementations (default: sibling ``.py``).

    Raises ``ValueError`` naming the file and tool when the list is malformed, a tool has no
    function, or a function's parameters don't match its schema. Cached per file versions, so
    building one env per episode imports the module once.
    """
    tools_path = Path(tools_path)
    module_path = Path(module_path) if module_path is not None else tools_path.with_suffix(".py")
    for p, what in ((tools_path, "tool list"), (module_path, "implementation module")):
        if not p.is_file():
            raise ValueError(f"{p}: no such {what}"
                             + (" (the tools' functions live in the JSON's sibling .py)"
                                if what.startswith("impl") else ""))
    key = (str(tools_path.resolve()), tools_path.stat().st_mtime_ns,
           str(module_path.resolve()), module_path.stat().st_mtime_ns, name)
    if key not in _CLASSES:
        _CLASSES[key] = _build_class(tools_path, module_path, name or f"{PREFIX}{tools_path}")
    return _CLASSES[key]


_CLASSES: dict[tuple[Any, ...], type[McpEnv]] = {}


def mcp_spec(tools_path: str | Path, name: str) -> EnvSpec:
    """The registry's spec for ``mcp:TOOLS_PATH``: the class built from the tool list and its
    module (cached per file versions); tool lists have no template generator."""
    return EnvSpec(name=name, env=mcp_env_class(tools_path, name=name),
                   summary=f"tools listed in {tools_path}, implemented by its sibling module")


def _build_class(tools_path: Path, module_path: Path, name: str) -> type[McpEnv]:
    toolset = read_tool_list(tools_path)
    module = load_module(module_path)
    implementations: dict[str, Implementation] = {}
    for spec in toolset.tools:
        fn = getattr(module, spec.name, None)
        if not callable(fn):
            raise ValueError(f"{tools_path}: tool {spec.name!r} has no implementation: "
                             f"{module_path} defines no function {spec.name}()")
        implementations[spec.name] = check_implementation(spec, fn, module_path.name)
    final = getattr(module, "final_tool", None)
    if final is not None and final not in implementations:
        raise ValueError(f"{module_path}: final_tool {final!r} is not one of the listed tools "
                         f"{toolset.names}")
    instructions = getattr(module, "instructions", None) or (
        "Use the tools to complete the user's request."
        + (f" Call {final} with your final answer when you are done." if final else ""))
    return type(f"McpEnv_{module_path.stem}", (McpEnv,), {
        "name": name, "tool_names": tuple(toolset.names), "final_tool": final,
        "instructions": instructions, "module": module, "implementations": implementations,
        "tools": toolset,
    })


__all__ = [
    "PREFIX",
    "Implementation",
    "McpEnv",
    "check_implementation",
    "load_module",
    "mcp_env_class",
    "mcp_spec",
    "read_tool_list",
]
