"""Row-wise text concatenation (``rules.textcat``): ``cat`` equals a per-row concatenation written
out independently on shared and distinct parts, non-ASCII text, fixed-width numpy text and empty
inputs, and refuses what ``"".join`` refuses; ``factorize`` is pandas' factorize; the parts' matrix
(``Texts``) gives the same rows as ``cat``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traceread.rules import textcat

WORDS = ["", "a", "12.3 us", "62%", "\u00b5s", "\u65e5\u672c", "\U0001f600", "x" * 40]


@pytest.mark.parametrize("seed", range(6))
def test_cat_equals_rows_concatenated_one_by_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 5_000))
    distinct = int(rng.integers(1, 3 * n + 2))  # from a few shared values to mostly distinct rows
    table = np.array([WORDS[i % len(WORDS)] + str(i) for i in range(distinct)], dtype=object)
    parts = ["start ", table[rng.integers(0, distinct, n)], " : ",
             np.array(WORDS, dtype=object)[rng.integers(0, len(WORDS), n)],
             np.array(WORDS)[rng.integers(0, len(WORDS), n)],  # fixed-width text: new objects per row
             np.array([str(i) for i in rng.integers(0, 5, n)], dtype=object), "\u00e9nd"]
    got = textcat.cat(*parts)
    want = []
    for i in range(n):
        row = ""
        for p in parts:
            row += p if isinstance(p, str) else str(p[i])
        want.append(row)
    assert got.dtype == object and got.shape == (n,)
    assert got.tolist() == want
    assert all(type(s) is str for s in got.tolist())


def test_edge_shapes_and_refusals() -> None:
    assert textcat.cat("a", "b").tolist() == "ab"  # only strings: one 0-d result, as before
    assert textcat.cat("a", np.array([], dtype=object)).tolist() == []
    assert textcat.cat("p", np.array(["a", "b", "a"], dtype=object)).tolist() == ["pa", "pb", "pa"]
    with pytest.raises(ValueError):
        textcat.cat(np.array(["a"], dtype=object), np.array(["b", "c"], dtype=object))
    with pytest.raises(TypeError):
        textcat.cat("a", np.array(["b", 3], dtype=object))


@pytest.mark.parametrize("seed", range(4))
def test_factorize_equals_pandas_factorize(seed: int) -> None:
    """``textcat.factorize`` gives pandas' codes and first-appearance order: equal texts held by
    distinct objects, '' and non-ASCII text, rows of one shared object, empty input, and values that
    are not all str."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 5_000))
    shared = np.array(WORDS, dtype=object)
    values = shared[rng.integers(0, len(WORDS), n)]
    fresh = rng.random(n) < 0.3  # the same texts as new objects (equal, not identical)
    values[fresh] = ["".join(list(s)) + "" for s in values[fresh].tolist()]
    cases = [values, np.array([], dtype=object), np.full(7, "", dtype=object),
             np.array(["b", "a", "b", None, "a", float("nan")], dtype=object), np.array(["1", 1, "1"], dtype=object)]
    for case in cases:
        got, uniq = textcat.factorize(case)
        want, want_uniq = pd.factorize(case, use_na_sentinel=False)
        assert got.tolist() == want.tolist()
        assert [repr(u) for u in uniq.tolist()] == [repr(u) for u in want_uniq.tolist()]
        assert uniq.dtype == object


@pytest.mark.parametrize("seed", range(6))
def test_parts_stacked_and_filled_equal_the_str_texts(seed: int) -> None:
    """``cat_parts``, ``where_parts`` and ``fill`` (codes written into one matrix) give the rows
    ``cat``/``np.where`` give: parts of different widths, empty parts, no rows, rows filled twice."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    words = np.array(WORDS, dtype=object)

    def col() -> np.ndarray:
        return words[rng.integers(0, len(WORDS), n)]

    a, b, c = col(), col(), col()
    wide = textcat.cat_parts("x", a, "", b, " y ", c, n=n)
    assert wide.rows() == textcat.cat("x", a, "", b, " y ", c).tolist()
    narrow = textcat.texts(b, n)
    cond = rng.random(n) < 0.5
    got = textcat.where_parts(cond, wide, narrow)  # wider filled into narrower
    assert got.rows() == np.where(cond, textcat.cat("x", a, b, " y ", c), b).tolist()
    got = textcat.where_parts(cond, narrow, wide)  # narrower filled into wider
    assert got.rows() == np.where(cond, b, textcat.cat("x", a, b, " y ", c)).tolist()
    got = textcat.where_parts(~cond, textcat.texts("", n), got)  # empty parts
    assert got.rows() == np.where(~cond, "", np.where(cond, b, textcat.cat("x", a, b, " y ", c))).tolist()


@pytest.mark.parametrize("n", [10, 5000, 50_000])
def test_factorize_is_pandas_factorize(n):
    """Told apart by identity first, merged by value: the codes and first-appearance order pandas gives,
    with equal texts held by distinct objects, None, NaN and numbers among them."""
    rng = np.random.default_rng(n)
    pool = ["launch", "dense-dispatch", "", "host-work", None, float("nan"), 3, "launch"[:3] + "nch"]
    # distinct str objects with one value: ''.join makes a new object each time
    pool += ["".join(["dense", "-", "dispatch"]), "".join(["", ""]), float("nan")]
    values = np.empty(n, dtype=object)
    values[:] = [pool[i] for i in rng.integers(0, len(pool), n)]
    want_codes, want_uniq = pd.factorize(values, use_na_sentinel=False)
    codes, uniq = textcat.factorize(values)
    np.testing.assert_array_equal(codes, want_codes)
    assert codes.dtype == want_codes.dtype
    assert [repr(u) for u in uniq] == [repr(u) for u in want_uniq]
    # a strided view reads the same
    c2, u2 = textcat.factorize(values[::2])
    w2, wu2 = pd.factorize(values[::2], use_na_sentinel=False)
    np.testing.assert_array_equal(c2, w2)
    assert [repr(u) for u in u2] == [repr(u) for u in wu2]
