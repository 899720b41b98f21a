"""The episode loop, batched (``run_episodes``) and asynchronous at scale (``collect_episodes``)."""

from trajforge.harness.collect import CollectConfig, acollect, collect_episodes, sampling_of
from trajforge.harness.executor import AsyncioExecutor, EnvFault, Executor, make_executor
from trajforge.harness.loop import Episode, HarnessConfig, run_episodes

__all__ = ["AsyncioExecutor", "CollectConfig", "EnvFault", "Episode", "Executor", "HarnessConfig",
           "acollect", "collect_episodes", "make_executor", "run_episodes", "sampling_of"]
