"""The layers hold: imports point one way, and collection and grading never load torch.

The allowed arrows are DESIGN.md's (folders are layers), with the rule for environment folders:
``envs/<name>/`` is a plugin whose generator modules (``tasks``, ``byo``, ``templates``, ``plans``,
``tiering``) build on the generic ``trajforge.tasks``, while the environment itself (``env.py``,
its world) and the rest of ``envs`` stay below ``tasks``; the generic ``tasks`` never imports a
particular environment (it reaches them through the registry).

Every import counts, including those inside functions (lazy imports are still arrows), except
``if TYPE_CHECKING:`` blocks, which never run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import trajforge

ROOT = Path(trajforge.__file__).parent
BELOW_HARNESS = {"schema", "parse", "envs", "policies"}
ALLOWED: dict[str, set[str]] = {
    "schema": set(),
    "parse": {"schema"},
    "envs": {"schema", "parse"},
    "tasks": {"schema", "parse", "envs"},
    "policies": {"schema", "parse"},
    "harness": BELOW_HARNESS,
    "grade": BELOW_HARNESS | {"harness"},
    "store": BELOW_HARNESS | {"harness"},
    "train": BELOW_HARNESS | {"harness", "grade", "store", "tasks"},
    "eval": BELOW_HARNESS | {"harness", "grade", "store", "tasks"},
    "serve": BELOW_HARNESS | {"harness", "grade", "store", "tasks", "train", "eval"},
    "cli": BELOW_HARNESS | {"harness", "grade", "store", "tasks", "train", "eval", "serve"},
}
SHARED = {"_compat", "_version", "_jsonl"}
"""Root modules every layer may use (deprecation shims, the version stamp, capped JSONL reading)."""
GENERATOR_MODULES = {"tasks", "byo", "templates", "plans", "tiering"}
TORCH_FREE = ("schema", "parse", "envs", "tasks", "harness", "store", "grade")
HEAVY = ("torch", "transformers", "peft")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path) -> set[str]:
    """Every ``trajforge.*`` module an import statement in ``path`` names, outside
    ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for block in ast.walk(tree)
               if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING")
               for stmt in block.body for n in ast.walk(stmt)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {n for n in found if n == "trajforge" or n.startswith("trajforge.")}


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<front door>"


def violations() -> list[str]:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        mod = module_name(path)
        src = layer_of(mod)
        for target in runtime_imports(path):
            dst = layer_of(target)
            if dst == src or dst in SHARED or src in SHARED:
                continue
            parts = mod.split(".")
            plugin = src == "envs" and len(parts) == 4 and parts[3] in GENERATOR_MODULES and dst == "tasks"
            if src == "<front door>" or dst == "<front door>" or (dst not in ALLOWED.get(src, set()) and not plugin):
                bad.append(f"{mod} imports {target} ({src} -> {dst})")
        if src == "tasks":
            for target in runtime_imports(path):
                t = target.split(".")
                if t[:2] == ["trajforge", "envs"] and len(t) > 2 and (ROOT / "envs" / t[2]).is_dir():
                    bad.append(f"{mod} imports the environment {target}; generic task code uses the registry")
    return sorted(set(bad))


def test_imports_follow_the_allowed_arrows():
    assert violations() == []


def test_the_arrow_check_catches_an_upward_import(tmp_path, monkeypatch):
    # The check must be able to fail: a schema module importing the harness is reported.
    fake = tmp_path / "trajforge"
    (fake / "schema").mkdir(parents=True)
    (fake / "schema" / "bad.py").write_text("from trajforge.harness import run_episodes\n")
    (fake / "tasks").mkdir()
    (fake / "tasks" / "worse.py").write_text("def f():\n    from trajforge.envs.sql import SqlEnv\n")
    (fake / "envs" / "sql").mkdir(parents=True)
    (fake / "envs" / "sql" / "env.py").write_text("import trajforge.tasks.templates\n")
    (fake / "envs" / "sql" / "tasks.py").write_text("import trajforge.tasks.templates\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", fake)
    found = violations()
    assert any("trajforge.schema.bad imports trajforge.harness" in v for v in found)
    assert any("trajforge.tasks.worse imports the environment trajforge.envs.sql" in v for v in found)
    assert any("trajforge.envs.sql.env imports trajforge.tasks.templates" in v for v in found)
    assert not any("trajforge.envs.sql.tasks" in v for v in found)  # a generator module may


def test_collection_and_grading_layers_never_load_torch():
    # A fresh interpreter imports every module of the torch-free layers, then the front door and
    # its non-training names, and reports which heavy packages got loaded (and by which module).
    script = f"""
import importlib, pkgutil, sys
heavy = {HEAVY!r}
import trajforge
for layer in {TORCH_FREE!r}:
    pkg = importlib.import_module("trajforge." + layer)
    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(info.name)
        loaded = [h for h in heavy if h in sys.modules]
        if loaded:
            print(info.name, loaded); sys.exit(1)
for name in ("collect", "evaluate", "compare", "synthesize", "make_policy", "TrajectoryStore", "migrate"):
    getattr(trajforge, name)
loaded = [h for h in heavy if h in sys.modules]
print("front door", loaded)
sys.exit(1 if loaded else 0)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("name", ["train_sft", "SFTConfig"])
def test_training_names_load_lazily(name):
    # The names are listed by the front door but only imported when asked for.
    assert name in trajforge.__all__ and name in dir(trajforge)
