"""Finding a database's values in a question's text: the entities a question names, and its numbers.

    gaz = Gazetteer({"patients.city": ["Tartu", ...], "doctors.name": [...]})
    gaz.find("How many patients live in Tartu?")   # [Mention(26, 31, 'Tartu', 'Tartu', frozenset({'patients.city'}))]

Matching is case-insensitive over whole words (punctuation between words ignored: ``St. Brigid``
is ``st brigid``), longest value first (``type 2 diabetes`` before a bare ``2``), so a value
inside a longer one is not found twice; numbers are the digits left outside every matched value.
Values are looked up by their word sequence in a dict, so a question costs a few dozen lookups
whatever the size of the database.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from typing import NamedTuple

MIN_CHARS = 3
"""Shorter values (``F``, ``M``, ``1``) are too common as words to count as a mention."""
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w]|\.\d)")


class Mention(NamedTuple):
    """A value named in a text: where, as written, as stored, and the columns (labels) holding it."""

    start: int
    end: int
    text: str
    value: str | float | int
    labels: frozenset[str]
    """``table.column`` names (or entity kinds) holding the value; ``NUMBER`` or ``DATE`` for those."""


NUMBER = frozenset({"number"})
DATE = frozenset({"date"})


class Gazetteer:
    """Values by label, found in text (see the module docstring)."""

    def __init__(self, values: dict[str, Iterable[str]]):
        self.labels: dict[str, set[str]] = {}
        self.stored: dict[str, str] = {}  # casefolded → the value as stored (first seen wins)
        for label, vals in values.items():
            for v in vals:
                if isinstance(v, str) and len(v.strip()) >= MIN_CHARS and not _NUMBER.fullmatch(v):
                    key = v.casefold()
                    self.labels.setdefault(key, set()).add(label)
                    self.stored.setdefault(key, v)
        self._by_words = {_words(k): k for k in self.labels}
        self._longest = max((len(w.split()) for w in self._by_words), default=0)

    @classmethod
    def of_database(cls, conn: sqlite3.Connection, max_distinct: int = 5000) -> "Gazetteer":
        """Every text value of every table's text columns (columns with at most ``max_distinct``
        distinct values; dates are not entities)."""
        values: dict[str, list[str]] = {}
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for _, column, ctype, *_ in conn.execute(f'PRAGMA table_info("{table}")'):
                if "TEXT" not in (ctype or "").upper() and (ctype or "") != "":
                    continue
                distinct = [v for (v,) in conn.execute(
                    f'SELECT DISTINCT "{column}" FROM "{table}" LIMIT {max_distinct + 1}') if isinstance(v, str)]
                if len(distinct) <= max_distinct and not all(_DATE.match(v) for v in distinct[:50]):
                    values[f"{table}.{column}"] = distinct
        return cls(values)

    def find(self, text: str) -> list[Mention]:
        """The values and numbers ``text`` names, in order."""
        tokens = list(_WORD.finditer(text))
        found: list[Mention] = []
        i = 0
        while i < len(tokens):
            for n in range(min(self._longest, len(tokens) - i), 0, -1):
                key = self._by_words.get(" ".join(t.group().casefold() for t in tokens[i:i + n]))
                if key is not None:
                    start, end = tokens[i].start(), tokens[i + n - 1].end()
                    found.append(Mention(start, end, text[start:end], self.stored[key], frozenset(self.labels[key])))
                    i += n
                    break
            else:
                i += 1
        for m in _DATE.finditer(text):  # a date is one value, not three numbers
            if not any(f.start <= m.start() < f.end for f in found):
                found.append(Mention(m.start(), m.end(), m.group(), m.group(), DATE))
        taken = [(m.start, m.end) for m in found]
        for m in _NUMBER.finditer(text):
            if not any(a <= m.start() < b for a, b in taken):
                raw = m.group()
                found.append(Mention(m.start(), m.end(), raw, float(raw) if "." in raw else int(raw), NUMBER))
        return sorted(found)


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_WORD = re.compile(r"\w+")


def _words(text: str) -> str:
    return " ".join(_WORD.findall(text.casefold()))

__all__ = ["DATE", "Gazetteer", "MIN_CHARS", "Mention", "NUMBER"]
