"""Evaluation metrics (re-exported): the definitions live in ``grade/metrics.py`` so training's
in-loop evaluation (train/, which must not import eval/) computes exactly the same numbers."""

from trajforge.grade.metrics import evaluate, summarize, wilson

__all__ = ["evaluate", "summarize", "wilson"]
