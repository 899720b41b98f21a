"""The code templates: one function-writing problem each, with its oracle and the expert's solution.

A template has parameters with seen and held-out values (``Param``), a spec formatted with them,
an *oracle* (a trusted Python function computing the expected value), an input generator for the
hidden tests (edge cases first) and the solution source the expert writes. ``tasks.py`` turns
them into verified tasks.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trajforge.schema import Tier

WORDS: tuple[str, ...] = (
    "apple", "river", "stone", "cloud", "tiger", "garden", "window", "pencil", "mountain",
    "sun", "cat", "dog", "tree", "book", "lamp", "ocean", "planet", "music", "bridge", "forest",
    "information", "environment", "programming", "a", "an", "the", "is", "of", "banana",
    "yellow", "quiet", "zebra", "jump", "wizard", "mystery", "velvet", "umbrella", "kettle",
)
SMALL_VOCAB: tuple[str, ...] = ("red", "blue", "green", "cat", "dog", "sun", "moon", "tea")


@dataclass(frozen=True)
class Param:
    """One template parameter and the values each partition may use."""

    name: str
    seen: tuple[Any, ...]
    heldout: tuple[Any, ...]


@dataclass(frozen=True)
class Template:
    """A function-writing problem with its oracle, test inputs and the expert's solution."""

    id: str
    tier: Tier
    function: str
    signature: str
    """The parameter list shown in the prompt: ``nums``."""
    spec: str
    """What the function returns, formatted with the parameter values."""
    params: tuple[Param, ...]
    oracle: Callable[..., Any]
    """``oracle(values, *args)``: the trusted expected value."""
    inputs: Callable[[random.Random, dict[str, Any]], list[list[Any]]]
    """Argument lists for the hidden tests (edge cases first)."""
    solution: str
    """The expert's module source, formatted with the parameter values."""
    plan: str
    """How the solution works, in a few words, for the expert's first sentence."""
    derive: Callable[[dict[str, Any]], dict[str, Any]] = field(default=lambda v: {})
    """Extra values computed from the parameters (``hi = lo + width``)."""
    heldout_only: bool = False

    def values(self, params: dict[str, Any]) -> dict[str, Any]:
        return {**params, **self.derive(params)}


# ---- input generators -------------------------------------------------------------------------

def _int_lists(rng: random.Random, n: int = 7, lo: int = -20, hi: int = 20,
               max_len: int = 8) -> list[list[Any]]:
    return [[[rng.randint(lo, hi) for _ in range(rng.randint(1, max_len))]] for _ in range(n)]


def _sentence(rng: random.Random, vocab: tuple[str, ...] = WORDS, lo: int = 3, hi: int = 9,
              capitals: bool = True) -> str:
    words = [rng.choice(vocab) for _ in range(rng.randint(lo, hi))]
    if capitals:
        words = [w.capitalize() if rng.random() < 0.3 else w for w in words]
    return " ".join(words)


def _sentences(rng: random.Random, n: int = 7, **kw: Any) -> list[list[Any]]:
    return [[_sentence(rng, **kw)] for _ in range(n)]


def _brackets(rng: random.Random, pairs: str, depth: int = 3) -> str:
    """A balanced string over ``pairs`` with letters between brackets."""
    out = []
    for _ in range(rng.randint(1, 3)):
        if depth and rng.random() < 0.7:
            i = rng.randrange(0, len(pairs), 2)
            out.append(pairs[i] + _brackets(rng, pairs, depth - 1) + pairs[i + 1])
        else:
            out.append(rng.choice("abxyz "))
    return "".join(out)


def _bracket_cases(rng: random.Random, v: dict[str, Any]) -> list[list[Any]]:
    pairs, other = v["pairs"], v["ignored"]
    good = [_brackets(rng, pairs) for _ in range(5)]
    bad = [good[0] + pairs[1],                     # a stray closer
           pairs[0] + good[1],                     # never closed
           pairs[1] + pairs[0] + good[4],          # closed before opened
           good[2] + pairs[0] + good[3]]           # one opener too many in the middle
    if len(pairs) >= 4:
        bad.append(pairs[0] + pairs[2] + pairs[1] + pairs[3])  # crossed: ([)]
    return [[""], [other + "x" + other]] + [[s] for s in good + bad]


def _ordinal(k: int) -> str:
    return f"{k}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(k if k < 20 else k % 10, 'th')}"


def _prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def _caesar(text: str, k: int) -> str:
    return "".join(chr((ord(c) - 97 + k) % 26 + 97) if "a" <= c <= "z" else c for c in text)


