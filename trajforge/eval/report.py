"""``trajforge report RUN_DIR``: one self-contained HTML page comparing the policies of a run.

    trajforge report runs/demo                                  # writes runs/demo/report.html
    trajforge report runs/x --before base --after dpo --out x.html

    from trajforge.eval.report import write_report
    write_report("runs/demo")

The page holds: a diagnosis (``trajforge doctor``'s findings: what looks wrong, the numbers, the
next thing to try), a before/after table (completion, tool-call validity after repair and strict, with
95% Wilson intervals; average turns and reward with 95% normal intervals of the mean), completion
per task tier and per environment, outcome tiers and the fail_reason breakdown, the distribution of
each reward component, learning curves when the run trained, and the tasks that flipped between the
two policies (failed → solved and solved → failed), each linking to both episodes rendered as
conversations further down the same page.

How stores, policies, the before/after pair and ``curves.jsonl`` are found: ``eval/rundir.py``.
Metrics come from ``grade/metrics.py`` (the definitions training and ``trajforge eval`` use).
Self-contained: CSS is inline, plots are inline PNGs, there is no script and no external link, so
the file opens offline and can be mailed around. Everything from a model, a task or a tool is escaped.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, NamedTuple

from trajforge.eval import plots
from trajforge.eval.conversation import conversation_html, esc, static_text
from trajforge.eval.doctor import diagnose_run
from trajforge.eval.metrics import evaluate, wilson
from trajforge.eval.rundir import Pair, Run, load_run, pick_pair
from trajforge.schema import Trajectory

MAX_FLIP_EPISODES = 200
"""Flipped tasks whose episodes are rendered in full (all are listed); keeps the page openable."""
TIER_ORDER = ("easy", "medium", "hard")


class Flip(NamedTuple):
    task_id: str
    sample: int
    before: Trajectory
    after: Trajectory


# ---- numbers ---------------------------------------------------------------------------------


def mean_ci(values: list[float]) -> tuple[float, float, float]:
    """(mean, low, high): 95% normal interval of the mean; the mean itself when n < 2."""
    n = len(values)
    if n == 0:
        return 0.0, 0.0, 0.0
    mean = sum(values) / n
    if n < 2:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = 1.959964 * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def _solved(t: Trajectory) -> bool:
    return bool(t.outcome and t.outcome.correct)


def _counted(trajs: list[Trajectory]) -> list[Trajectory]:
    """Episodes the rates count: env_fault says nothing about the model (as in grade/metrics)."""
    return [t for t in trajs if not (t.outcome and t.outcome.tier == "env_fault")]


def policy_stats(trajs: list[Trajectory]) -> dict[str, Any]:
    """``evaluate`` plus the counts and intervals the report prints."""
    m = evaluate(trajs)
    counted = _counted(trajs)
    n_turns = sum(len(t.steps) for t in counted)
    m["completion_kn"] = (sum(map(_solved, counted)), len(counted))
    m["validity_kn"] = (round(m["validity"] * n_turns), n_turns)
    m["strict_kn"] = (round(m["strict_validity"] * n_turns), n_turns)
    m["turns_ci"] = mean_ci([float(len(t.steps)) for t in counted])
    m["reward_ci"] = mean_ci([t.reward.total if t.reward else 0.0 for t in counted])
    m["splits"] = dict(Counter(t.split or "?" for t in trajs))
    return m


def flips(episodes: list[Trajectory], pair: Pair) -> tuple[list[Flip], list[Flip]]:
    """(improved: failed → solved, regressed: solved → failed) for (task, sample)s both attempted.

    Episodes graded env_fault are left out: an infrastructure failure is not a flip.
    """
    by: dict[str, dict[tuple[str, int], Trajectory]] = {pair.before: {}, pair.after: {}}
    for t in _counted(episodes):
        if t.policy in by:
            by[t.policy][(t.task_id, t.sample)] = t
    improved, regressed = [], []
    for key in sorted(by[pair.before].keys() & by[pair.after].keys()):
        b, a = by[pair.before][key], by[pair.after][key]
        if _solved(b) != _solved(a):
            (improved if _solved(a) else regressed).append(Flip(key[0], key[1], b, a))
    return improved, regressed


# ---- html pieces -----------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _rate(kn: tuple[int, int]) -> str:
    k, n = kn
    if n == 0:
        return '<span class="na">n/a</span>'
    lo, hi = wilson(k, n)
    return f'{_pct(k / n)} <span class="ci">[{_pct(lo)}, {_pct(hi)}]</span> <span class="kn">{k}/{n}</span>'


def _mean(ci: tuple[float, float, float], digits: int = 2) -> str:
    mean, lo, hi = ci
    return f'{mean:.{digits}f} <span class="ci">[{lo:.{digits}f}, {hi:.{digits}f}]</span>'


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """A table whose cells are already HTML (callers escape what they put in)."""
    ths = "".join(f"<th>{h}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    open_tag = f'<table class="{cls}">' if cls else "<table>"
    return f"{open_tag}<thead><tr>{ths}</tr></thead><tbody>{trs}</tbody></table>"


def _img(uri: str, alt: str) -> str:
    return f'<img src="{uri}" alt="{esc(alt)}">'


def _ordered(values: set[str], order: tuple[str, ...] = ()) -> list[str]:
    return [v for v in order if v in values] + sorted(values - set(order))


def _summary_table(stats: dict[str, dict[str, Any]], pair: Pair | None) -> str:
    head = ["policy", "episodes", "splits", "completion (95% CI)", "validity after repair (95% CI)",
            "strict validity (95% CI)", "avg turns (95% CI)", "avg reward (95% CI)", "env faults"]
    sampled = any("pass_at_k" in m for m in stats.values())  # several samples per task somewhere
    if sampled:
        head.append("pass@k")
    rows = []
    for name, m in stats.items():
        role = ""
        if pair:
            role = " <span class=\"role-tag\">before</span>" if name == pair.before else (
                " <span class=\"role-tag\">after</span>" if name == pair.after else "")
        splits = ", ".join(f"{esc(s)} {n}" for s, n in sorted(m["splits"].items()))
        rows.append([f"<b>{esc(name)}</b>{role}", str(m["n"]), splits, _rate(m["completion_kn"]),
                     _rate(m["validity_kn"]), _rate(m["strict_kn"]), _mean(m["turns_ci"]),
                     _mean(m["reward_ci"], 3), str(m["env_faults"])]
                    + ([_pass_curve(m.get("pass_at_k", {}))] if sampled else []))
    if pair:
        b, a = stats[pair.before], stats[pair.after]

        def pp(key: str) -> str:
            (kb, nb), (ka, na) = b[key], a[key]
            if not (nb and na):
                return ""
            return f"{100 * (ka / na - kb / nb):+.0f} pp"

        rows.append(["<b>Δ after − before</b>", "", "", pp("completion_kn"), pp("validity_kn"), pp("strict_kn"),
                     f"{a['turns_ci'][0] - b['turns_ci'][0]:+.2f}", f"{a['reward_ci'][0] - b['reward_ci'][0]:+.3f}", ""]
                    + ([""] if sampled else []))
    return _table(head, rows)


def _pass_curve(curve: dict[int, float]) -> str:
    """``@1 46% · @2 60% · @4 71%``: how often one of k samples solves a task."""
    return " · ".join(f"@{k} {_pct(v)}" for k, v in sorted(curve.items()))


def _by_group(episodes: dict[str, list[Trajectory]], key: Callable[[Trajectory], str],
              order: tuple[str, ...]) -> tuple[list[str], dict[str, list[tuple[int, int]]]]:
    """Groups and, per policy, (solved, counted) in each group."""
    groups = _ordered({key(t) for ts in episodes.values() for t in ts}, order)
    counts = {}
    for policy, ts in episodes.items():
        kn: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for t in _counted(ts):
            kn[key(t)][0] += _solved(t)
            kn[key(t)][1] += 1
        counts[policy] = [(kn[g][0], kn[g][1]) for g in groups]
    return groups, counts


def _group_section(title: str, what: str, episodes: dict[str, list[Trajectory]],
                   key: Callable[[Trajectory], str], order: tuple[str, ...], palette: dict[str, str]) -> str:
    groups, counts = _by_group(episodes, key, order)
    rows = [[f"<b>{esc(g)}</b>"] + [_rate(counts[p][i]) for p in counts] for i, g in enumerate(groups)]
    table = _table([what] + [esc(p) for p in counts], rows)
    fig = plots.rate_bars(groups, counts, f"completion by {what}", palette)
    return f'<h2>{title}</h2><div class="fig-row">{_img(fig, f"completion by {what}")}{table}</div>'


def _outcome_section(episodes: dict[str, list[Trajectory]], stats: dict[str, dict[str, Any]],
                     palette: dict[str, str]) -> str:
    tiers = {p: Counter(t.outcome.tier if t.outcome else "ungraded" for t in ts) for p, ts in episodes.items()}
    names = _ordered({k for c in tiers.values() for k in c}, ("success", "recovered", "failed", "env_fault"))
    tier_rows = [[f'<span class="badge tier-{esc(n)}">{esc(n)}</span>'] +
                 [str(tiers[p][n]) for p in episodes] for n in names]
    reasons = _ordered({r for m in stats.values() for r in m["fail_reasons"]})
    reason_rows = []
    for r in reasons:
        cells = []
        for p in episodes:
            k, n = stats[p]["fail_reasons"].get(r, 0), stats[p]["n"]
            cells.append(f"{k} <span class=\"kn\">{_pct(k / n) if n else ''}</span>")
        reason_rows.append([f"<b>{esc(r)}</b>"] + cells)
    out = ["<h2>Outcomes and fail reasons</h2>", '<div class="fig-row">',
           _table(["outcome tier"] + [esc(p) for p in episodes], tier_rows)]
    if reasons:
        fig = plots.reason_bars(reasons, {p: [stats[p]["fail_reasons"].get(r, 0) for r in reasons] for p in episodes},
                                palette)
        out += [_table(["fail reason"] + [esc(p) for p in episodes], reason_rows), _img(fig, "fail reasons")]
    else:
        out.append("<p>No failed episodes.</p>")
    out.append("</div>")
    return "".join(out)


def _reward_section(episodes: dict[str, list[Trajectory]], palette: dict[str, str]) -> str:
    values = {p: {part: [getattr(t.reward, part) for t in _counted(ts) if t.reward] for part in plots.REWARD_PARTS}
              for p, ts in episodes.items()}
    if not any(v["total"] for v in values.values()):
        return "<h2>Reward components</h2><p>No graded episodes carry a reward.</p>"
    rows = [[f"<b>{esc(p)}</b>"] + [_mean(mean_ci(v[part]), 3) for part in plots.REWARD_PARTS]
            for p, v in values.items()]
    return ("<h2>Reward components</h2><p>R = l1·completion + l2·step + l3·efficiency − l4·violation; "
            "each component's distribution over the policy's episodes.</p>"
            f"{_img(plots.reward_hists(values, palette), 'reward components')}"
            f"{_table(['policy'] + [f'mean {p} (95% CI)' for p in plots.REWARD_PARTS], rows)}")


def _curves_section(run: Run) -> str:
    out = ["<h2>Learning curves</h2>"]
    if not run.curves:
        return out[0] + ("<p>No <code>curves.jsonl</code> under the run directory (a training run writes "
                         "<code>train/&lt;recipe&gt;/curves.jsonl</code>).</p>")
    for c in run.curves:
        if not (c.loss or c.evals):
            out.append(f"<p><code>{esc(c.source)}</code> has no loss or eval rows yet.</p>")
            continue
        label = f"{c.recipe} ({c.source})" if c.recipe else c.source
        try:
            out.append(_img(plots.learning_curves(c.loss, c.evals, label), f"learning curves {c.source}"))
        except (ValueError, OverflowError) as e:  # values matplotlib cannot scale (a diverged run's ±1e308)
            out.append(f"<p><code>{esc(c.source)}</code> could not be plotted ({esc(str(e))}); its numbers are "
                       f"in the file and in the Diagnosis section.</p>")
    return "".join(out)


def _diagnosis_section(run: Run) -> str:
    """What ``trajforge doctor`` finds (eval/doctor.py), each finding with its numbers and next step."""
    diagnosis = diagnose_run(run)
    rows = [[f'<span class="badge tier-{_STATUS_CLASS[f.status]}">{esc(f.status)}</span> <b>{esc(f.rule)}</b>',
             esc(f.title) + (f' <span class="kn">{esc(f.source)}</span>' if f.source else ""), esc(f.cause),
             esc(", ".join(f"{k}={v}" for k, v in f.evidence.items())), esc(f.next_step)]
            for f in diagnosis.findings]
    skipped = [c for c in diagnosis.checks if c.result == "not checked"]
    note = ('<p class="note">Not checked: ' + "; ".join(f"{esc(c.rule)} ({esc(c.note)})" for c in skipped) + "</p>"
            if skipped else "")
    return ("<h2>Diagnosis</h2>" + _table(["finding", "what was seen", "likely cause", "numbers", "next step"], rows)
            + note)


_STATUS_CLASS = {"problem": "failed", "warning": "recovered", "healthy": "success"}
"""Doctor statuses drawn with the outcome badges' colours."""


