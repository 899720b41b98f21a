"""Training curves: one JSONL row per step (and per in-loop evaluation), TensorBoard when installed.

File format (``OUT_DIR/curves.jsonl``; the report reads it):
    {"recipe": "grpo", "step": 12, "loss": 0.41, "lr": 1e-4, ...}      one per optimizer step
    {"recipe": "grpo", "step": 20, "eval": {"completion": 0.5, "avg_turns": 3.1, "validity": 0.9, ...}}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CURVES = "curves.jsonl"


class Curves:
    def __init__(self, out_dir: str | Path, recipe: str, append: bool = False, upto: int | None = None):
        """``append``: a resumed run continues the file; ``upto``: the step it resumes from (rows
        of later steps are the killed run's, logged after its checkpoint, and are logged again)."""
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / CURVES
        self.recipe = recipe
        if not append and self.path.exists():
            self.path.unlink()  # a fresh run starts fresh curves; a resumed one continues them
        elif self.path.exists():
            _end_last_line(self.path)
            if upto is not None:
                _drop_after(self.path, upto)
        self._tb = _tensorboard(self.dir / "tb")

    def log(self, step: int, **scalars: float) -> None:
        self._write({"recipe": self.recipe, "step": step, **scalars})
        if self._tb:
            for k, v in scalars.items():
                self._tb.add_scalar(f"{self.recipe}/{k}", v, step)

    def log_eval(self, step: int, metrics: dict[str, Any]) -> None:
        self._write({"recipe": self.recipe, "step": step, "eval": metrics})
        if self._tb:
            for k, v in metrics.items():
                if isinstance(v, (int, float)):
                    self._tb.add_scalar(f"{self.recipe}/eval/{k}", v, step)

    def close(self) -> None:
        if self._tb:
            self._tb.close()

    def _write(self, row: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")


def _end_last_line(path: Path) -> None:
    """Before a resumed run appends: a last line the killed run left without its newline would glue
    onto the first new row, and the file would no longer read (``eval/rundir.read_curves`` skips
    only a torn *last* line). A whole row missing only its newline gets one; a torn row is cut."""
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    try:
        json.loads(data[start:])
    except ValueError:
        with open(path, "r+b") as f:
            f.truncate(start)
        return
    with open(path, "ab") as f:
        f.write(b"\n")


def _drop_after(path: Path, step: int) -> None:
    """Rewrite the file (atomically) without its rows of steps after ``step`` (nor a time budget's
    stop row at ``step``)."""
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not _after(line, step)]
    if len(kept) < len(lines):
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text("".join(kept))
        tmp.replace(path)


def _after(line: str, step: int) -> bool:
    try:
        row = json.loads(line)
    except ValueError:
        return False
    if not isinstance(row, dict) or not isinstance(row.get("step"), (int, float)):
        return False
    # The time budget's stop row at the step resumed from: the resumed run did not stop there.
    return row["step"] > step or (row["step"] == step and "stopped_for_time" in row)


def read_curves(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a curves file (a torn last line, from a killed run, is skipped)."""
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def plot_curves(path: str | Path, png: str | Path) -> Path:
    """Loss and in-loop evaluation curves side by side, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_curves(path)
    fig, (ax_loss, ax_eval) = plt.subplots(1, 2, figsize=(10, 3.5))
    for recipe in dict.fromkeys(r["recipe"] for r in rows):
        mine = [r for r in rows if r["recipe"] == recipe]
        pts = [(r["step"], r["loss"]) for r in mine if "loss" in r]
        if pts:
            ax_loss.plot(*zip(*pts), label=recipe)
        evals = [(r["step"], r["eval"]) for r in mine if "eval" in r]
        for key in ("completion", "validity"):
            if evals:
                ax_eval.plot([s for s, _ in evals], [e.get(key, 0) for _, e in evals], marker="o",
                             label=f"{recipe} {key}")
    ax_loss.set(title="training loss", xlabel="step")
    ax_eval.set(title="in-loop evaluation", xlabel="step", ylim=(0, 1))
    for ax in (ax_loss, ax_eval):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)
    return Path(png)


def _tensorboard(logdir: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except Exception:  # noqa: BLE001 - tensorboard is optional; JSONL is always written
        return None
    return SummaryWriter(str(logdir))
