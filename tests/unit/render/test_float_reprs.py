"""Floats' CSV cells (``rowjoin.float_reprs``: the compiled ``_cjoin.reprs``, whose ``_frepr.c`` formats
most values without the GIL and gives the doubtful rest to Python's own formatter) are byte for byte
Python's ``repr`` (NaN: an empty cell), and ``csv_table``'s Python twin writes the same bytes.

Over ten million values of several kinds: random bit patterns (every exponent, subnormals, inf,
NaN payloads), ratios of nanosecond counts (the overlap fractions a gaps table writes), values a few
ulps from powers of ten and two and from repr's and the fast path's boundaries, integers, decimals of
15 to 17 significant digits, dyadic fractions (whose scaled value can fall exactly halfway between
two candidates) and both signs. The reference is ``repr`` itself, not a second implementation.
"""

from __future__ import annotations

import numpy as np
import pytest

from traceread.render import csv_table, rowjoin

COMPILED = rowjoin.COMPILED
pytestmark = pytest.mark.skipif(COMPILED is None, reason="traceread.render._cjoin was not built")


def _bits(a: np.ndarray, rng: np.random.Generator, spread: int) -> np.ndarray:
    """Values within ``spread`` ulps of each of ``a`` (stepping the bit pattern; both signs kept)."""
    bits = np.asarray(a, dtype=np.float64).view(np.int64)
    return (bits + rng.integers(-spread, spread + 1, len(bits))).view(np.float64)


def _ratios(rng: np.random.Generator, n: int) -> np.ndarray:
    """Overlap fractions: parts of nanosecond durations (1 ns to ~100 s) over them, some exactly 0 or 1."""
    dur = np.exp(rng.uniform(0, np.log(1e11), n)).astype(np.int64) + 1
    part = (dur * rng.random(n)).astype(np.int64)
    part[rng.random(n) < 0.1] = 0
    whole = rng.random(n) < 0.1
    part[whole] = dur[whole]
    return part / dur


