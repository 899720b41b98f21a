"""StreamParser: parse a generation as it streams in, with any dialect.

It buffers the text and parses the whole buffer, so the result after ``finish()`` is by
construction the one-shot parse, whatever the chunk boundaries (a marker, a multi-byte character or
an escape split in two), and no dialect needs streaming-specific code.

Linear in the length of the stream: chunks are kept as a list and joined when read (appending to
one string copies it every time), ``finish()`` is one parse, and ``snapshot`` re-parses the text
exactly while it is short (``EXACT_SNAPSHOT_CHARS``) and past that only once the text has grown by
an eighth since the last snapshot parse — so a caller that asks for a snapshot after every token
does a geometric series of parses (about 9 parses' worth of the final length) instead of one per
token, which on a long reply is quadratic.

    stream = StreamParser(get_dialect("hermes"), toolset)
    for chunk in chunks:
        stream.feed(chunk)
        stream.snapshot.calls   # calls readable so far (provisional until finish)
    result = stream.finish()
"""

from __future__ import annotations

import codecs

from trajforge.parse.base import Dialect, ParseResult
from trajforge.schema import Toolset

EXACT_SNAPSHOT_CHARS = 4096
"""Up to this length every snapshot is the parse of all the text fed so far."""


class StreamParser:
    """Incremental front-end over ``Dialect.parse``; ``finish()`` equals ``dialect.parse(text)``."""

    def __init__(self, dialect: Dialect, toolset: Toolset):
        self.dialect = dialect
        self.toolset = toolset
        self._chunks: list[str] = []
        self._length = 0
        self._snapshot: ParseResult | None = None
        self._snapshot_at = 0  # length of the text the snapshot parsed
        self._finished: ParseResult | None = None
        self._bytes: codecs.IncrementalDecoder | None = None  # for a stream fed bytes

    @property
    def text(self) -> str:
        """Everything fed so far."""
        if len(self._chunks) > 1:
            self._chunks = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""

    def feed(self, chunk: str | bytes) -> None:
        """Append a piece of the generation: text, or UTF-8 bytes (a character split across two
        byte chunks is joined; invalid sequences become U+FFFD)."""
        if self._finished is not None:
            raise RuntimeError("StreamParser.feed() after finish()")
        if isinstance(chunk, (bytes, bytearray)):
            if self._bytes is None:
                self._bytes = codecs.getincrementaldecoder("utf-8")("replace")
            chunk = self._bytes.decode(bytes(chunk))
        if isinstance(chunk, str) and chunk:
            self._chunks.append(chunk)
            self._length += len(chunk)

    @property
    def snapshot(self) -> ParseResult:
        """Parse of the text so far. A call still being written shows up as ``truncated``; a call
        that looks complete may still change if more text follows (a Llama object, a Hermes call
        without its closing tag), so act only on ``finish()``. Past ``EXACT_SNAPSHOT_CHARS`` it may
        lag the newest eighth of the text (see the module docstring)."""
        grown = self._length - self._snapshot_at
        if self._snapshot is None or (grown and (self._length <= EXACT_SNAPSHOT_CHARS
                                                 or grown * 8 >= self._snapshot_at)):
            self._snapshot = self.dialect.parse(self.text, self.toolset)
            self._snapshot_at = self._length
        return self._snapshot

    def finish(self) -> ParseResult:
        """Final parse of the whole text; calling it again returns the same result."""
        if self._finished is None:
            if self._bytes is not None:  # a character the bytes stopped inside of: U+FFFD
                self.feed(self._bytes.decode(b"", final=True))
            self._finished = self.dialect.parse(self.text, self.toolset)
        return self._finished
