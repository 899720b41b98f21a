"""Execution accuracy, hand-worked: multiset/set rows, column permutations, float tolerance, NULL,
types, outer ORDER BY only, empty results, the cap."""

from __future__ import annotations

import time

import pytest

from trajforge.envs.sql.compare import (REL_TOL, compare_results, expected_rows, gold_expected, ordered_by,
                                        same_result)
from trajforge.envs.sqlguard import ResultSet


def same(gold, got, ordered=False, as_set=False):
    width = lambda rows: len(rows[0]) if rows else 0  # noqa: E731
    return same_result(gold, width(gold), got, width(got), ordered=ordered, as_set=as_set)


def test_rows_are_a_multiset_unless_compared_as_a_set():
    gold = [("Lyon", 2), ("Berlin", 1)]
    assert same(gold, [("Berlin", 1), ("Lyon", 2)]).ok  # order does not count
    assert not same(gold, [("Berlin", 1), ("Lyon", 2), ("Lyon", 2)]).ok  # a duplicate does
    assert "3 rows; the gold result has 2" in same(gold, [("Berlin", 1), ("Lyon", 2), ("Lyon", 2)]).detail
    assert same(gold, [("Berlin", 1), ("Lyon", 2), ("Lyon", 2)], as_set=True).ok  # BIRD: a set
    assert not same(gold, [("Berlin", 1)], as_set=True).ok
    assert not same(gold, [("Berlin", 1), ("Lyon", 3)]).ok


def test_columns_match_up_to_a_permutation_never_by_name():
    gold = [("Lyon", 2, 10.5), ("Berlin", 1, 3.0)]
    assert same(gold, [(2, 10.5, "Lyon"), (1, 3.0, "Berlin")]).ok
    assert same(gold, [(10.5, "Lyon", 2), (3.0, "Berlin", 1)]).ok
    # The same values in the columns but paired differently within rows is another result.
    assert not same([("a", 1), ("b", 2)], [("a", 2), ("b", 1)]).ok
    assert "2 columns; the gold result has 3" in same(gold, [("Lyon", 2), ("Berlin", 1)]).detail
    # Two columns holding the same multiset of values: the permutation search tries both.
    assert same([(1, 2), (2, 1)], [(2, 1), (1, 2)]).ok
    assert same([(1, 2, "x"), (2, 1, "y")], [("x", 2, 1), ("y", 1, 2)]).ok


def test_numbers_compare_as_numbers_with_a_relative_tolerance():
    assert same([(3,)], [(3.0,)]).ok  # SUM (integer) and TOTAL (real) agree
    assert same([(0.1 + 0.2,)], [(0.3,)]).ok
    assert same([(1e12,)], [(1e12 * (1 + REL_TOL / 2),)]).ok
    assert not same([(1e12,)], [(1e12 * (1 + REL_TOL * 10),)]).ok
    assert not same([(34.5,)], [(34.0,)]).ok
    assert same([(0.0,)], [(1e-12,)]).ok  # an absolute floor for zeros
    assert not same([(2**60,)], [(2**60 + 1,)]).ok  # two integers: exactly
    # Tolerance survives sorting: rows whose floats are noisy still pair up.
    gold = [("a", 1.0000000001), ("a", 2.0), ("b", 0.5)]
    assert same(gold, [("b", 0.5000000001), ("a", 2.0000000001), ("a", 1.0)]).ok


def test_types_null_and_blobs():
    assert not same([("3",)], [(3,)]).ok  # text is not a number
    assert same([(None,), ("x",)], [("x",), (None,)]).ok  # NULL equals NULL
    assert not same([(None,)], [(0,)]).ok and not same([(None,)], [("",)]).ok
    assert same([(b"\x00\x01",)], [(b"\x00\x01",)]).ok and not same([(b"\x00",)], [(b"\x01",)]).ok
    assert not same([("a",)], [("A",)]).ok  # text exactly, as the benchmarks do


def test_order_counts_only_under_an_outer_order_by():
    gold = [("Ana", 52), ("Bo", 41), ("Cy", 25)]
    assert same(gold, [("Ana", 52), ("Bo", 41), ("Cy", 25)], ordered=True).ok
    reordered = same(gold, [("Bo", 41), ("Ana", 52), ("Cy", 25)], ordered=True)
    assert not reordered.ok and "not in the order" in reordered.detail
    assert same(gold, [(52, "Ana"), (41, "Bo"), (25, "Cy")], ordered=True).ok  # permuted, in order
    assert ordered_by("SELECT name FROM singer ORDER BY age DESC")
    assert ordered_by("select a from t union select b from u order\n by 1")
    assert ordered_by("SELECT year FROM concert GROUP BY year ORDER BY count(*) DESC LIMIT 1")
    assert not ordered_by("SELECT name FROM (SELECT name FROM singer ORDER BY age)")
    assert not ordered_by("WITH t AS (SELECT * FROM s ORDER BY x) SELECT * FROM t")
    assert not ordered_by("SELECT name, ROW_NUMBER() OVER (ORDER BY age) FROM singer")
    assert not ordered_by("SELECT 'order by' FROM t -- ORDER BY x")
    assert not ordered_by('SELECT "order by" FROM t /* order by */')


def test_two_empty_results_are_equal_whatever_their_columns():
    assert same_result([], 2, [], 1, ordered=False, as_set=False).ok
    assert not same([], [("x",)]).ok and not same([("x",)], []).ok


def test_stored_expectations_round_trip_and_a_cut_result_never_matches():
    gold = ResultSet(["name", "pic"], [("Ana", b"\xff"), ("Bo", None)], True)
    expected = gold_expected(gold, "SELECT name, pic FROM t ORDER BY name", "set")
    assert expected == {"columns": ["name", "pic"], "rows": [["Ana", {"blob": "ff"}], ["Bo", None]],
                        "ordered": True, "compare": "set"}
    assert expected_rows(expected) == [("Ana", b"\xff"), ("Bo", None)]
    assert compare_results(expected, ResultSet(["a", "b"], [(None, "Bo"), (b"\xff", "Ana")], True)).ok
    cut = compare_results(expected, ResultSet(["a", "b"], [("Ana", b"\xff")], False))
    assert not cut.ok and "cut at the cap" in cut.detail
    with pytest.raises(ValueError, match="compare must be one of"):
        gold_expected(gold, "SELECT 1", "bag")


def test_many_identical_columns_stay_fast():
    # 8 columns of one value: 8! assignments fit; the search stops at its bound, within a budget.
    width = 8
    gold = [tuple(range(width)) for _ in range(50)]
    got = [tuple(reversed(range(width))) for _ in range(50)]
    assert same(gold, got).ok
    flat = [(1,) * width for _ in range(50)]
    start = time.perf_counter()
    assert not same(flat, [(1,) * (width - 1) + (2,) for _ in range(50)]).ok
    assert time.perf_counter() - start < 2.0