def _outcome_cell(t: Trajectory) -> str:
    o = t.outcome
    tier = o.tier if o else "ungraded"
    reason = f" {esc(o.fail_reason)}" if o and o.fail_reason else ""
    return f'<span class="badge tier-{esc(tier)}">{esc(tier)}</span>{reason}'


def _flip_rows(items: list[Flip], offset: int) -> list[list[str]]:
    rows = []
    for i, f in enumerate(items, offset):
        link = (f'<a href="#flip-{i}">episodes</a>' if i < MAX_FLIP_EPISODES
                else '<span class="na">not rendered</span>')
        rb = f.before.reward.total if f.before.reward else 0.0
        ra = f.after.reward.total if f.after.reward else 0.0
        rows.append([f"<code>{esc(f.task_id)}</code>" + (f" #{f.sample}" if f.sample else ""),
                     esc(f.after.tier), esc(f.after.env), _outcome_cell(f.before), _outcome_cell(f.after),
                     f"{len(f.before.steps)} → {len(f.after.steps)}", f"{rb:.2f} → {ra:.2f}", link])
    return rows


def _flips_section(episodes: list[Trajectory], pair: Pair | None) -> str:
    if pair is None:
        return ("<h2>Flipped tasks</h2><p>No before/after pair: the run needs two policies that attempted "
                "the same tasks (or name them with --before/--after).</p>")
    improved, regressed = flips(episodes, pair)
    b, a = esc(pair.before), esc(pair.after)
    head = ["task", "tier", "env", f"{b}", f"{a}", "turns", "reward", ""]
    out = [f"<h2>Flipped tasks: {b} → {a}</h2>",
           f'<h3 id="improved">Failed → solved ({len(improved)})</h3>',
           _table(head, _flip_rows(improved, 0), "flips") if improved else "<p>None.</p>",
           f'<h3 id="regressed">Solved → failed ({len(regressed)})</h3>',
           _table(head, _flip_rows(regressed, len(improved)), "flips") if regressed else "<p>None.</p>"]
    every = improved + regressed
    if len(every) > MAX_FLIP_EPISODES:
        out.append(f"<p>The first {MAX_FLIP_EPISODES} of {len(every)} flipped tasks are rendered below.</p>")
    for i, f in enumerate(every[:MAX_FLIP_EPISODES]):
        kind = "failed → solved" if i < len(improved) else "solved → failed"
        out.append(f'<section class="flip" id="flip-{i}"><h3>{esc(kind)}: <code>{esc(f.task_id)}</code> '
                   f'<a class="back" href="#{"improved" if i < len(improved) else "regressed"}">back to list</a></h3>'
                   f'<div class="side-by-side">{conversation_html(f.before, f"ep-{i}-before")}'
                   f'{conversation_html(f.after, f"ep-{i}-after")}</div></section>')
    return "".join(out)


