"""StreamParser: parse a generation as it streams in, with any dialect.

It buffers the text and re-parses the whole buffer on every chunk. That is quadratic in the
number of chunks, and for assistant turns (a few KB) it does not matter; in exchange the result
after ``finish()`` is by construction the one-shot parse, whatever the chunk boundaries (a marker,
a multi-byte character or an escape split in two), and no dialect needs streaming-specific code.

    stream = StreamParser(get_dialect("hermes"), toolset)
    for chunk in chunks:
        stream.feed(chunk)
        stream.snapshot.calls   # calls readable so far (provisional until finish)
    result = stream.finish()
"""

from __future__ import annotations

from trajforge.parse.base import Dialect, ParseResult
from trajforge.schema import Toolset


class StreamParser:
    """Incremental front-end over ``Dialect.parse``; ``finish()`` equals ``dialect.parse(text)``."""

    def __init__(self, dialect: Dialect, toolset: Toolset):
        self.dialect = dialect
        self.toolset = toolset
        self._text = ""
        self._snapshot: ParseResult | None = None
        self._finished: ParseResult | None = None

    @property
    def text(self) -> str:
        """Everything fed so far."""
        return self._text

    def feed(self, chunk: str) -> None:
        if self._finished is not None:
            raise RuntimeError("StreamParser.feed() after finish()")
        if chunk:
            self._text += chunk
            self._snapshot = None

    @property
    def snapshot(self) -> ParseResult:
        """Parse of the text so far. A call still being written shows up as ``truncated``; a call
        that looks complete may still change if more text follows (a Llama object, a Hermes call
        without its closing tag), so act only on ``finish()``."""
        if self._snapshot is None:
            self._snapshot = self.dialect.parse(self.text, self.toolset)
        return self._snapshot

    def finish(self) -> ParseResult:
        """Final parse of the whole text; calling it again returns the same result."""
        if self._finished is None:
            self._finished = self.dialect.parse(self.text, self.toolset)
        return self._finished
