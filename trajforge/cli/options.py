"""CLI options generated from pydantic configs, so each default and help line lives in one place.

A command names the configs it takes; each field becomes one ``--kebab-case`` option whose
default is the field's default and whose help is the first sentence of the field's docstring
(the ``\"\"\"...\"\"\"`` under it). The command receives the built config objects::

    from trajforge.cli.options import Options, with_configs

    @with_configs(harness=HarnessConfig,
                  scale=Options(CollectConfig, flags={"request_timeout_s": "--request-timeout"}))
    def collect(tasks: Path = typer.Option(...), harness: HarnessConfig = None,
                scale: CollectConfig = None) -> None:
        ...   # harness and scale are validated configs built from the flags

``Options`` narrows or renames what is generated: ``only=`` / ``exclude=`` (field names),
``flags=`` ({field: "--flag"}), ``partial=True`` (the command gets a dict of the given values, each
checked as its field, for configs whose required fields it supplies itself), ``file_only=`` (fields with no flag that
``--config`` may still set: nested tables such as ``RewardConfig.per``). A value the config rejects exits with code 2
and names the flag (or the ``--config`` file and key it came from). ``with_configs(config_file=True, ...)`` adds
``--config FILE.toml``: a table per section (``[sft]``, ``[harness]``; top-level keys when there is one section) whose
keys are field names; a flag given on the command line wins over the file (even one repeating its default), the file
over the default.
``@with_configs(config_file=True, cfg=Options(SFTConfig))`` on a train command is all it takes
to adopt this.

``check_defaults(command)`` lists every option of a command whose default differs from the
config field it stands for — generated ones by construction never do; a hand-written option that
shares a flag with a field is compared too. ``tests/cli/test_options.py`` runs it on every command.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import tomllib
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

import typer
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticUndefined

SECTIONS_ATTR = "__trajforge_options__"
"""Attribute a generated command carries: ``{parameter name: (config class, field name)}``."""
CONFIGS_ATTR = "__trajforge_configs__"
"""Attribute a generated command carries: the config classes it takes."""
FILE_ONLY_ATTR = "__trajforge_file_only__"
"""Attribute a generated command carries: ``{(config class, field)}`` settable only from ``--config``."""


@dataclass(frozen=True)
class Options:
    """Which fields of one config become options, and under which flags."""

    config: type[BaseModel]
    only: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    flags: dict[str, str] = field(default_factory=dict)
    partial: bool = False
    """Pass a dict of the option values instead of a built config (the command adds the rest)."""
    file_only: tuple[str, ...] = ()
    """Fields with no flag that ``--config`` may still set (nested tables such as reward rules)."""

    def fields(self) -> list[str]:
        names = list(self.config.model_fields)
        if self.only is not None:
            unknown = set(self.only) - set(names)
            if unknown:
                raise ValueError(f"{self.config.__name__} has no fields {sorted(unknown)}")
            names = [n for n in names if n in self.only]
        return [n for n in names if n not in self.exclude]

    def flag(self, name: str) -> str:
        """How an error names the field: its flag, or for a file-only field its key in ``--config``."""
        if name in self.file_only:
            return f"--config {name}"
        return self.flags.get(name, "--" + name.replace("_", "-"))


CONFIG_PARAM = "config_file__"
CONTEXT_PARAM = "context__"


def with_configs(config_file: bool = False,
                 **sections: type[BaseModel] | Options) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a typer command so the parameters named in ``sections`` become config objects
    built from generated options (see the module docstring)."""
    specs = {k: v if isinstance(v, Options) else Options(v) for k, v in sections.items()}

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(fn, eval_str=True)
        missing = set(specs) - set(signature.parameters)
        if missing:
            raise TypeError(f"{fn.__name__} has no parameters {sorted(missing)} to fill with configs")
        own = [p for name, p in signature.parameters.items() if name not in specs]
        taken = {_flag_of(p) for p in own}
        generated: list[inspect.Parameter] = []
        origin: dict[str, tuple[type[BaseModel], str]] = {}
        for section, spec in specs.items():
            for name in spec.fields():
                flag = spec.flag(name)
                if flag in taken:
                    raise ValueError(f"{fn.__name__}: {flag} is both a hand-written option and "
                                     f"{spec.config.__name__}.{name}")
                taken.add(flag)
                param = f"{section}__{name}"
                generated.append(_parameter(param, spec, name, flag))
                origin[param] = (spec.config, name)

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            path = kwargs.pop(CONFIG_PARAM, None)
            from_file = _read_config(path, specs)
            typed = _typed_options(kwargs.pop(CONTEXT_PARAM, None), origin)
            for section, spec in specs.items():
                values = {n: kwargs.pop(f"{section}__{n}") for n in spec.fields()}
                labels: dict[str, str] = {}
                for name, value in from_file.get(section, {}).items():
                    if name not in values and name not in spec.file_only:
                        _fail(f"--config: {spec.config.__name__} has no option {name!r} here")
                    # A flag given wins, even one that repeats its default (--lr 2e-4 over lr = 1e-3).
                    if name in spec.file_only:
                        given = False
                    elif typed is not None:
                        given = f"{section}__{name}" in typed
                    else:
                        given = values[name] != field_default(spec.config, name)
                    if not given:
                        values[name] = value
                        labels[name] = f"--config {path}: [{section}] {name}"
                kwargs[section] = _checked(spec, values, labels) if spec.partial else _build(spec, values, labels)
            return fn(**kwargs)

        if config_file:
            # typer fills a Context parameter: it tells a flag typed from one left at its default.
            generated.append(inspect.Parameter(CONTEXT_PARAM, inspect.Parameter.KEYWORD_ONLY, default=None,
                                               annotation=typer.Context))
            generated.append(inspect.Parameter(
                CONFIG_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=Optional[Path],
                default=typer.Option(None, "--config", help="TOML file with these settings (flags win over it)")))
        # Options without defaults must come first in a Python signature; typer keeps their order.
        params = own + generated
        params.sort(key=lambda p: p.default is inspect.Parameter.empty)
        command.__signature__ = signature.replace(parameters=params)
        command.__annotations__ = {p.name: p.annotation for p in params}
        setattr(command, SECTIONS_ATTR, origin)
        setattr(command, CONFIGS_ATTR, tuple(spec.config for spec in specs.values()))
        setattr(command, FILE_ONLY_ATTR, {(spec.config, n) for spec in specs.values() for n in spec.file_only})
        return command

    return decorate


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _typed_options(ctx: typer.Context | None, params: Iterable[str]) -> set[str] | None:
    """Which of ``params`` were given on the command line (or by environment); None without the
    command's context (called as a Python function)."""
    if ctx is None or not set(params) <= set(ctx.params):
        return None
    return {name for name in params
            if (source := ctx.get_parameter_source(name)) is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")}


def _build(spec: Options, values: dict[str, Any], labels: dict[str, str] | None = None) -> BaseModel:
    try:
        return spec.config(**values)
    except ValidationError as e:
        _fail_with(spec, e, labels)
        raise AssertionError("unreachable") from None


def _checked(spec: Options, values: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A partial section's values, each validated as its field would be (the command builds the
    config later, often after long work: a bad value must stop it now)."""
    blank = spec.config.model_construct()
    for name, value in values.items():
        try:
            spec.config.__pydantic_validator__.validate_assignment(blank, name, value)
        except ValidationError as e:
            _fail_with(spec, e, labels)
    return values


def _fail_with(spec: Options, e: ValidationError, labels: dict[str, str] | None = None) -> None:
    """Name each bad value where it was given: its flag, or the ``--config`` file and key; the rest
    of the location names what inside a nested table was wrong (``per.sql.weight``)."""
    def where(loc: tuple) -> str:
        name = str(loc[0])
        return ((labels or {}).get(name) or spec.flag(name)) + "".join(f".{x}" for x in loc[1:])

    _fail("; ".join(f"{where(err['loc'])}: {err['msg']}" if err["loc"] else err["msg"] for err in e.errors()))


def _read_config(path: Path | None, specs: dict[str, Options]) -> dict[str, dict[str, Any]]:
    """``{section: {field: value}}`` from a ``--config`` TOML file ({} without one)."""
    if path is None:
        return {}
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        _fail(f"--config {path}: {e}")
    if len(specs) == 1 and not (set(data) & set(specs)):
        data = {next(iter(specs)): data}  # one section: its fields may stand at the top level
    unknown = sorted(set(data) - set(specs))
    if unknown:
        _fail(f"--config {path}: no section {unknown[0]!r} (sections: {', '.join(specs)})")
    for section, table in data.items():
        if not isinstance(table, dict):  # `harness = 5`: a key where a [harness] table belongs
            _fail(f"--config {path}: {section!r} must be a table of settings ([{section}]), got {table!r:.60}")
    return data


def _parameter(param: str, spec: Options, name: str, flag: str) -> inspect.Parameter:
    info = spec.config.model_fields[name]
    default = field_default(spec.config, name)
    help_text = field_help(spec.config, name)
    annotation, choices = _cli_type(info.annotation)
    if choices:
        help_text = f"{help_text} ({' | '.join(map(str, choices))})".strip()
    if annotation in (bool, Optional[bool]):  # Optional: a third state, None, when neither is given
        flag = f"{flag}/--no-{flag[2:]}"
    option = typer.Option(... if default is PydanticUndefined else default, flag, help=help_text or None)
    return inspect.Parameter(param, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)


def _cli_type(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """A type typer understands for a field's annotation, plus the choices of a Literal."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            inner, choices = _cli_type(rest[0])
            return Optional[inner], choices
    if origin is Literal:
        return type(args[0]), args
    if origin in (list, tuple) and args:
        return list[args[0]], ()
    return annotation, ()


def field_default(config: type[BaseModel], name: str) -> Any:
    """A field's default (``PydanticUndefined`` when it is required)."""
    info = config.model_fields[name]
    if info.default_factory is not None:
        return info.default_factory()
    return info.default


@functools.cache
def _attribute_docs(config: type[BaseModel]) -> dict[str, str]:
    """``{field: docstring}`` for the ``\"\"\"...\"\"\"`` written under each field, through the MRO."""
    docs: dict[str, str] = {}
    for cls in reversed(config.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for stmt, nxt in zip(body, body[1:]):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                docs[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def field_help(config: type[BaseModel], name: str) -> str:
    """The first sentence of a field's docstring (or its ``description``), on one line."""
    info = config.model_fields[name]
    text = info.description or _attribute_docs(config).get(name, "")
    text = " ".join(text.split()).replace("``", "")
    head, dot, _ = text.partition(". ")
    return head + ("." if dot else "")


def _flag_of(param: inspect.Parameter) -> str:
    default = param.default
    decls = getattr(default, "param_decls", None) or ()
    longs = [d.split("/")[0] for d in decls if d.startswith("--")]
    return longs[0] if longs else "--" + param.name.replace("_", "-")


def check_defaults(command: Callable[..., Any]) -> list[str]:
    """Options of ``command`` whose default differs from the config field they stand for:
    ``"--flag: CLI default X, Config.field default Y"`` (empty when they agree)."""
    origin: dict[str, tuple[type[BaseModel], str]] = getattr(command, SECTIONS_ATTR, {})
    problems = []
    fields_by_flag = {"--" + n.replace("_", "-"): (cfg, n) for cfg in getattr(command, CONFIGS_ATTR, ())
                      for n in cfg.model_fields}
    for param in inspect.signature(command).parameters.values():
        default = param.default
        if not hasattr(default, "default"):
            continue
        cfg_field = origin.get(param.name) or fields_by_flag.get(_flag_of(param))
        # A file-only field has no flag: a hand-written option of its name takes another form
        # (``--milestone-bonus travel=0.2``) and is not a second default for it.
        if cfg_field is None or cfg_field in getattr(command, FILE_ONLY_ATTR, set()):
            continue
        cfg, name = cfg_field
        want = field_default(cfg, name)
        have = default.default
        if want is PydanticUndefined:
            want = ...
        if have != want:
            problems.append(f"{_flag_of(param)}: CLI default {have!r}, {cfg.__name__}.{name} default {want!r}")
    return problems


def config_commands(app: typer.Typer, skip: Iterable[str] = ()) -> dict[str, Callable[..., Any]]:
    """``{"collect": fn, "train sft": fn, ...}``: every command of ``app`` and its sub-apps."""
    out: dict[str, Callable[..., Any]] = {}
    for cmd in app.registered_commands:
        name = cmd.name or cmd.callback.__name__.replace("_", "-")
        out[name] = cmd.callback
    for group in app.registered_groups:
        for name, fn in config_commands(group.typer_instance).items():
            out[f"{group.name} {name}"] = fn
    return {k: v for k, v in out.items() if k not in set(skip)}


__all__ = ["CONFIGS_ATTR", "Options", "SECTIONS_ATTR", "check_defaults", "config_commands", "field_default", "field_help",
           "with_configs"]