def _facts(run: Run) -> str:
    per_policy: Counter[str] = Counter()
    for t in run.episodes:
        per_policy[t.policy] += 1
    items = [("run directory", esc(run.root)), ("stores", ", ".join(f"<code>{esc(s)}</code>" for s in run.shards)),
             ("episodes", ", ".join(f"{esc(p)} {n}" for p, n in per_policy.items()))]
    for key, value in (run.metrics or {}).items():
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            items.append((esc(key), esc(value)))
        elif key == "timings_s" and isinstance(value, dict):
            items.append(("timings (s)", esc(", ".join(f"{k} {v}" for k, v in value.items()))))
    if run.skipped:
        items.append(("torn lines skipped", esc(", ".join(run.skipped))))
    return "<ul class=\"facts\">" + "".join(f"<li><b>{k}</b>: {v}</li>" for k, v in items) + "</ul>"


def _headline(stats: dict[str, dict[str, Any]], pair: Pair | None, episodes: list[Trajectory]) -> str:
    if pair is None:
        return ""
    improved, regressed = flips(episodes, pair)
    (kb, nb), (ka, na) = stats[pair.before]["completion_kn"], stats[pair.after]["completion_kn"]
    cb, ca = (kb / nb if nb else 0.0), (ka / na if na else 0.0)
    return (f'<p class="headline"><b>{esc(pair.before)}</b> → <b>{esc(pair.after)}</b>: completion '
            f'{_pct(cb)} → {_pct(ca)} ({100 * (ca - cb):+.0f} pp); '
            f'<a href="#improved">{len(improved)} tasks failed → solved</a>, '
            f'<a href="#regressed">{len(regressed)} solved → failed</a>.</p>')


