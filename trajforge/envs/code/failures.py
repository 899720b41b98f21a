"""How a submitted solution failed its hidden tests (the ``code`` spec's ``wrong_answer`` hook).

Read off the test report in the verdict's detail (``hidden.py`` writes it):

- ``syntax_error``: the module does not parse (``SyntaxError``, ``IndentationError``);
- ``import_error``: it parses but importing it raised;
- ``missing_function``: it imports but defines no function of the asked name;
- ``tests_timeout``: the run did not finish in time (an infinite loop, a very slow function);
- ``crashed_run``: the run ended before reporting (the code exited the process, was killed);
- ``unreadable_results``: the runner's report was tampered with or unreadable;
- ``tests_failed``: the tests ran and some returned the wrong value or raised.
"""

from __future__ import annotations

import re

from trajforge.schema import Trajectory

_PARSE_ERRORS = re.compile(r"\b(SyntaxError|IndentationError|TabError)\b")
_RUN_ERRORS = (("defines no function", "missing_function"),
               ("did not finish within", "tests_timeout"),
               ("ended before reporting", "crashed_run"),
               ("could not be read", "unreadable_results"))


def wrong_answer_kind(traj: Trajectory) -> str | None:
    detail = traj.verdict.detail if traj.verdict else ""
    # Only the report's head is the judge's own text: the failing calls after it quote what the
    # code raised ("raised ValueError: did not finish within...") and the printed output after
    # them anything at all, so a solution could otherwise pick its own fail reason.
    report = detail.split("\nFailures:", 1)[0].split("\nYour code printed:", 1)[0]
    if "\nImporting " in report:
        return "syntax_error" if _PARSE_ERRORS.search(report) else "import_error"
    return next((kind for phrase, kind in _RUN_ERRORS if phrase in report), "tests_failed")
