"""Row-wise text concatenation (``rules.textcat``): the compiled cat equals its Python twin (``"".join``
per row) on shared and distinct parts, non-ASCII text, fixed-width numpy text and empty inputs, shares
one string among rows with equal parts, and refuses what ``"".join`` refuses."""

from __future__ import annotations

import numpy as np
import pytest

from traceread.extensions import switched_off
from traceread.rules import textcat

WORDS = ["", "a", "12.3 us", "62%", "\u00b5s", "\u65e5\u672c", "\U0001f600", "x" * 40]


def _compiled() -> None:
    if textcat.COMPILED is None or switched_off(textcat.DISABLE_ENV):
        pytest.skip("the compiled cat was not built, or is switched off")


@pytest.mark.parametrize("seed", range(6))
def test_compiled_cat_equals_its_python_twin(seed: int) -> None:
    _compiled()
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 20_000))
    distinct = int(rng.integers(1, 3 * n + 2))  # from a few shared values to mostly distinct rows
    table = np.array([WORDS[i % len(WORDS)] + str(i) for i in range(distinct)], dtype=object)
    parts = ["start ", table[rng.integers(0, distinct, n)], " : ",
             np.array(WORDS, dtype=object)[rng.integers(0, len(WORDS), n)],
             np.array(WORDS)[rng.integers(0, len(WORDS), n)],  # fixed-width text: new objects per row
             np.array([str(i) for i in rng.integers(0, 5, n)], dtype=object), "\u00e9nd"]
    got = textcat.cat(*parts)
    want = textcat.cat_python(*parts)
    assert got.dtype == object and got.shape == (n,)
    assert got.tolist() == want.tolist()
    assert all(type(s) is str for s in got.tolist())


def test_rows_with_equal_parts_share_one_string() -> None:
    _compiled()
    n = 50_000
    dur = np.array(["1.0 us", "2.0 us"], dtype=object)[np.arange(n) % 2]
    copies = np.array(["x"], dtype=object).repeat(n)
    copies[:] = [str(v) for v in ["x"] * n]  # equal text, the same object or not
    out = textcat.cat("gap of ", dur, copies, np.full(n, "no host call", dtype=object))
    assert len({id(s) for s in out.tolist()}) == 2
    assert set(out.tolist()) == {"gap of 1.0 usxno host call", "gap of 2.0 usxno host call"}


def test_edge_shapes_and_refusals() -> None:
    assert textcat.cat("a", "b").tolist() == "ab"  # only strings: one 0-d result, as before
    assert textcat.cat("a", np.array([], dtype=object)).tolist() == []
    with pytest.raises(ValueError):
        textcat.cat(np.array(["a"], dtype=object), np.array(["b", "c"], dtype=object))
    with pytest.raises(TypeError):
        textcat.cat("a", np.array(["b", 3], dtype=object))
    with pytest.raises(TypeError):
        textcat.cat_python("a", np.array(["b", 3], dtype=object))


def test_switched_off_gives_the_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = ("p", np.array(["a", "b", "a"], dtype=object))
    monkeypatch.setenv(textcat.DISABLE_ENV, "1")
    assert textcat.cat(*parts).tolist() == ["pa", "pb", "pa"]


@pytest.mark.parametrize("seed", range(4))
def test_factorize_equals_pandas_factorize(seed: int) -> None:
    """``textcat.factorize`` (codes by identity, then the distinct objects by value) gives pandas'
    codes and first-appearance order: equal texts held by distinct objects, '' and non-ASCII text,
    rows of one shared object, empty input, and values that are not all str (pandas' own path)."""
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
    assert wide.rows() == textcat.cat_python("x", a, "", b, " y ", c).tolist()
    narrow = textcat.texts(b, n)
    cond = rng.random(n) < 0.5
    got = textcat.where_parts(cond, wide, narrow)  # wider filled into narrower
    assert got.rows() == np.where(cond, textcat.cat_python("x", a, b, " y ", c), b).tolist()
    got = textcat.where_parts(cond, narrow, wide)  # narrower filled into wider
    assert got.rows() == np.where(cond, b, textcat.cat_python("x", a, b, " y ", c)).tolist()
    got = textcat.where_parts(~cond, textcat.texts("", n), got)  # empty parts
    assert got.rows() == np.where(~cond, "", np.where(cond, b, textcat.cat_python("x", a, b, " y ", c))).tolist()
