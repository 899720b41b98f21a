"""Deprecated import paths of trajforge 0.1, kept working (with a ``DeprecationWarning``) in 0.2.

Two kinds of move are covered:

- a module that moved (``trajforge.tasks.sql`` is now ``trajforge.envs.sql.tasks``): ``MOVED``
  maps the old path to the modules its names now live in; importing the old path warns and gives
  a module whose attributes are looked up there;
- a name that moved out of a module that still exists (``trajforge.tasks.GENERATORS``): that
  module ends with ``__getattr__ = moved_names(__name__, {...})``.

``tests/compat/test_old_paths.py`` imports every module path and name of 0.1 (the list in
``tests/compat/api_before_redesign.json``). Remove this module, and the ``__getattr__`` hooks,
in 0.3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

MOVED: dict[str, tuple[str, ...]] = {
    "trajforge.tasks.sql": ("trajforge.envs.sql.tasks", "trajforge.envs.sql.env", "trajforge.envs.sql.results",
                            "trajforge.tasks.templates",
                            "trajforge.envs.sqldb", "trajforge.tasks.verify", "trajforge.tasks.pool",
                            "trajforge.schema"),
    "trajforge.tasks.byo_sql": ("trajforge.envs.sql.byo", "trajforge.envs.sql.results", "trajforge.tasks.pool",
                                "trajforge.schema"),
    "trajforge.tasks.travel": ("trajforge.envs.travel.tasks", "trajforge.envs.travel.plans", "trajforge.envs.travel.formats",
                               "trajforge.envs.travel.env",
                               "trajforge.envs.travel.catalog", "trajforge.tasks.templates",
                               "trajforge.tasks.verify", "trajforge.tasks.splits", "trajforge.tasks.pool",
                               "trajforge.schema"),
    "trajforge.tasks.web": ("trajforge.envs.web.tasks", "trajforge.envs.web.templates", "trajforge.envs.web.env",
                            "trajforge.envs.web.shop.catalog", "trajforge.envs.web.shop.goals",
                            "trajforge.tasks.templates", "trajforge.tasks.verify", "trajforge.tasks.pool",
                            "trajforge.schema"),
    "trajforge.tasks.web_templates": ("trajforge.envs.web.templates", "trajforge.tasks.templates",
                                      "trajforge.envs.web.env", "trajforge.envs.web.shop.catalog",
                                      "trajforge.envs.web.shop.goals", "trajforge.envs.web.shop.site",
                                      "trajforge.envs.web.shop.state", "trajforge.schema"),
    "trajforge.tasks.code": ("trajforge.envs.code.tasks", "trajforge.envs.code.templates", "trajforge.envs.code.hidden",
                             "trajforge.envs.code.env",
                             "trajforge.tasks.templates",
                             "trajforge.tasks.verify", "trajforge.tasks.pool", "trajforge.schema"),
    "trajforge.harness.collect": ("trajforge.harness.concurrent", "trajforge.harness.executor",
                                  "trajforge.harness.events", "trajforge.harness.loop", "trajforge.schema"),
    "trajforge.envs.travel_catalog": ("trajforge.envs.travel.catalog",),
    "trajforge.envs.webshop": ("trajforge.envs.web.shop",),
    "trajforge.envs.webshop.catalog": ("trajforge.envs.web.shop.catalog",),
    "trajforge.envs.webshop.goals": ("trajforge.envs.web.shop.goals",),
    "trajforge.envs.webshop.page": ("trajforge.envs.web.shop.page",),
    "trajforge.envs.webshop.server": ("trajforge.envs.web.shop.server",),
    "trajforge.envs.webshop.site": ("trajforge.envs.web.shop.site",),
    "trajforge.envs.webshop.state": ("trajforge.envs.web.shop.state",),
}
"""Old module path → the modules (first match wins) where its names live now."""


ENV_MODULE_NAMES: dict[str, str] = {
    "Environment": "trajforge.envs.base", "ToolError": "trajforge.envs.base", "Verdict": "trajforge.schema",
    "Task": "trajforge.schema"}
"""Names every 0.1 environment module re-exported from where they are defined."""


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated and will be removed in trajforge 0.3; use {new}",
                  DeprecationWarning, stacklevel=3)


def moved_names(module: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for names that moved out of ``module``: ``{name: new module}``,
    or ``{name: "new.module:new_name"}`` for a name that was renamed too."""
    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        target, _, new_name = names[name].partition(":")
        _warn(f"{module}.{name}", f"{target}.{new_name or name}")
        return getattr(importlib.import_module(target), new_name or name)
    return __getattr__


class _MovedModule(types.ModuleType):
    """Stands at an old module path; every attribute comes from the modules its names moved to."""

    def __init__(self, name: str, targets: Sequence[str]):
        super().__init__(name, f"Deprecated: moved to {', '.join(targets[:1])}.")
        self.__targets = tuple(targets)
        self.__path__: list[str] = []  # a package too, so old submodule paths resolve

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        for target in self.__targets:
            mod = importlib.import_module(target)
            if hasattr(mod, attr):
                return getattr(mod, attr)
        raise AttributeError(f"module {self.__name__!r} (moved to {self.__targets[0]}) has no attribute {attr!r}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers imports of the old module paths in ``MOVED`` (and only those)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        _warn(spec.name, MOVED[spec.name][0])
        return _MovedModule(spec.name, MOVED[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module's attributes are looked up on use."""


def install() -> None:
    """Put the finder for old module paths on ``sys.meta_path`` (once; after the real finders, so
    an existing module always wins)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