# ---- the page --------------------------------------------------------------------------------


def build_report(run: Run, pair: Pair | None = None, title: str | None = None) -> str:
    """The report page for a loaded run (see ``load_run`` and ``pick_pair``)."""
    order = list(pair) if pair else []
    order += [p for p in run.policies if p not in order]
    episodes: dict[str, list[Trajectory]] = {p: [] for p in order}
    for t in run.episodes:
        episodes[t.policy].append(t)
    stats = {p: policy_stats(ts) for p, ts in episodes.items()}
    palette = plots.colors(order)
    title = title or f"trajforge report: {run.root.name or run.root}"
    body = [
        f"<h1>{esc(title)}</h1>", _headline(stats, pair, run.episodes), _facts(run),
        _diagnosis_section(run),
        "<h2>Policies</h2>", _summary_table(stats, pair),
        ('<p class="note">Rates count episodes not graded env_fault; validity counts assistant turns with a '
         "valid call and no invalid one (strict: and no parser repair). Completion and validity intervals are "
         "95% Wilson; turn and reward intervals are 95% normal intervals of the mean.</p>"),
        _group_section("Completion by task tier", "tier", episodes, lambda t: t.tier or "?", TIER_ORDER, palette),
        _group_section("Completion by environment", "environment", episodes, lambda t: t.env or "?", (), palette),
        _outcome_section(episodes, stats, palette),
        _reward_section(episodes, palette),
        _curves_section(run),
        _flips_section(run.episodes, pair),
    ]
    css = static_text("report.css") + static_text("conversation.css")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{css}</style></head>'
            f"<body>{''.join(body)}</body></html>")


def write_report(run_dir: str | Path, out: str | Path | None = None, before: str | None = None,
                 after: str | None = None, title: str | None = None) -> Path:
    """Read ``run_dir``, write the report (default ``run_dir/report.html``) and return its path."""
    run = load_run(run_dir)
    page = build_report(run, pick_pair(run, before, after), title)
    root = Path(run_dir)
    out = Path(out) if out else (root.parent if root.is_file() else root) / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out
