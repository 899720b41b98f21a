"""The report's figures as inline PNG data URIs (matplotlib, Agg, no display, no pyplot state).

Figures are built on ``matplotlib.figure.Figure`` with an Agg canvas rather than through pyplot,
so making a report never switches a caller's backend or leaks figures, and works from any thread.
Margins are set in inches instead of by a layout engine: constrained/tight layout draws each
figure twice, which was most of the report's time (benchmarks/report.py); histograms are one
filled step outline per policy rather than a patch per bin for the same reason.
"""

from __future__ import annotations

import base64
import io
from typing import Sequence

from trajforge.eval.metrics import wilson

REWARD_PARTS = ("completion", "step", "efficiency", "violation", "total")
_PALETTE = ("#8c8c8c", "#2f6fd0", "#e08a1e", "#3c9a4a", "#b04ac9", "#c93c3c", "#17a3a3", "#8a6d3b")


def _figure(width: float, height: float, left: float = 0.7, right: float = 0.2, bottom: float = 0.55,
            top: float = 0.35, wspace: float = 0.25):
    """A figure ``width`` × ``height`` inches with the given margins (inches) around its axes."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:  # matplotlib ships in the `train` extra
        raise RuntimeError("trajforge report draws its plots with matplotlib: pip install 'trajforge[train]'") from e
    fig = Figure(figsize=(width, height), dpi=90)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=wspace)
    return fig


def png(fig) -> str:
    """``data:image/png;base64,...`` of a figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _plain(text: str) -> str:
    """``text`` drawn as written: matplotlib reads ``$...$`` as math, and a name such as ``$\\x^$``
    (a policy, env or fail reason) made it raise while drawing, so no report was written."""
    return str(text).replace("$", r"\$")


def colors(policies: Sequence[str]) -> dict[str, str]:
    """One stable colour per policy, in report order (before grey, after blue)."""
    return {p: _PALETTE[i % len(_PALETTE)] for i, p in enumerate(policies)}


def rate_bars(groups: Sequence[str], counts: dict[str, list[tuple[int, int]]], title: str,
              palette: dict[str, str]) -> str:
    """Grouped bars of k/n per group and policy, with 95% Wilson intervals as error bars."""
    fig = _figure(max(4.5, 1.1 * len(groups) * max(1, len(counts)) ** 0.5 + 2), 3.2)
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(counts))
    bars = []
    for i, (policy, kn) in enumerate(counts.items()):
        xs = [g + (i - (len(counts) - 1) / 2) * width for g in range(len(groups))]
        vals = [k / n if n else 0.0 for k, n in kn]
        cis = [wilson(k, n) for k, n in kn]
        err = [[max(0.0, v - lo) for v, (lo, _) in zip(vals, cis)], [max(0.0, hi - v) for v, (_, hi) in zip(vals, cis)]]
        bars.append(ax.bar(xs, vals, width, yerr=err, capsize=3, color=palette[policy]))
    ax.set_xticks(range(len(groups)), [_plain(g) for g in groups])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("completion")
    ax.set_title(_plain(title))
    # Handles and labels given explicitly: the automatic legend leaves out labels starting with "_".
    ax.legend(bars, [_plain(p) for p in counts], fontsize=8)
    return png(fig)


def reason_bars(reasons: Sequence[str], counts: dict[str, list[int]], palette: dict[str, str]) -> str:
    """Horizontal grouped bars: episodes per fail_reason and policy."""
    longest = max((len(r) for r in reasons), default=0)
    fig = _figure(6.5 + 0.07 * longest, 1.1 + 0.32 * len(reasons) * max(1, len(counts)), left=0.3 + 0.075 * longest)
    ax = fig.add_subplot()
    height = 0.8 / max(1, len(counts))
    bars = []
    for i, (policy, ns) in enumerate(counts.items()):
        ys = [r + (i - (len(counts) - 1) / 2) * height for r in range(len(reasons))]
        bars.append(ax.barh(ys, ns, height, color=palette[policy]))
    ax.set_yticks(range(len(reasons)), [_plain(r) for r in reasons])
    ax.invert_yaxis()
    ax.set_xlabel("failed episodes")
    ax.set_title("fail reasons")
    ax.legend(bars, [_plain(p) for p in counts], fontsize=8)
    return png(fig)


def reward_hists(values: dict[str, dict[str, list[float]]], palette: dict[str, str]) -> str:
    """One panel per reward component: each policy's distribution over its episodes."""
    fig = _figure(13, 2.8, left=0.6, wspace=0.3)
    axes = fig.subplots(1, len(REWARD_PARTS))
    for ax, part in zip(axes, REWARD_PARTS):
        data = {p: v[part] for p, v in values.items() if v[part]}
        lo = min((min(d) for d in data.values()), default=0.0)
        hi = max((max(d) for d in data.values()), default=1.0)
        if hi - lo < 1e-9:
            lo, hi = lo - 0.5, hi + 0.5
        shown = {}  # after the loop: the last panel's (total), which carries the legend
        for policy, d in data.items():
            shown[policy] = ax.hist(d, bins=20, range=(lo, hi), alpha=0.5, color=palette[policy],
                                    histtype="stepfilled", edgecolor=palette[policy])[2][0]
        ax.set_title(part)
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel("episodes")
    axes[-1].legend(list(shown.values()), [_plain(p) for p in shown], fontsize=7)
    return png(fig)


def learning_curves(loss: list[tuple[int, float]], evals: dict[str, list[tuple[int, float]]], title: str) -> str:
    """Training loss (left) and evaluation-during-training metrics (right) against the step."""
    panels = int(bool(loss)) + int(bool(evals))
    fig = _figure(5.4 * max(1, panels), 3.0, right=0.6, wspace=0.35)
    axes = list(fig.subplots(1, max(1, panels), squeeze=False)[0])
    if loss:
        ax = axes.pop(0)
        ax.plot([s for s, _ in loss], [v for _, v in loss], color=_PALETTE[1], lw=1.2)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
        ax.set_title(_plain(f"{title}: loss"))
    if evals:
        # Rates share a 0..1 axis; counts such as avg_turns get their own (dashed, right axis).
        ax = axes.pop(0)
        twin = None
        for i, (name, pts) in enumerate(evals.items()):
            rate = all(0.0 <= v <= 1.0 for _, v in pts)
            if not rate and twin is None:
                twin = ax.twinx()
            (ax if rate else twin).plot([s for s, _ in pts], [v for _, v in pts], marker="o", ms=3, label=name,
                                        ls="-" if rate else "--", color=_PALETTE[(i + 1) % len(_PALETTE)])
        ax.set_xlabel("step")
        ax.set_ylabel("rate")
        ax.set_title(_plain(f"{title}: evaluation"))
        handles = [h for a in (ax, twin) if a is not None for h in a.get_legend_handles_labels()[0]]
        ax.legend(handles=handles, fontsize=8)
    return png(fig)
