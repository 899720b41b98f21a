"""The episode loop and batch collection."""

from trajforge.harness.loop import HarnessConfig, run_episodes

__all__ = ["HarnessConfig", "run_episodes"]
