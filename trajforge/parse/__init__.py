"""Tool-call dialects: render and parse with one object."""

from __future__ import annotations

from trajforge.parse.base import Dialect, ParseResult
from trajforge.parse.hermes import HermesDialect

DIALECTS: dict[str, type[Dialect]] = {HermesDialect.name: HermesDialect}


def get_dialect(name: str) -> Dialect:
    if name not in DIALECTS:
        raise KeyError(f"unknown dialect {name!r}; known: {sorted(DIALECTS)}")
    return DIALECTS[name]()


__all__ = ["DIALECTS", "Dialect", "HermesDialect", "ParseResult", "get_dialect"]
