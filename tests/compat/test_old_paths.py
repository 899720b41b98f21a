"""Every module path and public name of trajforge 0.1 still imports (moved ones with a warning).

``api_before_redesign.json`` lists them as they were before the one-folder-per-environment
redesign (``list_api.py`` wrote it). A path that moved must warn with ``DeprecationWarning`` and
name where it went; a path that stayed must not warn on import.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from trajforge._compat import MOVED

API = json.loads((Path(__file__).parent / "api_before_redesign.json").read_text())
TRAIN = tuple(m for m in API if m.startswith(("trajforge.train", "trajforge.policies.hf", "trajforge.serve.backend",
                                             "trajforge.cli.train_cmd")))
"""Modules the lead rewrites after this merge (torch-heavy; listed in their own test)."""


def _names(module: str) -> list[str]:
    mod = importlib.import_module(module)
    missing = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in API[module]:
            try:
                getattr(mod, name)
            except AttributeError:
                missing.append(name)
    return missing


@pytest.mark.parametrize("module", [m for m in API if m not in TRAIN])
def test_old_module_path_and_its_names_import(module):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecationWarning)
        importlib.import_module(module)
    assert _names(module) == [], f"{module} lost names"
    if module in MOVED:
        # A fresh interpreter, so the import really runs: it must warn and name the new home.
        code = ("import warnings\nwith warnings.catch_warnings(record=True) as w:\n"
                "    warnings.simplefilter('always', DeprecationWarning)\n"
                f"    import {module}\nprint([str(x.message) for x in w])")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
        assert f"{module} is deprecated" in out and MOVED[module][0] in out, out


def test_moved_names_warn_and_name_their_new_home():
    import trajforge.envs.sql as sql

    with pytest.warns(DeprecationWarning, match="trajforge.envs.answers.answers_match"):
        assert sql.answers_match("7", 7)
    with pytest.warns(DeprecationWarning, match="trajforge.envs.sql.env.SqlResult"):
        assert sql.QueryResult._fields == ("query", "rows", "complete")
    import trajforge.tasks as tasks

    with pytest.warns(DeprecationWarning, match="env_spec"):
        assert set(tasks.GENERATORS) >= {"sql", "travel", "web", "code"}


def test_a_name_that_never_existed_is_still_an_attribute_error():
    import trajforge.tasks.sql as old  # noqa: F401 - the moved module itself

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        old.nope  # noqa: B018
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("trajforge.tasks.nope")


@pytest.mark.slow
@pytest.mark.parametrize("module", TRAIN)
def test_training_module_paths_import(module):
    assert _names(module) == [], f"{module} lost names"
