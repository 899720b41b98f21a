"""``trajforge parse``: read one raw model output on stdin, print what a dialect makes of it.

    echo '<tool_call>{"name": "run_sql", "arguments": {"query": "SELECT 1"}}</tool_call>' \
        | trajforge parse --dialect hermes --tools tools.json

TOOLS.json is an OpenAI-style ``tools`` list. ``--dialect auto`` picks the dialect whose call
markers appear in the text. With ``--dialect openai`` stdin is an API response as JSON: the whole
response, one choice, the assistant message or its ``tool_calls`` list (``finish_reason: length``
makes an unfinished call ``truncated``). The output is one JSON object: calls (with their ``id``
where the input had one), errors, repairs, text (and the dialect used).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from trajforge.parse import DIALECTS, get_dialect, guess_dialect
from trajforge.schema import Toolset


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def parse(
    dialect: str = typer.Option("auto", help=f"one of {', '.join(sorted(DIALECTS))}, or auto"),
    tools: Path = typer.Option(..., help="JSON file with an OpenAI-style list of function tools"),
) -> None:
    """Parse raw model output from stdin into tool calls, typed errors and repairs (JSON)."""
    try:
        toolset = Toolset.from_openai(json.loads(tools.read_text()))
    except (OSError, ValueError, TypeError, AttributeError) as e:
        _fail(f"cannot read tools from {tools}: {e}")
    text = sys.stdin.read()
    if dialect == "auto":
        chosen = guess_dialect(text)
    elif dialect in DIALECTS:
        chosen = get_dialect(dialect)
    else:
        _fail(f"unknown dialect {dialect!r}; known: {', '.join(sorted(DIALECTS))}, auto")
    result = chosen.parse(text, toolset)
    typer.echo(json.dumps({
        "dialect": chosen.name,
        "calls": [{"name": c.name, "arguments": c.arguments} | ({"id": c.id} if c.id else {})
                  for c in result.calls],
        "errors": [{"kind": e.kind, "message": e.message} for e in result.errors],
        "repairs": [r.model_dump() for r in result.repairs],
        "text": result.text,
    }, ensure_ascii=False))
