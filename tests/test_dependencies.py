"""pyproject.toml declares exactly what the code imports: every third-party module imported in
trajforge/, tests/ or benchmarks/ belongs to a declared distribution (core or an extra), and every
declared distribution is imported somewhere — except the few used without an import statement,
each listed below with the reason."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
USED_WITHOUT_IMPORT = {
    "gguf": "transformers reads the embedded model's GGUF file with it (policies/models.py, gguf_file=)",
    "pytest-xdist": "a pytest plugin: make test runs the suite with -n (Makefile)",
}
NOT_DISTRIBUTIONS = {
    "careless": "a module tests/train/test_device_audit.py writes into tmp_path and imports",
}


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def declared() -> frozenset[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"]) + [r for extra in project["optional-dependencies"].values() for r in extra]
    names = {canon(re.match(r"[A-Za-z0-9._-]+", r).group(0)) for r in reqs}
    return frozenset(names - {"trajforge"})


def imported_modules() -> dict[str, str]:
    """Top-level third-party module → a file that imports it."""
    local = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} | {"trajforge", "tests", "benchmarks"}
    found: dict[str, str] = {}
    for folder in ("trajforge", "tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    mods = [node.module]
                else:
                    continue
                for mod in mods:
                    top = mod.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in local and top not in NOT_DISTRIBUTIONS:
                        found.setdefault(top, str(path.relative_to(ROOT)))
    return found


@functools.cache
def installed() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distribution_of(module: str) -> str:
    # Not installed here (bitsandbytes on a CPU machine): its distribution has the module's name.
    dists = installed().get(module, [module])
    return canon(dists[0])


def test_every_imported_distribution_is_declared():
    undeclared = {mod: where for mod, where in imported_modules().items() if distribution_of(mod) not in declared()}
    assert undeclared == {}


def test_every_declared_distribution_is_imported():
    used = {distribution_of(mod) for mod in imported_modules()}
    unused = declared() - used - set(USED_WITHOUT_IMPORT)
    assert unused == set()
