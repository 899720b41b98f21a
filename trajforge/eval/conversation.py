"""One episode as an HTML conversation: each turn's text, tool calls with arguments, repairs, parse
errors, tool results, timings and the episode's outcome and rewards.

Shared by the report (flipped tasks) and the viewer (its API sends this HTML), so an episode looks
the same in both and the escaping lives in one place. Everything that came from a model, a tool or a
task is untrusted: it goes through ``html.escape`` and nowhere else. The classes used here are styled
by ``static/conversation.css``.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

from trajforge.schema import Message, Step, ToolResult, Trajectory


def esc(value: Any) -> str:
    """Escaped text of any value (quotes too, so it is safe inside attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def static_text(name: str) -> str:
    """A file from ``trajforge/eval/static/`` (CSS, JS, the viewer page)."""
    return resources.files("trajforge.eval").joinpath("static", name).read_text(encoding="utf-8")


def seconds(s: float) -> str:
    """Human duration: ``850 µs``, ``12 ms``, ``1.24 s``."""
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.0f} ms"
    return f"{s:.2f} s"


def _pre(text: str, cls: str = "") -> str:
    return f'<pre class="{cls}">{esc(text)}</pre>' if text else ""


def _outcome(traj: Trajectory) -> str:
    o = traj.outcome
    if o is None:
        return '<span class="badge tier-ungraded">ungraded</span>'
    parts = [f'<span class="badge tier-{esc(o.tier)}">{esc(o.tier)}</span>']
    if o.fail_reason:
        parts.append(f'<span class="badge reason">{esc(o.fail_reason)}</span>')
    v = traj.verdict
    if v is not None and v.answer is not None:
        parts.append(f'<span class="submitted">submitted <code>{esc(json.dumps(v.answer, ensure_ascii=False, default=str))}</code>'
                     f' ({"accepted" if v.correct else "rejected"})</span>')
    if v is not None and v.milestones:
        parts.append(f'<span class="milestones">milestones: {esc(", ".join(v.milestones))}</span>')
    return " ".join(parts)


def _rewards(traj: Trajectory) -> str:
    r = traj.reward
    if r is None:
        return ""
    names = ("completion", "step", "efficiency", "violation")
    head = "".join(f"<th>{n} (×{w:g})</th>" for n, w in zip(names, r.weights)) + "<th>total</th>"
    cells = "".join(f"<td>{getattr(r, n):.3g}</td>" for n in names) + f"<td><b>{r.total:.3g}</b></td>"
    return f'<table class="rewards"><tr>{head}</tr><tr>{cells}</tr></table>'


def _head(traj: Trajectory) -> str:
    facts = [("env", traj.env), ("tier", traj.tier), ("split", traj.split), ("dialect", traj.dialect),
             ("end", traj.end), ("turns", len(traj.steps)), ("wall", seconds(traj.wall_s))]
    if not traj.executed:
        facts.append(("executed", "no (imported)"))
    meta = " · ".join(f"{k} <b>{esc(v)}</b>" for k, v in facts if v != "")
    return (f'<header class="ep-head"><div class="ep-title"><code>{esc(traj.task_id)}</code> · policy '
            f'<b>{esc(traj.policy)}</b> · sample {traj.sample}</div><div class="ep-meta">{meta}</div>'
            f'<div class="ep-outcome">{_outcome(traj)}</div>{_rewards(traj)}</header>')


def _assistant(m: Message, step: Step | None, turn: int) -> str:
    timing = f" · gen {seconds(step.gen_s)} · tool {seconds(step.tool_s)}" if step else ""
    out = [f'<div class="turn-head">turn {turn}{timing}</div>', '<div class="msg assistant">']
    calls = step.calls if step is not None else m.tool_calls
    raw = step.raw if step is not None else (m.raw or "")
    failed = step is not None and step.errors and not step.calls
    if not failed:
        out.append(_pre(m.content, "text"))
    for c in calls:
        args = json.dumps(c.arguments, indent=2, ensure_ascii=False)
        out.append(f'<div class="call"><span class="label">call</span> <code class="tool-name">{esc(c.name)}'
                   f'</code>{_pre(args, "args")}</div>')
    if step is not None and step.repairs:
        items = "".join(f"<li><b>{esc(r.kind)}</b> {esc(r.detail)}</li>" for r in step.repairs)
        out.append(f'<div class="repairs"><span class="label">repaired</span><ul>{items}</ul></div>')
    if step is not None and step.errors:
        items = "".join(f"<li><b>{esc(e.kind)}</b>{' (' + esc(e.tool) + ')' if e.tool else ''}: "
                        f"{esc(e.message)}</li>" for e in step.errors)
        out.append(f'<div class="errors"><span class="label">parse errors</span><ul>{items}</ul></div>')
    if raw:
        # A turn with no valid call shows what the model wrote in full; otherwise it is one click away.
        out.append(f'<details class="raw"{" open" if failed else ""}><summary>raw output</summary>'
                   f'{_pre(raw, "raw-text")}</details>')
    out.append("</div>")
    return "".join(out)


def _tool(m: Message, result: ToolResult | None) -> str:
    if result is None and m.tool_call_id is None:
        # Error feedback the harness sent back for a call that was never dispatched.
        return (f'<div class="msg feedback"><div class="role">feedback to the model · {esc(m.name)}</div>'
                f'{_pre(m.content, "text")}</div>')
    status, cls = "", "tool"
    if result is not None:
        ok = "ok" if result.ok else f"error {result.error or ''}".strip()
        status = f" · {esc(ok)} · {seconds(result.elapsed_s)}" + (" · env fault" if result.fault else "")
        cls += " ok" if result.ok else " bad"
    return (f'<div class="msg {cls}"><div class="role">tool result · <code>{esc(m.name)}</code>{status}</div>'
            f'{_pre(m.content, "text")}</div>')


def conversation_html(traj: Trajectory, anchor: str | None = None) -> str:
    """The episode as one ``<article>``; ``anchor`` becomes its id (for in-page links)."""
    ident = f' id="{esc(anchor)}"' if anchor else ""
    out = [f'<article class="episode"{ident}>', _head(traj)]
    turn, results, k = -1, [], 0
    for m in traj.messages:
        if m.role == "system":
            out.append(f'<details class="msg system"><summary>system prompt ({len(m.content)} chars)</summary>'
                       f'{_pre(m.content, "text")}</details>')
        elif m.role == "user":
            out.append(f'<div class="msg user"><div class="role">user</div>{_pre(m.content, "text")}</div>')
        elif m.role == "assistant":
            turn += 1
            step = traj.steps[turn] if turn < len(traj.steps) else None
            results, k = (step.results if step else []), 0
            out.append(_assistant(m, step, turn))
        else:
            # The harness appends a turn's results first (in call order), then its error feedback.
            result = results[k] if k < len(results) else None
            k += 1
            out.append(_tool(m, result))
    out.append("</article>")
    return "".join(out)
