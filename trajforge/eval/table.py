"""Text and HTML renderings of ``{policy: metrics}`` comparisons.

The text table is made to be read in a terminal or a CI log: a header rule instead of a box, each
interval in one short cell (``85-100%``), and every column but the policy's kept on one line, so a
comparison of policies with names up to ~30 characters fits 100 columns with no header cut or
wrapped (a longer name folds inside its own column).
"""

from __future__ import annotations

import html
from typing import Any

from rich import box
from rich.markup import escape
from rich.table import Table

COLUMNS = ("policy", "tier", "n", "completion", "95% CI", "validity", "95% CI", "avg turns")


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _ci(ci: list[float]) -> str:
    return f"[{_pct(ci[0])}, {_pct(ci[1])}]"


def _short_ci(ci: list[float]) -> str:
    return f"{100 * ci[0]:.0f}-{_pct(ci[1])}"


def rich_table(results: dict[str, Any], title: str = "") -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    for col in COLUMNS:
        left = col in ("policy", "tier")
        table.add_column(col, justify="left" if left else "right", no_wrap=col != "policy",
                         overflow="fold", min_width=len(col))
    for name, m in results.items():
        rows = [("all", m)] + list(m.get("tiers", {}).items())
        for tier, r in rows:
            # Names and tiers come from the store and the command line: text, not rich markup
            # (``run[v2]`` showed as ``run``; ``run[/x]`` raised MarkupError).
            table.add_row(escape(name) if tier == "all" else "", escape(tier), str(r["n"]), _pct(r["completion"]),
                          _short_ci(r["completion_ci95"]), _pct(r["validity"]), _short_ci(r["validity_ci95"]),
                          f"{r['avg_turns']:.2f}")
    return table


def html_report(results: dict[str, Any], title: str, extra: dict[str, Any] | None = None) -> str:
    """A small self-contained HTML page with the comparison table and run facts."""
    rows = []
    for name, m in results.items():
        for tier, r in [("all", m)] + list(m.get("tiers", {}).items()):
            reasons = ", ".join(f"{k}: {v}" for k, v in r.get("fail_reasons", {}).items())
            rows.append(
                f"<tr><td>{html.escape(name)}</td><td>{html.escape(tier)}</td><td>{r['n']}</td>"
                f"<td>{_pct(r['completion'])} {_ci(r['completion_ci95'])}</td>"
                f"<td>{_pct(r['validity'])} {_ci(r['validity_ci95'])}</td>"
                f"<td>{r['avg_turns']:.2f}</td><td>{html.escape(reasons)}</td></tr>")
    facts = "".join(f"<li><b>{html.escape(str(k))}</b>: {html.escape(str(v))}</li>"
                    for k, v in (extra or {}).items())
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:first-child,td:nth-child(2){{text-align:left}}</style>
</head><body><h1>{html.escape(title)}</h1>
<table><tr><th>policy</th><th>tier</th><th>n</th><th>completion (95% CI)</th><th>validity (95% CI)</th>
<th>avg turns</th><th>fail reasons</th></tr>{''.join(rows)}</table><ul>{facts}</ul></body></html>"""
