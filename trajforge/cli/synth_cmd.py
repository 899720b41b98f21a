"""``trajforge synth``: build a verified task pool from templates, an LLM, or your own SQLite data.

    trajforge synth --env sql --n 200 --out tasks.jsonl                        # templates
    trajforge synth --env sql --n 260 --worlds 4 --out tasks.jsonl             # train across 4 worlds
    trajforge synth --env sql --n 260 --worlds 4 --world-train 61 --out tasks.jsonl   # + 61 per world
    trajforge synth --env sql --n 260 --rephrasings 1 --out tasks.jsonl   # + a reworded copy per train task
    trajforge synth --env sql --llm http://127.0.0.1:8000/v1 --llm-model qwen \\
        --n 50 --pool tasks.jsonl --out tasks.jsonl                              # LLM, merged
    trajforge synth --env sql --db shop.sqlite --questions q.jsonl --split train --out shop.jsonl
    trajforge synth --env sql --questions dev.json --db-dir database/ --split dev --out dev.jsonl
    trajforge synth --env sql-exec --questions dev.json --db-dir database/ --out dev.jsonl  # all by execution
    trajforge synth --env sql --db shop.sqlite --llm URL --llm-model NAME --n 50 --out shop.jsonl

Every path prints one table: tasks kept and candidates rejected, per tier and per reason. With
``--pool`` the existing pool comes first in ``--out`` and new tasks that repeat it are dropped
(your own questions: only the very same rows, by id). Your questions are never deduplicated unless
asked: rows sharing a question or a gold query are listed, with the groups that cross splits, and
``--dedup exact|near`` drops the repeats (``envs/sql/byo.py``).
``--tier`` keeps only those tiers; ``--tier-by SPEC`` re-tiers new tasks by that policy's solve
rate over ``--tier-samples`` episodes. If the LLM becomes unreachable mid-run, the tasks verified
until then are still written, and the command exits 1.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from trajforge.cli.options import Options, with_configs
from trajforge.cli.targets import refuse_target
from trajforge.tasks.llm import LLMConfig
from trajforge.tasks.pool import Rejection, SynthReport
from trajforge.tasks.splits import ROLES

console = Console()
TIERS = ("easy", "medium", "hard")
SHOWN_REJECTIONS = 30
SHOWN_DUPLICATES = 10
SQL_ENVS = ("sql", "sql-exec")
"""Environments that take your own SQLite files and questions."""


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
    worlds: int = typer.Option(1, help="templates: draw the train split across this many worlds "
                               "(renamed entities); test and heldout stay in world 0"),
    world_train: int = typer.Option(0, help="with --worlds: keep world 0's whole pool of --n and add "
                                    "this many train tasks from each other world"),
    rephrasings: int = typer.Option(0, help="templates: add this many reworded copies of each train "
                                    "task (the same plan and answer, the question said differently)"),
    compose: int = typer.Option(0, help="templates: add this many train tasks of the environment's "
                                "composition templates (the held-out templates' parts in other "
                                "combinations; sql)"),
    compose_templates: list[str] = typer.Option([], help="with --compose: draw from this composition "
                                               "template only (repeatable; default all)"),
    llm: Optional[str] = typer.Option(None, help="OpenAI-compatible base URL that writes tasks"),
    llm_model: Optional[str] = typer.Option(None, help="model name for --llm"),
    db: Optional[Path] = typer.Option(None, help="your SQLite file (--env sql or sql-exec)"),
    questions: Optional[Path] = typer.Option(None, help='JSONL of {"question", "sql", "split"?}, or a '
                                             "Spider/BIRD JSON array (query/SQL, db_id, evidence)"),
    db_dir: Optional[Path] = typer.Option(None, help="folder of <db_id>/<db_id>.sqlite for --questions "
                                          "rows with a db_id (Spider, BIRD)"),
    pool: Optional[Path] = typer.Option(None, help="existing pool to merge into (kept first)"),
    tier: list[str] = typer.Option([], help="keep only this tier (repeatable; with templates it "
                                   "filters the n drawn)"),
    split: Optional[str] = typer.Option(None, help="split label (any) of --questions rows without a "
                                        "split field, and of LLM-written tasks (default train)"),
    dedup: Optional[str] = typer.Option(None, help="drop repeated --questions rows: exact (same "
                                        "question) or near (also same gold query, reworded); "
                                        "default: keep and report them"),
    compare: str = typer.Option("multiset", help="how execution-accuracy tasks compare rows: "
                                "multiset (Spider) or set (BIRD)"),
    tier_by: Optional[str] = typer.Option(None, help="policy SPEC whose solve rate sets tiers"),
    tier_samples: int = typer.Option(4, min=1, help="episodes per task for --tier-by"),
    rejected: Optional[Path] = typer.Option(None, help="write every rejection here as JSONL"),
    llm_options: dict = None,
) -> None:
    """Generate a verified task pool (each reference solution executed)."""
    from trajforge.envs import env_class
    from trajforge.tasks.dedup import merge_pools

    _check_options(env, db, questions, llm, llm_model, tier, split, db_dir, dedup, compare)
    if n < 0:  # else a pool of no tasks is written as if that were asked for
        _fail(f"--n must be 0 or more, not {n}")
    if worlds < 1:
        _fail(f"--worlds must be 1 or more, not {worlds}")
    if worlds != 1 and (questions or llm):
        _fail("--worlds is for template generation, not --questions or --llm")
    if world_train and worlds == 1:
        _fail("--world-train adds tasks from worlds > 0: give --worlds 2 or more with it")
    if world_train < 0:
        _fail(f"--world-train must be 0 or more, not {world_train}")
    if rephrasings < 0:
        _fail(f"--rephrasings must be 0 or more, not {rephrasings}")
    if rephrasings and (questions or llm):
        _fail("--rephrasings is for template generation, not --questions or --llm")
    if compose < 0:
        _fail(f"--compose must be 0 or more, not {compose}")
    if compose and (questions or llm):
        _fail("--compose is for template generation, not --questions or --llm")
    if compose_templates and not compose:
        _fail("--compose-templates chooses the templates --compose draws from: give --compose N with it")
    refuse_target(out, "--out")
    refuse_target(rejected, "--rejected")
    try:
        env_class(env)
    except KeyError as e:
        _fail(str(e.args[0]))
    base = _read_pool(pool) if pool else []
    wanted = tuple(tier) or TIERS
    similarity = llm_options["similarity"]
    if questions:
        report, stop = _from_questions(env, db, questions, db_dir, split, compare, dedup, similarity), None
    else:
        report, stop = _generate(env, n, seed, base, wanted, split or ROLES.train, db, llm, llm_model, llm_options,
                                 worlds, world_train, compose, compose_templates)
    report.tasks = _with_db_hashes(report.tasks)
    if tier_by:
        report.tasks = _retier(report.tasks, tier_by, tier_samples)
    _keep_tiers(report, wanted)
    merged, repeats = merge_pools(base, report.tasks, similarity, dedup_text=not questions)
    for reason, count in repeats.items():
        report.dropped[reason] = report.dropped.get(reason, 0) + count
    report.tasks = merged[len(base):]
    if rephrasings:  # after the dedup, which would drop them: they repeat their originals' plans
        from trajforge.tasks.rephrase import with_rephrasings

        merged = base + with_rephrasings(report.tasks, rephrasings)
        report.tasks = merged[len(base):]
    from trajforge.tasks.pool import write_tasks

    write_tasks(out, merged)
    console.print(summary_table(report, title=f"synth --env {env}: {_mode(db, questions, llm, db_dir)}"))
    _print_rejections(report)
    _print_duplicates(report, dedup)
    if rejected:
        rejected.write_text("".join(r.model_dump_json() + "\n" for r in report.rejected))
    splits = Counter(t.split for t in report.tasks)
    console.print(f"wrote {len(merged)} tasks to {out} ({len(report.tasks)} new"
                  f"{f', {len(base)} from {pool}' if pool else ''}; splits {dict(splits)})")
    if worlds > 1:
        per_world = Counter(t.world for t in report.tasks if t.split == ROLES.train)
        console.print(f"train tasks per world: {dict(sorted(per_world.items()))}")
    if stop:
        _fail(f"{stop}; the {len(report.tasks)} tasks verified before that were written", code=1)


def _mode(db: Optional[Path], questions: Optional[Path], llm: Optional[str], db_dir: Optional[Path] = None) -> str:
    if questions:
        on = " and ".join(x for x in (db.name if db else "", f"{db_dir}/" if db_dir else "") if x)
        return f"questions {questions.name}" + (f" on {on}" if on else "")
    if llm:
        return f"LLM at {llm}" + (f" on {db.name}" if db else "")
    return "templates"


def _check_options(env: str, db, questions, llm, llm_model, tier: list[str], split: Optional[str],
                   db_dir=None, dedup=None, compare="multiset") -> None:
    from pydantic import TypeAdapter, ValidationError

    from trajforge.envs.sql.compare import COMPARES
    from trajforge.schema import Split

    bad = [t for t in tier if t not in TIERS]
    if bad:
        _fail(f"--tier {bad[0]!r} is not a tier; use one of {', '.join(TIERS)}")
    if split is not None:
        try:
            TypeAdapter(Split).validate_python(split)
        except ValidationError:
            _fail(f"--split {split!r} is not a split label (any text without control characters or "
                  "surrounding spaces, up to 200 characters)")
    if (db or questions or db_dir) and env not in SQL_ENVS:
        _fail(f"--db/--db-dir/--questions are for --env sql or sql-exec, not {env!r}")
    if (db_dir or dedup) and not questions:
        _fail("--db-dir and --dedup are for --questions")
    if dedup not in (None, "exact", "near"):
        _fail(f"--dedup must be exact or near, not {dedup!r}")
    if compare not in COMPARES:
        _fail(f"--compare must be one of {', '.join(COMPARES)}, not {compare!r}")
    if db_dir and not db_dir.is_dir():
        _fail(f"database folder {db_dir} does not exist")
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


def _from_questions(env, db, questions, db_dir, split, compare, dedup, similarity) -> SynthReport:
    from trajforge.envs.sql.byo import questions_to_tasks
    from trajforge.envs.sql.questions import QuestionsError

    try:
        report = questions_to_tasks(db, questions, db_dir=db_dir, split=split, env=env, compare=compare,
                                    dedup=dedup, similarity=similarity)
    except (QuestionsError, FileNotFoundError) as e:
        _fail(str(e))
    if not report.tasks and report.rejected and all(r.reason == "no_database" for r in report.rejected):
        _fail(f"--questions needs --db FILE, or --db-dir DIR for rows with a db_id: no row of "
              f"{questions.name} found its database ({report.rejected[0].detail})")
    return report


def _generate(env, n, seed, base, wanted, split, db, llm, llm_model,
              llm_options: dict, worlds: int = 1, world_train: int = 0,
              compose: int = 0, compose_templates: Sequence[str] = ()) -> tuple[SynthReport, str | None]:
    """(report, why the run stopped early or None)."""
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
        return synthesize(env, n, seed, worlds, world_train, compose=compose,
                          compose_templates=compose_templates), None
    except ValueError as e:
        if worlds != 1 or compose:
            _fail(str(e))
        _fail(f"{e}; use --llm to have an LLM write tasks for it")
    raise AssertionError("unreachable")


def _with_db_hashes(tasks):
    """Tasks on a database file (LLM-written ones too) record its content hash, so a file changed
    later is refused by name instead of grading against stale answers (``envs/sql/dbfile.py``)."""
    from trajforge.envs.sql.dbfile import db_digest

    return [t.model_copy(update={"db_sha256": db_digest(t.db)}) if t.db and t.db_sha256 is None else t
            for t in tasks]


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


def _print_duplicates(report: SynthReport, dedup: Optional[str]) -> None:
    """The rows of your questions that repeat each other, by what they share, and which groups
    cross splits (leak); the groups themselves up to a screenful, leaking ones first."""
    from trajforge.tasks.dedup import leakage

    if not report.duplicates:
        return
    done = f"--dedup {dedup} dropped the repeats it covers" if dedup else "kept; --dedup exact|near drops them"
    console.print(f"duplicates among your questions ({done}):")
    for kind, label in (("question", "same question"), ("gold_query", "same gold query")):
        groups = [g for g in report.duplicates if g.kind == kind]
        if groups:
            leaks = leakage(groups)
            across = ", ".join(f"{pair} {n}" for pair, n in leaks.items())
            rows, leaking = sum(len(g.sources) for g in groups), sum(g.leaks for g in groups)
            console.print(Text(f"  {label}: {_n(len(groups), 'group')} ({_n(rows, 'row')}); {leaking} "
                               f"cross{'es' if leaking == 1 else ''} splits" + (f" ({across})" if across else "")))
    shown = sorted(report.duplicates, key=lambda g: not g.leaks)[:SHOWN_DUPLICATES]
    for g in shown:
        where = ", ".join(f"{s} ({sp})" for s, sp in zip(g.sources[:4], g.splits[:4]))
        more = f" and {len(g.sources) - 4} more" if len(g.sources) > 4 else ""
        console.print(Text(f"    {g.kind}: {where}{more}: {g.shared[:80]}"))
    if len(report.duplicates) > SHOWN_DUPLICATES:
        console.print(f"    ... and {len(report.duplicates) - SHOWN_DUPLICATES} more groups")


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _print_rejections(report: SynthReport) -> None:
    """The rejections a user can act on (a bad question line, a bad LLM reply), up to a screenful."""
    fixable = [r for r in report.rejected if r.reason != "off_tier"]
    for r in fixable[:SHOWN_REJECTIONS]:
        console.print(Text(f"  {r.source}: {r.reason}: {r.detail}"))
    if len(fixable) > SHOWN_REJECTIONS:
        console.print(f"  ... and {len(fixable) - SHOWN_REJECTIONS} more (--rejected FILE writes "
                      "them all)")


__all__ = ["summary_table", "synth"]
