"""The ``code`` environment: write one Python function; hidden unit tests, run sandboxed, decide.

``env`` (CodeEnv: write_file, run_python, run_tests, submit; model-written code runs only in
``trajforge.envs.sandbox``), ``tasks`` (function-writing templates, oracle-built hidden tests,
sandbox-run references), ``worlds`` (the same problems under other function names: code has no
entity catalog to rename).
"""

from trajforge._compat import ENV_MODULE_NAMES, moved_names
from trajforge.envs.code.env import CodeEnv
from trajforge.envs.code.tasks import generate_code_tasks, generator
from trajforge.envs.registry import EnvSpec
from trajforge.envs.code.mistakes import code_mistakes
from trajforge.envs.code.failures import wrong_answer_kind

SPEC = EnvSpec(name="code", env=CodeEnv, generate=generate_code_tasks, world_generator=generator,
               summary="write a Python function; hidden tests run in a bubblewrap sandbox",
               wrong_answer=wrong_answer_kind,
               # Close: the visible tests passed (run_tests runs only those), so a failed submit
               # after it missed hidden cases only. Writing, running and submitting are any try.
               progress=frozenset({"tests_passed"}),
               mistakes=code_mistakes)

__all__ = ["SPEC", "CodeEnv"]

__getattr__ = moved_names(__name__, {
    **{n: "trajforge.envs.code.env" for n in ("MAX_FILE_BYTES", "MAX_WORKDIR_BYTES", "MAX_WORKDIR_ENTRIES")},
    **{n: "trajforge.envs.code.hidden" for n in (
        "HiddenTests", "RUNNER", "SHOWN_FAILURES", "TestCase", "TestReport", "judge", "same_value")},
    **{n: "trajforge.envs.sandbox" for n in ("RunResult", "Sandbox", "SandboxLimits")},
    **ENV_MODULE_NAMES})
