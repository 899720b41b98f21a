"""scan.match_close, the string-aware bracket matcher every dialect finds call extents with."""

from hypothesis import given, settings
from hypothesis import strategies as st

from trajforge.parse.scan import match_close


def reference(text: str, start: int, quotes: str) -> int | None:
    """One character at a time: the plain definition match_close must agree with."""
    depth, quote, esc = 0, "", False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                quote = ""
            continue
        if ch in quotes:
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


soup = st.lists(st.sampled_from(list("[]{}()\"'\\ab, :") + ["[[[", "]]]", '\\"', "{{", "}}"]), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=soup, data=st.data())
def test_match_close_agrees_with_the_character_scanner(text, data):
    start = data.draw(st.integers(0, max(len(text) - 1, 0)))
    for quotes in ("\"'", '"'):
        assert match_close(text, start, quotes) == reference(text, start, quotes)


def test_deep_nesting_is_one_step_per_run():
    deep = "[" * 200_000 + "]" * 200_000
    assert match_close(deep, 0) == len(deep) and match_close(deep[:-1], 0) is None
    assert match_close('{"a": "}]\\"}", "b": [1, {"c": ")"}]} tail', 0) == len('{"a": "}]\\"}", "b": [1, {"c": ")"}]}')