def _kind(name: str, rng: np.random.Generator) -> np.ndarray:
    n = 1_000_000
    if name == "bit patterns":  # mostly doubtful values (Python's formatter): fewer
        return np.frombuffer(rng.bytes(8 * n // 2), dtype=np.float64)
    if name == "ratios":
        return _ratios(rng, 3 * n)
    if name == "uniform":
        return rng.random(n // 2)
    if name == "magnitudes":  # 1e-14 .. 1e18, both signs
        return rng.choice([-1.0, 1.0], 2 * n) * np.exp(rng.uniform(np.log(1e-14), np.log(1e18), 2 * n))
    if name == "integers":
        big = rng.integers(-2**62, 2**62, n // 2).astype(np.float64)
        return np.concatenate([rng.integers(-2**53, 2**53, n // 4).astype(np.float64), big,
                               rng.integers(-10**6, 10**6, n // 4).astype(np.float64)])
    if name == "near powers":  # of ten and of two, a few ulps away (and exactly)
        bases = np.concatenate([10.0 ** np.arange(-30, 31), 2.0 ** np.arange(-80, 81)])
        near = _bits(rng.choice(bases, n), rng, 1000)
        return np.concatenate([near, bases, -bases, _bits(np.repeat(bases, 7), rng, 3)])
    if name == "boundaries":  # repr's 1e-4 and 1e16, the fast path's 2^-37 and 2^53, 1e-5
        bases = np.array([1e-4, 1e16, 2.0**-37, 2.0**53, 1e-5, 9.999999999999999e-5, 9999999999999998.0])
        return np.concatenate([_bits(rng.choice(bases, n // 2), rng, 100_000), _bits(bases.repeat(50), rng, 3)])
    if name == "15-17 digits":
        size = rng.integers(15, 18, 3 * n // 2)
        digits = (rng.random(len(size)) * 9 * 10.0 ** (size - 1) + 10.0 ** (size - 1)).astype(np.int64)
        scale = 10.0 ** rng.integers(-22, 23, len(size))
        return np.where(rng.random(len(size)) < 0.5, digits / scale, digits * scale)
    if name == "dyadic":  # odd / 2^s: exact halves at the fast path's scale (ties) and short binary values
        odd = 2 * rng.integers(0, 2**20, n // 2) + 1
        return odd / 2.0 ** rng.integers(0, 40, n // 2)
    raise AssertionError(name)


KINDS = ["bit patterns", "ratios", "uniform", "magnitudes", "integers", "near powers", "boundaries",
         "15-17 digits", "dyadic"]
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                     2.225073858507201e-308, 1.7976931348623157e308, 1.0, -1.0, 0.5, 0.1, 1e-4, 1e16, 1e22,
                     1e23, 123456789012345680.0, 0.3, 2.0**-1074, 2.0**1023, 1 / 3, 2 / 3])


def _joined(cells: rowjoin.Column, n: int) -> bytes:
    """The cells as a list's repr shows them: "[a, b, c]"."""
    return b"[" + bytes(rowjoin.join([b"", b""], [rowjoin.made(cells)], n, b", ")) + b"]"


def _expected(values: np.ndarray) -> bytes:
    # the list's repr calls float.__repr__ per value (faster than a Python map over them); a float's
    # repr holds "nan" only when it is NaN, written as an empty cell
    return repr(values.tolist()).replace("nan", "").encode()


def _assert_reprs(values: np.ndarray) -> None:
    cells = rowjoin.float_reprs(values)
    assert cells is not None
    got, want = _joined(cells, len(values)), _expected(values)
    if got != want:
        cut = [b[1:-1].split(b", ") for b in (got, want)]
        bad = [(values[i], g, w) for i, (g, w) in enumerate(zip(*cut, strict=True)) if g != w]
        raise AssertionError(f"{len(bad)} cells differ from repr, e.g. {bad[:5]}")


@pytest.mark.parametrize("kind", KINDS)
def test_reprs_are_python_repr_byte_for_byte(kind: str) -> None:
    """10.5 million values in all (each through ``repr`` too: ~2 s on a CI machine)."""
    values = _kind(kind, np.random.default_rng(KINDS.index(kind) + 100)).copy()
    if kind != "ratios":
        bits = values.view(np.int64)
        bits[1::2] ^= np.int64(-2**63)  # both signs (the sign bit flipped: NaN payloads too, no warning)
    _assert_reprs(values)


def test_special_values_and_the_doubtful_ones_put_in_their_places() -> None:
    """Doubtful values (formatted by Python, then inserted) first, last, side by side, alone and all."""
    rng = np.random.default_rng(7)
    _assert_reprs(SPECIALS)
    _assert_reprs(-SPECIALS)
    for n in (0, 1, 2, 3, 17):
        for _ in range(200):
            _assert_reprs(rng.choice(np.concatenate([SPECIALS, rng.random(10)]), n))
    buf, offsets = COMPILED.reprs(np.zeros(0))
    assert buf == b"" and np.frombuffer(offsets, dtype=np.int64).tolist() == [0]
    with pytest.raises(ValueError):
        COMPILED.reprs(np.zeros(3, dtype=np.float32))


def test_ratios_take_the_fast_path() -> None:
    """Overlap fractions are formatted without Python: fewer than 1 in 10,000 go to its formatter."""
    if not COMPILED.FAST_REPRS:
        pytest.skip("built without 128-bit integers: every value goes to Python's formatter")
    values = _ratios(np.random.default_rng(1), 1_000_000)
    before = COMPILED.repr_fallbacks()
    COMPILED.reprs(values)
    assert COMPILED.repr_fallbacks() - before < len(values) // 10_000
    rng = np.random.default_rng(2)
    values = np.concatenate([SPECIALS, _kind("magnitudes", rng), _kind("dyadic", rng)])
    before = COMPILED.repr_fallbacks()
    COMPILED.reprs(values)
    # the fast path's domain (_frepr.c): x = 0.0 or NaN, 2^-37 <= |x| < 2^53 but for ties, 2^-64 .. 2^64
    m, e = np.frexp(np.abs(values))
    ranged = (np.abs(values) >= 2.0**-37) & (np.abs(values) < 2.0**53)
    power = (m == 0.5) & (e >= -63) & (e <= 65)
    fast = np.isnan(values) | ((values == 0) & ~np.signbit(values)) | ranged | power
    slow = COMPILED.repr_fallbacks() - before
    assert slow >= np.count_nonzero(~fast)
    assert slow - np.count_nonzero(~fast) < 0.02 * len(values)  # ties (dyadic values) only


def test_python_twin_writes_the_same_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    values = np.concatenate([_ratios(rng, 100_000), SPECIALS, _kind("bit patterns", rng)[:50_000],
                             _kind("magnitudes", rng)[:50_000]])
    values = values[rng.permutation(len(values))]
    compiled = csv_table.number_cells(values)
    monkeypatch.setenv(rowjoin.DISABLE_ENV, "1")
    twin = csv_table.number_cells(values)
    assert rowjoin.float_reprs(values) is None
    assert isinstance(compiled, rowjoin.Later) and isinstance(twin, tuple)
    assert _joined(compiled, len(values)) == _joined(twin, len(values)) == _expected(values)
