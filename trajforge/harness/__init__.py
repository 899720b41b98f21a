"""The episode loop, batched (``run_episodes``) and concurrent at scale (``run_concurrent``)."""

from trajforge._compat import moved_names
from trajforge.harness.concurrent import CollectConfig, arun_concurrent, run_concurrent, sampling_of
from trajforge.harness.executor import AsyncioExecutor, EnvFault, Executor, make_executor
from trajforge.harness.loop import Episode, HarnessConfig, run_episodes

__all__ = ["AsyncioExecutor", "CollectConfig", "EnvFault", "Episode", "Executor", "HarnessConfig",
           "arun_concurrent", "make_executor", "run_concurrent", "run_episodes", "sampling_of"]

# 0.1 called these "collect" too; trajforge.collect (run, grade, store) is the one collect now.
__getattr__ = moved_names(__name__, {"collect_episodes": "trajforge.harness.concurrent:run_concurrent",
                                     "acollect": "trajforge.harness.concurrent:arun_concurrent"})