def _top_words(text: str, k: int) -> list[str]:
    counts = Counter(text.lower().split())
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def _run_length(text: str, sep: str) -> str:
    runs: list[str] = []
    for ch in text:
        if runs and runs[-1][-1] == ch and runs[-1][:-1].isdigit():
            runs[-1] = f"{int(runs[-1][:-1]) + 1}{ch}"
        else:
            runs.append(f"1{ch}")
    return sep.join(runs)


def _to_base(n: int, base: int) -> str:
    digits = []
    while True:
        n, d = divmod(n, base)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[d])
        if n == 0:
            return "".join(reversed(digits))


def _depth(text: str, pairs: str) -> int:
    opens = {pairs[i]: pairs[i + 1] for i in range(0, len(pairs), 2)}
    stack: list[str] = []
    deepest = 0
    for ch in text:
        if ch in opens:
            stack.append(opens[ch])
            deepest = max(deepest, len(stack))
        elif ch in opens.values() and (not stack or stack.pop() != ch):
            return -1
    return -1 if stack else deepest


def _pairs_text(pairs: str) -> str:
    items = [f"{pairs[i]}{pairs[i + 1]}" for i in range(0, len(pairs), 2)]
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else items[0]


def _bracket_values(v: dict[str, Any]) -> dict[str, Any]:
    ignored = next(c for c in "<{[(" if c not in v["pairs"])
    return {"pairs_text": _pairs_text(v["pairs"]), "ignored": ignored}


# ---- templates --------------------------------------------------------------------------------

_K_SCALE = Param("k", tuple(k for k in range(2, 31) if k not in (7, 13, 16, 21)), (7, 13, 16, 21))
_BRACKETS = Param("pairs", ("()", "[]", "{}", "()[]", "(){}", "[]{}", "()[]{}"),
                  ("()<>", "[]<>", "{}<>"))
