"""The row join's integer columns, row ranges and pieces (``render.rowjoin``): the compiled join and
its Python twin give the same bytes, and ranges and pieces concatenate to the whole join.

Integers are checked against Python's own ``str`` across the whole int64 and uint64 range (both
ends included), laid beside the other column forms."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traceread.render import rowjoin
from traceread.runner.ahead import mapped_ahead

EDGES = [0, 1, -1, 9, 10, -10, 2**63 - 1, -2**63, 10**18, -10**18]


def _columns(rng: np.random.Generator, n: int) -> tuple[list, list[list[bytes]]]:
    """A table of every column form, and its cells as Python writes them (an independent reading)."""
    signed = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64, endpoint=True)
    signed[:min(n, len(EDGES))] = EDGES[:n]
    unsigned = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    unsigned[:min(n, 2)] = [0, 2**64 - 1][:min(n, 2)]
    text = [bytes(rng.integers(32, 127, int(rng.integers(0, 30)), dtype=np.uint8)) for _ in range(n)]
    small = rng.integers(-5, 5, n).astype(np.int16)
    table = [b"", b"true", b"a much longer cell than sixteen bytes"]
    codes = rng.integers(-1, 3, n)
    columns = [signed, text, unsigned, rowjoin.integers(small), rowjoin.spread(table, codes)]
    expected = [[str(v).encode() for v in signed.tolist()], text, [str(v).encode() for v in unsigned.tolist()],
                [str(v).encode() for v in small.tolist()], [table[c] for c in codes.tolist()]]
    return columns, expected


@pytest.mark.parametrize("seed", range(5))
def test_integer_columns_and_ranges_as_python_writes_them(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    columns, expected = _columns(rng, n)
    pieces = [b"{", b":", b"%b,", b"|", b"\n", b"}"]
    whole = b";\n".join(b"".join(p + c for p, c in zip(pieces, [*row, b""], strict=True))
                        for row in zip(*expected, strict=True))
    assert rowjoin.join_python(pieces, columns, n, b";\n") == whole
    if rowjoin.COMPILED is not None:
        assert bytes(rowjoin.COMPILED.join(pieces, columns, n, b";\n")) == whole
    cuts = sorted(rng.integers(0, n + 1, 4).tolist())
    bounds = [0, *cuts, n]
    for join in filter(None, [rowjoin.join_python, rowjoin.COMPILED and rowjoin.COMPILED.join]):
        assert b"".join(bytes(join(pieces, columns, n, b";\n", lo, hi))
                        for lo, hi in zip(bounds, bounds[1:], strict=False)) == whole
    for size in (1, 100, 1 << 20):
        got = list(rowjoin.join_pieces(pieces, columns, n, b";\n", size))
        assert b"".join(got) == whole
        assert all(got) and (n == 0 or len(got) <= n)
    if rowjoin.COMPILED is not None:  # the compiled split: whole rows, each piece at least size bytes but the last
        rows = [len(rowjoin.join_python(pieces, columns, n, b";\n", i, i + 1)) for i in range(n)]
        for size in (1, 100, 700, 1 << 20):
            cuts, acc = [0], 0
            for i, r in enumerate(rows):
                acc += r
                if acc >= size or i == n - 1:
                    cuts.append(i + 1)
                    acc = 0
            want = [rowjoin.join_python(pieces, columns, n, b";\n", lo, hi) for lo, hi in zip(cuts, cuts[1:], strict=False)]
            assert rowjoin.COMPILED.join_split(pieces, columns, n, b";\n", size) == want


def test_bad_ranges_and_integer_columns_are_refused() -> None:
    ints = np.arange(3, dtype=np.int64)
    joins = [rowjoin.join_python] + ([rowjoin.COMPILED.join] if rowjoin.COMPILED is not None else [])
    for join in joins:
        assert join([b"", b""], [ints], 3, b",", 1, 3) == b",1,2"
        with pytest.raises(ValueError):
            join([b"", b""], [ints], 3, b",", 2, 1)  # hi before lo
        with pytest.raises(ValueError):
            join([b"", b""], [ints], 3, b",", 0, 4)  # past n
        with pytest.raises(ValueError):
            join([b"", b""], [ints.astype(np.int32)], 3, b",")  # not 64-bit
        with pytest.raises(ValueError):
            join([b"", b""], [ints.astype(np.float64)], 3, b",")  # not integers
        with pytest.raises(ValueError):
            join([b"", b""], [ints], 2, b",")  # not n values
    if rowjoin.COMPILED is not None:
        split = rowjoin.COMPILED.join_split
        assert split([b"", b""], [ints], 3, b",", 2) == [b"0,1", b",2"]
        for bad in ((3, 0), (-1, 5), (2, 5)):  # no size, negative n, not n values
            with pytest.raises(ValueError):
                split([b"", b""], [ints], bad[0], b",", bad[1])
        with pytest.raises(ValueError):
            split([b""], [ints], 3, b",", 5)  # pieces not one more than columns


def test_distinct_values_by_identity_compiled_and_python() -> None:
    shared = ["a sentence", "another", None, 1.5]
    equal_copies = ["".join(["a sent", "ence"]) for _ in range(3)]  # equal text, distinct objects
    values = [shared[i % 4] for i in range(40)] + equal_copies
    codes, firsts = rowjoin.distinct_python(values)
    assert [firsts[c] for c in codes.tolist()] == values
    assert len(firsts) == 4 + 3 and all(firsts[c] is v for c, v in zip(codes.tolist(), values, strict=True))
    if rowjoin.COMPILED is not None:
        raw, got = rowjoin.COMPILED.distinct(values)
        assert np.frombuffer(raw, dtype=np.int64).tolist() == codes.tolist() and got == firsts
    assert rowjoin.distinct(values) is not None
    assert rowjoin.distinct([str(i) for i in range(10)]) is None  # mostly distinct: not worth spreading


@pytest.mark.parametrize("kind", ["integer", "block"])
def test_sparse_rows_are_the_dense_slices(kind: str) -> None:
    rng = np.random.default_rng(1)
    n = 1000
    dense = np.where(rng.random(n) < 0.1, rng.integers(1, 50, n), 0)
    dense[-1] = 7  # a stored value at the very end
    columns = [pd.arrays.SparseArray(dense, fill_value=0, kind=kind),
               pd.arrays.SparseArray(dense > 20, fill_value=False, kind=kind),
               pd.arrays.SparseArray(np.where(dense > 0, dense * 0.5, np.nan), kind=kind)]  # NaN filled
    for column in columns:
        rows = rowjoin.SparseRows(column)
        for lo, hi in [(0, n), (0, 0), (3, 17), (n - 1, n), (500, 999)]:
            got, want = rows(lo, hi), np.asarray(column[lo:hi])
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_a_later_column_is_made_on_the_join_thread_with_the_same_bytes() -> None:
    # The CSV's float texts and the parts' layout are made where the block is joined, not where it is encoded.
    import threading

    table = rowjoin.separated(b"ab\ncd\n", ord("\n"))
    codes = np.array([[0, 1], [2, 0], [1, 1]], dtype=np.int32)
    where: list[str] = []

    def gather(*args):
        where.append(threading.current_thread().name)
        return rowjoin.gather(*args)

    floats = np.array([0.1, 1 / 3, float("nan")])
    now = [rowjoin.gather(table, codes, b'"', b'"'), rowjoin.separated(b"0.1,0.3333333333333333,", ord(","))]
    later = [rowjoin.Later(gather, table, codes, b'"', b'"')]
    if (reprs := rowjoin.float_reprs(floats)) is not None:
        assert isinstance(reprs, rowjoin.Later)
        later.append(reprs)
    else:
        later.append(now[1])
    pieces = [b"<", b"|", b">"]
    got = [b"".join(b) for b in mapped_ahead(iter([(pieces, later, 3, b"\n")]), rowjoin.join_block)]
    assert got == [rowjoin.join(pieces, now, 3, b"\n")] == [b'<"abcd"|0.1>\n<"ab"|0.3333333333333333>\n<"cdcd"|>']
    assert where and all(name.startswith("traceread-ahead") for name in where)
    assert rowjoin.join(pieces, later, 3, b"\n") == got[0]  # a direct join makes them too


def test_integers_at_every_power_of_ten_edge_as_python_writes_them() -> None:
    # The compiled join counts an integer's digits from its bit length: each edge of a digit count, both signs.
    signed = [0, 2**63 - 1, -2**63] + [s * (10**k + d) for k in range(19) for d in (-1, 0, 1) for s in (1, -1)]
    unsigned = [0, 2**64 - 1] + [10**k + d for k in range(20) for d in (-1, 0, 1) if 10**k + d < 2**64]
    for values, dtype in ((signed, np.int64), (unsigned, np.uint64)):
        a = np.array(values, dtype=dtype)
        want = b",".join(str(v).encode() for v in values)
        assert rowjoin.join_python([b"", b""], [a], len(a), b",") == want
        if rowjoin.COMPILED is not None:
            assert rowjoin.COMPILED.join([b"", b""], [a], len(a), b",") == want
            assert b"".join(rowjoin.COMPILED.join_split([b"", b""], [a], len(a), b",", 7)) == want


@pytest.mark.parametrize("cells", [b"", b",", b",,", b"0", b"1,2", b"-1,0,3.5,null", b"1" * 1000 + b"," * 3 + b"2",
                                   np.random.default_rng(7).integers(0, 3, 100_000).astype(str).tolist()])
def test_comma_spaced_is_replace_of_every_comma(cells) -> None:
    if isinstance(cells, list):  # orjson's cells of a dense numeric chunk
        cells = ",".join(cells).encode()
    want = cells.replace(b",", b", ")
    assert rowjoin.comma_spaced(cells) == want  # compiled, or the replace itself when switched off
    if rowjoin.COMPILED is not None:
        assert rowjoin.COMPILED.comma_spaced(cells) == want
        assert rowjoin.COMPILED.comma_spaced(bytearray(cells)) == want
