"""``trajforge synth``: build a verified task pool from templates, an LLM, or your own SQLite data.

    trajforge synth --env sql --n 200 --out tasks.jsonl                        # templates
    trajforge synth --env sql --llm http://127.0.0.1:8000/v1 --llm-model qwen \\
        --n 50 --pool tasks.jsonl --out tasks.jsonl                              # LLM, merged
    trajforge synth --env sql --db shop.sqlite --questions q.jsonl --out shop.jsonl
    trajforge synth --env sql --db shop.sqlite --llm URL --llm-model NAME --n 50 --out shop.jsonl

Every path prints one table: tasks kept and candidates rejected, per tier and per reason. With
``--pool`` the existing pool comes first in ``--out`` and new tasks that repeat it are dropped.
``--tier`` keeps only those tiers; ``--tier-by SPEC`` re-tiers new tasks by that policy's solve
rate over ``--tier-samples`` episodes. If the LLM becomes unreachable mid-run, the tasks verified
until then are still written, and the command exits 1.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from trajforge.cli.options import Options, with_configs
from trajforge.cli.targets import refuse_target
from trajforge.tasks.llm import LLMConfig
from trajforge.tasks.pool import Rejection, SynthReport

console = Console()
TIERS = ("easy", "medium", "hard")
SHOWN_REJECTIONS = 30


def _fail(msg: str, code: int = 2) -> None:
    console.print(Text(f"error: {msg}", style="red"))
    raise typer.Exit(code)


LLM = Options(LLMConfig, only=("temperature", "max_requests", "retries", "concurrency", "similarity"),
              flags={"retries": "--llm-retries", "concurrency": "--llm-concurrency"}, partial=True)
"""The LLM writer's options (its URL and model are --llm and --llm-model)."""


@with_configs(llm_options=LLM)
def synth(
    env: str = typer.Option("sql", help="environment name (built-in, registered or an installed plugin; "
                            "trajforge.envs.env_names()), or mcp:PATH/tools.json"),
    n: int = typer.Option(200, help="tasks wanted (templates, LLM)"),
    out: Path = typer.Option(..., help="task pool JSONL to write"),
    seed: int = typer.Option(0, help="template draw / LLM request seed"),
    llm: Optional[str] = typer.Option(None, help="OpenAI-compatible base URL that writes tasks"),
    llm_model: Optional[str] = typer.Option(None, help="model name for --llm"),
    db: Optional[Path] = typer.Option(None, help="your SQLite file (--env sql)"),
    questions: Optional[Path] = typer.Option(None, help='JSONL of {"question", "sql", "split"?}'),
    pool: Optional[Path] = typer.Option(None, help="existing pool to merge into (kept first)"),
    tier: list[str] = typer.Option([], help="keep only this tier (repeatable; with templates it "
                                   "filters the n drawn)"),
    split: str = typer.Option("train", help="split for LLM-written tasks"),
    tier_by: Optional[str] = typer.Option(None, help="policy SPEC whose solve rate sets tiers"),
    tier_samples: int = typer.Option(4, help="episodes per task for --tier-by"),
    rejected: Optional[Path] = typer.Option(None, help="write every rejection here as JSONL"),
    llm_options: dict = None,
) -> None:
    """Generate a verified task pool (each reference solution executed)."""
    from trajforge.envs import env_class
    from trajforge.tasks.dedup import merge_pools

    _check_options(env, db, questions, llm, llm_model, tier, split)
    refuse_target(out, "--out")
    refuse_target(rejected, "--rejected")
    try:
        env_class(env)
    except KeyError as e:
        _fail(str(e.args[0]))
    base = _read_pool(pool) if pool else []
    wanted = tuple(tier) or TIERS
    similarity = llm_options["similarity"]
    report, stop = _generate(env, n, seed, base, wanted, split, db, questions, llm, llm_model, llm_options)
    if tier_by:
        report.tasks = _retier(report.tasks, tier_by, tier_samples)
    _keep_tiers(report, wanted)
    merged, repeats = merge_pools(base, report.tasks, similarity)
    for reason, count in repeats.items():
        report.dropped[reason] = report.dropped.get(reason, 0) + count
    report.tasks = merged[len(base):]
    from trajforge.tasks.pool import write_tasks

    write_tasks(out, merged)
    console.print(summary_table(report, title=f"synth --env {env}: {_mode(db, questions, llm)}"))
    _print_rejections(report)
    if rejected:
        rejected.write_text("".join(r.model_dump_json() + "\n" for r in report.rejected))
    splits = Counter(t.split for t in report.tasks)
    console.print(f"wrote {len(merged)} tasks to {out} ({len(report.tasks)} new"
                  f"{f', {len(base)} from {pool}' if pool else ''}; splits {dict(splits)})")
    if stop:
        _fail(f"{stop}; the {len(report.tasks)} tasks verified before that were written", code=1)


def _mode(db: Optional[Path], questions: Optional[Path], llm: Optional[str]) -> str:
    if questions:
        return f"questions {questions.name} on {db.name if db else '?'}"
    if llm:
        return f"LLM at {llm}" + (f" on {db.name}" if db else "")
    return "templates"


