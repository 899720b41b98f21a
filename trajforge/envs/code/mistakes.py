"""The code environment's realistic mistakes for self-repair demonstrations (``EnvSpec.mistakes``).

- ``wrong_solution``: a first draft that is not done (the function body left ``pass``) written and
  tested: the hidden tests report the failures; the reference then rewrites the file;
- ``intermediate``: the tests run before any solution exists: they fail to import it;
- ``bad_path``: the solution written outside the work directory: ``bad_path``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trajforge.envs.mistakes import first_call, with_args
from trajforge.schema import Mistake, Task, ToolCall


def code_mistakes(task: Task, pool: Sequence[Task]) -> list[Mistake]:
    at = first_call(task, ("write_file",))
    if at is None:
        return []
    call = task.reference[at]
    content = str(call.arguments.get("content", ""))
    out: list[Mistake] = []
    header = re.search(r"^def \w+\(.*\):$", content, re.M)
    if header:
        stub = f"{header.group(0)}\n    pass\n"
        out.append(Mistake(kind="wrong_solution", at=at,
                           calls=(with_args(call, content=stub), ToolCall(name="run_tests", arguments={})),
                           recovery="The tests fail: the function is still a stub. I'll write the whole solution."))
    out.append(Mistake(kind="intermediate", at=at, calls=(ToolCall(name="run_tests", arguments={}),),
                       recovery="There is nothing to test yet; I'll write the solution first."))
    path = str(call.arguments.get("path", "solution.py"))
    out.append(Mistake(kind="bad_path", at=at, calls=(with_args(call, path=f"../{path}"),),
                       recovery=f"Files live in the work directory; I'll write {path} there."))
    return out
