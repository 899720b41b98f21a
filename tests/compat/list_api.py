"""Write the public names of every trajforge module (the API users may import from each path).

It was run on the tree before the one-folder-per-environment redesign, and
``api_before_redesign.json`` is its output: ``test_old_paths.py`` checks that every module path
and name in it still imports. Run: ``python tests/compat/list_api.py > FILE``.

A name counts when it is public (no leading underscore) and is neither a module, a ``__future__``
feature, nor something imported from outside trajforge (``Any``, ``Path``, ``BaseModel``...);
plain values (constants, type aliases such as ``Tier``) count wherever they stand.
"""

from __future__ import annotations

import __future__
import importlib
import inspect
import json
import pkgutil
import typing

import trajforge


def _foreign(name: str, obj: object) -> bool:
    if obj is getattr(typing, name, None):
        return True
    origin = getattr(obj, "__module__", None)
    if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return not (origin or "").startswith("trajforge")
    return False


def public_names(module) -> list[str]:
    return sorted(name for name, obj in vars(module).items()
                  if not name.startswith("_") and not inspect.ismodule(obj)
                  and not isinstance(obj, __future__._Feature) and not _foreign(name, obj))


def main() -> None:
    out = {info.name: public_names(importlib.import_module(info.name))
           for info in pkgutil.walk_packages(trajforge.__path__, "trajforge.")}
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