TEMPLATES: tuple[Template, ...] = (
    # ---- easy: one expression --------------------------------------------------------------
    Template(
        id="scale_sum", tier="easy", function="scale_sum", signature="nums",
        spec="returns the sum of the integers in the list `nums` multiplied by {k}.",
        params=(_K_SCALE,), oracle=lambda v, nums: sum(nums) * v["k"],
        inputs=lambda rng, v: [[[]], [[1]]] + _int_lists(rng),
        solution="def scale_sum(nums):\n    total = 0\n    for x in nums:\n        total += x\n"
                 "    return total * {k}\n",
        plan="it adds up the list and multiplies the total by {k}"),
    Template(
        id="count_letter", tier="easy", function="count_letter", signature="text",
        spec="returns how many times the letter '{ch}' appears in the string `text`, counting "
             "both lowercase and uppercase.",
        params=(Param("ch", tuple("abcdeghiklnoprst"), tuple("muwy")),),
        oracle=lambda v, text: sum(c in (v["ch"], v["ch"].upper()) for c in text),
        inputs=lambda rng, v: [[""], [v["ch"] * 3], [v["ch"].upper() + "x" + v["ch"]]]
        + _sentences(rng),
        solution="def count_letter(text):\n    return text.lower().count({ch!r})\n",
        plan="it lowercases the text and counts '{ch}'"),
    Template(
        id="clamp", tier="easy", function="clamp", signature="x",
        spec="returns `x` limited to the range {lo} to {hi}: {lo} when `x` is below {lo}, {hi} "
             "when it is above {hi}, otherwise `x` itself.",
        params=(Param("lo", (-20, -15, -10, -5, 0, 1, 2, 5, 10, 15, 20), (-3, 3, 25)),
                Param("width", (5, 10, 20, 50), (7, 30))),
        derive=lambda v: {"hi": v["lo"] + v["width"]},
        oracle=lambda v, x: min(max(x, v["lo"]), v["hi"]),
        inputs=lambda rng, v: [[v["lo"] - 1], [v["lo"]], [v["hi"]], [v["hi"] + 1]]
        + [[rng.randint(v["lo"] - 30, v["hi"] + 30)] for _ in range(6)],
        solution="def clamp(x):\n    if x < {lo}:\n        return {lo}\n    if x > {hi}:\n"
                 "        return {hi}\n    return x\n",
        plan="it returns {lo} below the range, {hi} above it and x otherwise"),
    Template(
        id="add_suffix", tier="easy", function="add_suffix", signature="words",
        spec="returns a new list with the text {suffix!r} added to the end of every string in "
             "the list `words`.",
        params=(Param("suffix", ("ing", "ed", "s", "_x", "-1", "!", "er", "42"),
                      ("ly", "?", "_v2")),),
        oracle=lambda v, words: [w + v["suffix"] for w in words],
        inputs=lambda rng, v: [[[]], [[""]]] + [[[rng.choice(WORDS) for _ in range(
            rng.randint(1, 5))]] for _ in range(6)],
        solution="def add_suffix(words):\n    return [word + {suffix!r} for word in words]\n",
        plan="a list comprehension appends {suffix!r} to each word"),
    Template(  # held-out cousin of scale_sum: max instead of sum, plus an empty-list rule
        id="scale_max", tier="easy", function="scale_max", signature="nums",
        spec="returns the largest integer in the list `nums` multiplied by {k}, or 0 when the "
             "list is empty.",
        params=(_K_SCALE,), heldout_only=True,
        oracle=lambda v, nums: max(nums) * v["k"] if nums else 0,
        inputs=lambda rng, v: [[[]], [[-4, -9]]] + _int_lists(rng),
        solution="def scale_max(nums):\n    if not nums:\n        return 0\n"
                 "    return max(nums) * {k}\n",
        plan="it returns 0 for an empty list and otherwise the maximum times {k}"),
    # ---- medium: a loop with a rule --------------------------------------------------------
    Template(
        id="every_kth", tier="medium", function="every_kth", signature="items",
        spec="returns every {kth} element of the list `items`, starting with the element at "
             "index {start} (so the elements at indexes {start}, {i2}, {i3}, and so on).",
        params=(Param("k", (2, 3, 4), (5, 6)), Param("start", (0, 1, 2), (3,))),
        derive=lambda v: {"kth": _ordinal(v["k"]), "i2": v["start"] + v["k"],
                          "i3": v["start"] + 2 * v["k"]},
        oracle=lambda v, items: items[v["start"]::v["k"]],
        inputs=lambda rng, v: [[[]], [list(range(v["start"]))]]
        + _int_lists(rng, n=6, lo=0, hi=99, max_len=16) + [[list("abcdefghijklmnop")]],
        solution="def every_kth(items):\n    result = []\n    i = {start}\n"
                 "    while i < len(items):\n        result.append(items[i])\n"
                 "        i += {k}\n    return result\n",
        plan="it walks the list from index {start} in steps of {k}"),
    Template(
        id="caesar", tier="medium", function="caesar", signature="text",
        spec="returns `text` with every lowercase letter a-z shifted {k} places forward in the "
             "alphabet, wrapping around from z to a; all other characters stay unchanged.",
        params=(Param("k", tuple(k for k in range(1, 26) if k not in (5, 13, 18, 24)),
                      (5, 13, 18, 24)),),
        oracle=lambda v, text: _caesar(text, v["k"]),
        inputs=lambda rng, v: [[""], ["abc xyz"], ["Hello, World!"]]
        + [[_sentence(rng) + rng.choice(".!?,")] for _ in range(6)],
        solution="def caesar(text):\n    out = []\n    for c in text:\n"
                 "        if 'a' <= c <= 'z':\n"
                 "            c = chr((ord(c) - ord('a') + {k}) % 26 + ord('a'))\n"
                 "        out.append(c)\n    return ''.join(out)\n",
        plan="it shifts each lowercase letter by {k} modulo 26"),
    Template(
        id="count_long_words", tier="medium", function="count_long_words", signature="text",
        spec="returns how many words in the string `text` (words are separated by whitespace) "
             "have more than {k} characters.",
        params=(Param("k", (2, 3, 4, 5, 6), (7, 8)),),
        oracle=lambda v, text: sum(len(w) > v["k"] for w in text.split()),
        inputs=lambda rng, v: [[""], ["  " + "x" * (v["k"] + 1) + "  "], ["x" * v["k"]]]
        + _sentences(rng, capitals=False),
        solution="def count_long_words(text):\n    count = 0\n    for word in text.split():\n"
                 "        if len(word) > {k}:\n            count += 1\n    return count\n",
        plan="it splits the text and counts words longer than {k} characters"),
    Template(
        id="fizz_words", tier="medium", function="fizz_words", signature="n",
        spec="returns a list of strings for the numbers 1 to `n`: '{wa}' for multiples of {a}, "
             "'{wb}' for multiples of {b}, '{wa}{wb}' for multiples of both, and the number "
             "itself as a string otherwise.",
        params=(Param("pair", ((3, 5), (2, 7), (3, 4), (2, 5), (4, 6)), ((3, 7), (5, 6))),
                Param("words", (("Fizz", "Buzz"), ("Foo", "Bar"), ("Ping", "Pong")),
                      (("Zig", "Zag"), ("Tic", "Tac")))),
        derive=lambda v: {"a": v["pair"][0], "b": v["pair"][1], "wa": v["words"][0],
                          "wb": v["words"][1]},
        oracle=lambda v, n: [(v["wa"] if i % v["a"] == 0 else "")
                             + (v["wb"] if i % v["b"] == 0 else "") or str(i)
                             for i in range(1, n + 1)],
        inputs=lambda rng, v: [[0], [1], [v["a"] * v["b"]]]
        + [[rng.randint(2, 20)] for _ in range(5)],
        solution="def fizz_words(n):\n    out = []\n    for i in range(1, n + 1):\n"
                 "        word = ''\n        if i % {a} == 0:\n            word += {wa!r}\n"
                 "        if i % {b} == 0:\n            word += {wb!r}\n"
                 "        out.append(word or str(i))\n    return out\n",
        plan="for each number it adds '{wa}' and '{wb}' by divisibility"),
    Template(  # held-out cousin of every_kth: remove instead of keep, counted from 1
        id="drop_every_kth", tier="medium", function="drop_every_kth", signature="items",
        spec="returns the list `items` without every {kth} element: counting from 1, the "
             "elements at positions {k}, {k2}, {k3}, and so on are removed.",
        params=(Param("k", (2,), (3, 4, 5)),), heldout_only=True,
        derive=lambda v: {"kth": _ordinal(v["k"]), "k2": 2 * v["k"], "k3": 3 * v["k"]},
        oracle=lambda v, items: [x for i, x in enumerate(items, 1) if i % v["k"]],
        inputs=lambda rng, v: [[[]], [list(range(v["k"] - 1))]]
        + _int_lists(rng, n=6, lo=0, hi=99, max_len=16),
        solution="def drop_every_kth(items):\n"
                 "    return [x for i, x in enumerate(items) if (i + 1) % {k} != 0]\n",
        plan="it keeps the items whose 1-based position is not a multiple of {k}"),
    # ---- hard: an algorithm ----------------------------------------------------------------
    Template(
        id="primes_mod", tier="hard", function="primes_mod", signature="n",
        spec="returns the sorted list of prime numbers smaller than `n` that leave a remainder "
             "of {r} when divided by {m}.",
        params=(Param("mr", ((4, 1), (4, 3), (3, 1), (3, 2), (6, 1), (6, 5), (10, 1), (10, 3),
                             (10, 9), (8, 1), (8, 5), (8, 7), (12, 1), (12, 5), (12, 7), (12, 11)),
                      ((5, 2), (5, 4), (8, 3), (10, 7))),),
        derive=lambda v: {"m": v["mr"][0], "r": v["mr"][1]},
        oracle=lambda v, n: [p for p in range(n) if _prime(p) and p % v["m"] == v["r"]],
        inputs=lambda rng, v: [[0], [2], [3], [v["m"] + v["r"] + 1]]
        + [[rng.randint(10, 150)] for _ in range(5)],
        solution="def primes_mod(n):\n    if n < 3:\n        return []\n"
                 "    sieve = [True] * n\n    sieve[0] = sieve[1] = False\n"
                 "    for i in range(2, int(n ** 0.5) + 1):\n        if sieve[i]:\n"
                 "            for j in range(i * i, n, i):\n                sieve[j] = False\n"
                 "    return [p for p in range(n) if sieve[p] and p % {m} == {r}]\n",
        plan="a sieve finds the primes below n, then it keeps those with remainder {r} mod {m}"),
    Template(
        id="balanced", tier="hard", function="balanced", signature="text",
        spec="returns True if the brackets {pairs_text} in the string `text` are balanced "
             "(every opening bracket is closed by its matching bracket, in the right order) "
             "and False otherwise. All other characters are ignored.",
        params=(_BRACKETS,), derive=_bracket_values,
        oracle=lambda v, text: _depth(text, v["pairs"]) >= 0,
        inputs=_bracket_cases,
        solution="def balanced(text):\n    pairs = {pairs!r}\n"
                 "    closer = {{pairs[i]: pairs[i + 1] for i in range(0, len(pairs), 2)}}\n"
                 "    stack = []\n    for c in text:\n        if c in closer:\n"
                 "            stack.append(closer[c])\n"
                 "        elif c in closer.values():\n"
                 "            if not stack or stack.pop() != c:\n                return False\n"
                 "    return not stack\n",
        plan="a stack of expected closing brackets checks the order"),
    Template(
        id="top_words", tier="hard", function="top_words", signature="text",
        spec="returns the {k} most frequent words in the string `text` as a list, most frequent "
             "first. Words are separated by whitespace and compared in lowercase; words with "
             "the same count come in alphabetical order. If there are fewer than {k} distinct "
             "words, return them all.",
        params=(Param("k", (1, 2, 3, 6), (4, 5)),),
        oracle=lambda v, text: _top_words(text, v["k"]),
        inputs=lambda rng, v: [[""], ["Tea"]]
        + _sentences(rng, vocab=SMALL_VOCAB, lo=4, hi=14),
        solution="def top_words(text):\n    counts = {{}}\n    for word in text.lower().split():\n"
                 "        counts[word] = counts.get(word, 0) + 1\n"
                 "    ranked = sorted(counts, key=lambda w: (-counts[w], w))\n"
                 "    return ranked[:{k}]\n",
        plan="it counts lowercase words in a dict and sorts by count, then alphabetically"),
    Template(
        id="run_length", tier="hard", function="run_length", signature="text",
        spec="returns the run-length encoding of the string `text`: each run of the same "
             "character becomes the run's length followed by the character, and the runs are "
             "joined with {sep!r}. For example 'aaab' becomes {example!r}.",
        params=(Param("sep", ("", "-", ",", " ", ".", ":", "+", "_"), ("|", ";", "/")),),
        derive=lambda v: {"example": _run_length("aaab", v["sep"])},
        oracle=lambda v, text: _run_length(text, v["sep"]),
        inputs=lambda rng, v: [[""], ["a"], ["zzzzzzzzzzzz"]]
        + [["".join(rng.choice("aab c") * rng.randint(1, 4) for _ in range(rng.randint(2, 7)))]
           for _ in range(6)],
        solution="def run_length(text):\n    runs = []\n    i = 0\n    while i < len(text):\n"
                 "        j = i\n        while j < len(text) and text[j] == text[i]:\n"
                 "            j += 1\n        runs.append(str(j - i) + text[i])\n        i = j\n"
                 "    return {sep!r}.join(runs)\n",
        plan="it scans each run of equal characters and joins the counts with {sep!r}"),
    Template(
        id="to_base", tier="hard", function="to_base", signature="n",
        spec="returns the non-negative integer `n` written in base {b} as a string, using the "
             "digits 0-9 and then lowercase letters a-z for digit values from 10 up; 0 is '0'.",
        params=(Param("b", (2, 4, 5, 6, 8, 9, 11, 14, 16, 20, 36), (3, 7, 12, 30)),),
        oracle=lambda v, n: _to_base(n, v["b"]),
        inputs=lambda rng, v: [[0], [1], [v["b"]], [v["b"] - 1], [v["b"] ** 3 + 5]]
        + [[rng.randint(2, 100_000)] for _ in range(5)],
        solution="def to_base(n):\n    digits = '0123456789abcdefghijklmnopqrstuvwxyz'\n"
                 "    if n == 0:\n        return '0'\n    out = ''\n    while n > 0:\n"
                 "        out = digits[n % {b}] + out\n        n //= {b}\n    return out\n",
        plan="it takes remainders mod {b} and prepends the matching digit"),
    Template(  # held-out cousin of balanced: report the depth instead of a bool
        id="nesting_depth", tier="hard", function="nesting_depth", signature="text",
        spec="returns the deepest nesting level of the brackets {pairs_text} in the string "
             "`text` (0 when there are none), or -1 when those brackets are not balanced. All "
             "other characters are ignored.",
        params=(_BRACKETS,), derive=_bracket_values, heldout_only=True,
        oracle=lambda v, text: _depth(text, v["pairs"]),
        inputs=_bracket_cases,
        solution="def nesting_depth(text):\n    pairs = {pairs!r}\n"
                 "    closer = {{pairs[i]: pairs[i + 1] for i in range(0, len(pairs), 2)}}\n"
                 "    stack = []\n    deepest = 0\n    for c in text:\n"
                 "        if c in closer:\n            stack.append(closer[c])\n"
                 "            deepest = max(deepest, len(stack))\n"
                 "        elif c in closer.values():\n"
                 "            if not stack or stack.pop() != c:\n                return -1\n"
                 "    return -1 if stack else deepest\n",
        plan="a stack tracks open brackets and the deepest it gets"),
)
TEMPLATES_BY_ID: dict[str, Template] = {t.id: t for t in TEMPLATES}
