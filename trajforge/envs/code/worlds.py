"""The code environment's worlds: the same problems under other function names.

The code environment has no entity catalog to rename: a task is a function spec, its parameter
values (a multiplier, a letter, a modulus) and hidden tests. Its held-out axis is those parameter
values (``Param.heldout``) and the ``heldout_only`` templates, and neither can change across
worlds without leaking (a world drawing held-out values would be the held-out split). So a world
``w`` > 0 varies only what a model could otherwise memorise without reading the prompt:

* the function's name, drawn by ``random.Random("code-world|w")`` from ``FUNCTION_NAMES`` (the
  prompt, the hidden tests and the expert's solution follow it);
* through the task id (which includes the world), the hidden test inputs and the example the
  prompt shows.

Parameter values are drawn from the seen partition exactly as in world 0, so no held-out value
enters a world (``tests/tasks/test_worlds.py`` checks it).
"""

from __future__ import annotations

import dataclasses
import random
import re

from trajforge.envs.code.templates import TEMPLATES, Template

FUNCTION_NAMES: dict[str, tuple[str, ...]] = {
    "scale_sum": ("scaled_total", "sum_times", "multiplied_sum"),
    "count_letter": ("letter_count", "count_char", "occurrences"),
    "clamp": ("limit", "bound", "clip_value"),
    "add_suffix": ("append_suffix", "with_suffix", "suffixed"),
    "scale_max": ("scaled_max", "max_times", "largest_scaled"),
    "every_kth": ("take_every", "kth_items", "stride_pick"),
    "caesar": ("shift_letters", "rotate_text", "caesar_shift"),
    "count_long_words": ("long_word_count", "count_words_over", "wordy_count"),
    "fizz_words": ("fizzbuzz_words", "word_fizz", "fizz_list"),
    "drop_every_kth": ("skip_every", "remove_kth", "without_every"),
    "primes_mod": ("prime_residues", "primes_modulo", "mod_primes"),
    "balanced": ("is_balanced", "brackets_ok", "well_nested"),
    "top_words": ("most_common_words", "frequent_words", "word_ranking"),
    "run_length": ("rle_encode", "compress_runs", "encode_runs"),
    "to_base": ("in_base", "base_digits", "convert_base"),
    "nesting_depth": ("max_depth", "bracket_depth", "deepest_nesting"),
}
"""Other names each template's function may have (world 0 keeps ``Template.function``)."""


def world_templates(world: int = 0) -> tuple[Template, ...]:
    """The templates of ``world``: world 0's, each function renamed in a world > 0."""
    if world < 0:
        raise ValueError(f"a world number is 0 or more, not {world}")
    if world == 0:
        return TEMPLATES
    rng = random.Random(f"code-world|{world}")
    return tuple(renamed(t, rng.choice(FUNCTION_NAMES[t.id])) for t in TEMPLATES)


def renamed(template: Template, function: str) -> Template:
    """``template`` with its function called ``function`` (in the solution source too)."""
    word = re.compile(rf"\b{re.escape(template.function)}\b")
    return dataclasses.replace(template, function=function, solution=word.sub(function, template.solution))


__all__ = ["FUNCTION_NAMES", "renamed", "world_templates"]
