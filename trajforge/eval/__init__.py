"""Metrics, comparisons and reports computed from graded trajectories."""

from trajforge.eval.metrics import evaluate, summarize, wilson

__all__ = ["evaluate", "summarize", "wilson"]
