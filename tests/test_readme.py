"""The README's layout section matches the tree: every folder and module is in it, and every
folder it names exists."""

from __future__ import annotations

import re
from pathlib import Path

import trajforge

ROOT = Path(trajforge.__file__).parent
README = ROOT.parent / "README.md"


def layout() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Layout"):]
    return section[section.index("```") + 3:section.index("```", section.index("```") + 3)]


def test_every_package_and_module_is_in_the_layout():
    block = layout()
    words = set(re.findall(r"[A-Za-z_][\w.]*", block))
    missing = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "__init__.py":
            if path.parent != ROOT and f"{path.parent.name}/" not in block:
                missing.append(f"{path.parent.relative_to(ROOT)}/")
        elif path.stem not in words and path.name not in words:
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []


def test_every_folder_the_layout_names_exists():
    folders = re.findall(r"(?<![\w./])([a-z_]+)/(?=[\s(])", layout())
    trees = (ROOT, ROOT.parent / "tests")
    known = {p.name for tree in trees for p in tree.rglob("*") if p.is_dir() and p.name != "__pycache__"}
    known |= {"trajforge", "benchmarks", "tests"}
    assert sorted(set(folders) - known) == []