def _check_options(env: str, db, questions, llm, llm_model, tier: list[str], split: str) -> None:
    bad = [t for t in tier if t not in TIERS]
    if bad:
        _fail(f"--tier {bad[0]!r} is not a tier; use one of {', '.join(TIERS)}")
    if split not in ("train", "test", "heldout"):
        _fail(f"--split {split!r} is not a split; use train, test or heldout")
    if (db or questions) and env != "sql":
        _fail(f"--db/--questions are for --env sql, not {env!r}")
    if questions and not db:
        _fail("--questions needs --db (the SQLite file the questions are about)")
    if questions and llm:
        _fail("use either --questions (your gold SQL) or --llm (an LLM writes tasks), not both")
    if db and not (questions or llm):
        _fail("--db needs --questions FILE, or --llm URL to have an LLM write questions about it")
    if db and not db.is_file():
        _fail(f"database file {db} does not exist")
    if questions and not questions.is_file():
        _fail(f"questions file {questions} does not exist")
    if llm and not llm_model:
        _fail("--llm needs --llm-model (the model name the server serves)")


def _read_pool(path: Path):
    from trajforge.tasks.pool import read_tasks

    if not path.is_file():
        _fail(f"pool file {path} does not exist")
    try:
        return read_tasks(path)
    except (OSError, ValueError) as e:
        _fail(str(e))


def _generate(env, n, seed, base, wanted, split, db, questions, llm, llm_model,
              llm_options: dict) -> tuple[SynthReport, str | None]:
    """(report, why the run stopped early or None)."""
    if questions:
        from trajforge.envs.sql.byo import questions_to_tasks

        return questions_to_tasks(db, questions), None
    if llm:
        from pydantic import ValidationError

        from trajforge.envs import env_spec
        from trajforge.tasks import synthesize
        from trajforge.tasks.llm import LLMUnavailable, synthesize_llm

        examples = [t for t in base if t.env == env and t.db == (str(db.resolve()) if db else None)]
        if not examples and not db and env_spec(env).generate is not None:
            examples = synthesize(env, 30, seed).tasks  # the style to follow, not written out
        try:
            cfg = LLMConfig(url=llm, model=llm_model, seed=seed, **llm_options)
        except ValidationError as e:
            _fail("; ".join(f"{err['loc'][0]}: {err['msg']}" for err in e.errors()))
        try:
            return synthesize_llm(env, n, cfg, examples=examples, pool=base, tiers=wanted,
                                  split=split, db=str(db.resolve()) if db else None), None
        except LLMUnavailable as e:
            return e.report, str(e)
    from trajforge.tasks import synthesize

    try:
        return synthesize(env, n, seed), None
    except ValueError as e:
        _fail(f"{e}; use --llm to have an LLM write tasks for it")
    raise AssertionError("unreachable")


def _retier(tasks, spec: str, k: int):
    from trajforge.grade.difficulty import tier_by_solve_rate
    from trajforge.policies import make_policy

    try:
        policy = make_policy(spec)
    except (ValueError, FileNotFoundError, OSError) as e:
        _fail(str(e))
    return tier_by_solve_rate(tasks, policy, k)


def _keep_tiers(report: SynthReport, wanted: tuple[str, ...]) -> None:
    off = [t for t in report.tasks if t.tier not in wanted]
    if off:
        report.tasks = [t for t in report.tasks if t.tier in wanted]
        report.dropped["off_tier"] = report.dropped.get("off_tier", 0) + len(off)
        # Verified but not wanted: in the table and the --rejected file, not in the printed list.
        report.rejected += [Rejection(reason="off_tier", detail=f"tier {t.tier}", source=t.id,
                                      tier=t.tier) for t in off]


def summary_table(report: SynthReport, title: str) -> Table:
    """Kept tasks and rejections, one row per reason, one column per tier (``?`` = not known)."""
    cells: dict[str, Counter[str]] = {"kept": Counter(t.tier for t in report.tasks)}
    for r in report.rejected:
        cells.setdefault(r.reason, Counter())[r.tier or "?"] += 1
    for reason, count in report.dropped.items():
        known = sum(cells.get(reason, Counter()).values())
        if count > known:  # counted by the generator without a per-candidate record
            cells.setdefault(reason, Counter())["?"] += count - known
    columns = [*TIERS, "?"] if any(c["?"] for c in cells.values()) else list(TIERS)
    table = Table(title=title)
    table.add_column("")
    for col in [*columns, "total"]:
        table.add_column(col, justify="right")
    for reason in ["kept", *sorted(r for r in cells if r != "kept")]:
        row = cells[reason]
        style = "green" if reason == "kept" else None
        table.add_row(Text(reason, style=style), *(str(row[c]) for c in columns),
                      str(sum(row.values())))
    return table


def _print_rejections(report: SynthReport) -> None:
    """The rejections a user can act on (a bad question line, a bad LLM reply), up to a screenful."""
    fixable = [r for r in report.rejected if r.reason != "off_tier"]
    for r in fixable[:SHOWN_REJECTIONS]:
        console.print(Text(f"  {r.source}: {r.reason}: {r.detail}"))
    if len(fixable) > SHOWN_REJECTIONS:
        console.print(f"  ... and {len(fixable) - SHOWN_REJECTIONS} more (--rejected FILE writes "
                      "them all)")


__all__ = ["summary_table", "synth"]
