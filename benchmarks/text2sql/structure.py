"""A query's *structure*: its SQL with every literal abstracted, the unit "unseen in training" counts.

    sql_structure("SELECT COUNT(*) FROM patients WHERE city = 'Tartu' AND age > 60")
    # -> "select count(*) from patients where city = ? and age > ?"
    sql_structure("SELECT name FROM t WHERE id IN (1, 2) LIMIT 3")
    # -> "select name from t where id in(?) limit ?"

String literals, numbers (``LIMIT 3`` too: top-3 and top-5 are one structure) and lists of them
(``IN ('a', 'b')``) become ``?``; comments go; spacing is made canonical (``city='x'`` is ``city = ?``); the rest is case-folded
(identifiers and keywords; SQLite's are case-insensitive). Quoted identifiers (``"name"``) are
kept, being names, not values. Two questions share a structure when a model that had seen one
could answer the other by changing only values.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# One alternation, scanned left to right, so a quote inside a comment or a digit inside a name
# is never mistaken for a literal.
_TOKEN = re.compile(r"""
    (?P<comment>--[^\n]*|/\*.*?(?:\*/|$))
  | (?P<string>'(?:[^']|'')*')
  | (?P<ident>"(?:[^"]|"")*"|`[^`]*`|\[[^\]]*\])
  | (?P<word>[A-Za-z_][\w$]*)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<space>\s+)
  | (?P<op><=|>=|<>|!=|==|\|\|)
  | (?P<other>.)
""", re.S | re.X)
_LIST = re.compile(r"\?(?:\s*,\s*\?)+")


def sql_structure(sql: str) -> str:
    """``sql`` with literals abstracted (see the module docstring)."""
    out: list[str] = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        if kind in ("comment", "space"):
            continue
        elif kind in ("string", "number"):
            # A sign glued to a number is part of the literal: "> -5" and "> 5" are one shape.
            if kind == "number" and out and out[-1] == "-" and _sign_position(out):
                out.pop()
            out.append("?")
        elif kind == "ident":
            out.append(m.group())
        else:
            out.append(m.group().casefold())
    # One space between tokens whatever the source's spacing; none inside parentheses, before a
    # comma or between a word and its parenthesis (``count(*)``, ``in(?)``).
    text = re.sub(r"\( ", "(", re.sub(r" ([),;])", r"\1", " ".join(out)))
    text = re.sub(r"(?<=[\w\"`\]]) \(", "(", text)
    text = re.sub(r" ?\. ?", ".", text)  # qualified names (numbers are ? by now)
    text = _LIST.sub("?", text)
    return text.rstrip(";").rstrip()


class Literal(NamedTuple):
    """A literal in a query: where it is, and its value (a string unescaped, a number as written)."""

    start: int
    end: int
    value: str
    quoted: bool
    """A string literal (``'...'``), else a number."""


def literals(sql: str) -> list[Literal]:
    """The string and number literals of ``sql``, in order (none inside comments or names)."""
    return [Literal(m.start(), m.end(), m.group()[1:-1].replace("''", "'") if m.lastgroup == "string" else m.group(),
                    m.lastgroup == "string")
            for m in _TOKEN.finditer(sql) if m.lastgroup in ("string", "number")]


def _sign_position(out: list[str]) -> bool:
    """Whether the ``-`` just emitted is a sign (after an operator, a comma or a parenthesis)."""
    before = out[-2] if len(out) > 1 else ""
    return not before or before[-1] in "(,=<>+-*/" or before in ("and", "or", "then", "else", "when")


__all__ = ["Literal", "literals", "sql_structure"]
