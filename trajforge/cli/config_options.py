"""CLI options generated from a pydantic config, so a default and its help live in one place.

    @config_command(app, "sft", SFTConfig, exclude={"dialect"})
    def sft(cfg: SFTConfig, data: Path = typer.Option(...), ...) -> None: ...

Every field of the config becomes ``--field-name`` (bools ``--x/--no-x``, lists repeatable) with
the field's default and its docstring as help; the command's own parameters (paths, switches that
are not training settings) stay as written. ``--config FILE.toml`` reads settings from a file
(top-level keys are field names); options given on the command line win over the file. The
function receives the validated config as ``cfg``; a bad value is reported by field name.
"""

from __future__ import annotations

import functools
import inspect
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, Callable, Literal, Optional

import typer
from pydantic import BaseModel, ValidationError


def option_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _scalar(annotation) -> tuple[Any, bool] | None:
    """(python type typer understands, is_list) for a field annotation; None if not a CLI type."""
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _scalar(args[0])
    if origin is Literal:
        return str, False
    if origin is list and args and args[0] in (str, int, float):
        return args[0], True
    if annotation in (int, float, str, bool):
        return annotation, False
    return None


def config_parameters(config: type[BaseModel], exclude: set[str] = frozenset()) -> list[inspect.Parameter]:
    """One keyword parameter (a typer option) per CLI-expressible field of ``config``."""
    params = []
    for name, field in config.model_fields.items():
        kind = _scalar(field.annotation)
        if name in exclude or kind is None:
            continue
        typ, many = kind
        default = field.get_default(call_default_factory=True)
        help_ = (field.description or "").split("\n\n")[0]
        literal = _literal_values(field.annotation)
        if literal:
            help_ += f" (one of: {', '.join(map(str, literal))})"
        if typ is bool:
            decls = [f"{option_name(name)}/--no-{name.replace('_', '-')}"]
        else:
            decls = [option_name(name)]
        annotation = (Optional[list[typ]] if many else Optional[typ]) if default is None or many else typ
        opt = typer.Option(default if not many else None, *decls, help=help_, show_default=not many)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=annotation))
    return params


def _literal_values(annotation) -> tuple:
    if typing.get_origin(annotation) is Literal:
        return typing.get_args(annotation)
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is Literal:
            return typing.get_args(arg)
    return ()


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise typer.BadParameter(f"config file {path} does not exist", param_hint="--config") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise typer.BadParameter(f"{path} is not valid TOML: {e}", param_hint="--config") from None


def build_config(config: type[BaseModel], values: dict[str, Any], file: Path | None,
                 given: set[str]) -> BaseModel:
    """The config from ``--config FILE`` overlaid with the options given on the command line."""
    data = read_config_file(file) if file else {}
    unknown = sorted(set(data) - set(config.model_fields))
    if unknown:
        raise typer.BadParameter(f"{file}: unknown setting(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(config.model_fields)}", param_hint="--config")
    for name, value in values.items():
        if name in given:  # options left out keep the file's value, else the config's default
            data[name] = list(value) if isinstance(value, tuple) else value
    try:
        return config.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{option_name(str(err['loc'][0])) if err['loc'] else 'config'}: {err['msg']}"
                             for err in e.errors())
        raise typer.BadParameter(problems) from None


def config_command(app: typer.Typer, name: str, config: type[BaseModel], exclude: set[str] = frozenset(),
                   **command_kw) -> Callable:
    """Register ``fn`` as ``app``'s command ``name`` with ``config``'s fields as options."""

    def register(fn: Callable) -> Callable:
        hints = typing.get_type_hints(fn)  # the command module's string annotations, resolved
        own = [p.replace(annotation=hints.get(p.name, p.annotation))
               for p in inspect.signature(fn).parameters.values() if p.name != "cfg"]
        fields = [p for p in config_parameters(config, exclude | {p.name for p in own})]
        file_opt = inspect.Parameter("config_file", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[Path],
                                     default=typer.Option(None, "--config", help="TOML file of settings "
                                                          "(field names as keys); command-line options win"))
        field_names = {p.name for p in fields}

        @functools.wraps(fn)
        def command(**kwargs):
            ctx = kwargs.pop("_ctx")
            # By name: typer vendors its own click, whose ParameterSource is not click's.
            given = {n for n in field_names
                     if getattr(ctx.get_parameter_source(n), "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")}
            values = {n: kwargs.pop(n) for n in field_names}
            cfg = build_config(config, values, kwargs.pop("config_file"), given)
            return fn(cfg=cfg, **kwargs)

        ctx_param = inspect.Parameter("_ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
        params = [ctx_param] + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + fields + [file_opt]
        command.__signature__ = inspect.Signature(params)
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__  # typer must read the generated signature, not fn's
        app.command(name, **command_kw)(command)
        return fn

    return register
