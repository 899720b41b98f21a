"""``--shard I/N`` slices: disjoint, covering, balanced, nesting; bad specs say what they expect."""

import pytest

from trajforge.tasks.slices import WHOLE, Slice


@pytest.mark.parametrize("count", [1, 2, 3, 7, 40])
def test_slices_are_disjoint_cover_the_pool_and_differ_by_at_most_one(count):
    pool = list(range(39))
    parts = [Slice(i, count).of(pool) for i in range(count)]
    flat = [x for part in parts for x in part]
    assert sorted(flat) == pool and len(flat) == len(set(flat))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert all(part == sorted(part) for part in parts)  # pool order is kept


def test_a_split_slice_is_covered_exactly_by_its_parts_and_they_are_slices_of_the_pool():
    pool = [f"task-{i}" for i in range(50)]
    outer = Slice(1, 3)
    inner = outer.split(4)
    assert inner == [Slice(1, 12), Slice(4, 12), Slice(7, 12), Slice(10, 12)]
    got = [x for part in inner for x in part.of(pool)]
    assert sorted(got) == sorted(outer.of(pool)) and len(got) == len(set(got))
    # The r-th worker of a slice gets what the r-th of its own slicing would get.
    for r, part in enumerate(inner):
        assert part.of(pool) == outer.of(pool)[r::4]
    assert WHOLE.split(2) == [Slice(0, 2), Slice(1, 2)] and WHOLE.of(pool) == pool


@pytest.mark.parametrize("text", ["2/2", "1", "a/3", "-1/3", "0/0", "1/ ", "1//2", ""])
def test_bad_shard_specs_say_what_is_expected(text):
    with pytest.raises(ValueError, match="expected I/N with 0 <= I < N"):
        Slice.parse(text)


def test_shard_specs_parse_and_print_alike():
    assert Slice.parse(" 3/8 ") == Slice(3, 8) and str(Slice(3, 8)) == "3/8"
