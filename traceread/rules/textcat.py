"""Row-wise concatenation of text columns: the one step of the evidence sentences that goes row by row.

``cat(*parts)``: each part is a string (the same in every row) or an array of ``n`` strings; row ``i``
is the parts' texts of row ``i`` joined. The compiled ``_ccat`` (built like the other optional
extensions) makes each row with one allocation; :func:`cat_python` is its exact twin (``"".join`` over
the rows), used without a compiler or with ``TRACEREAD_NO_CCAT=1``; a test compares the two.
"""

from __future__ import annotations

import numpy as np

from traceread.extensions import optional, switched_off

DISABLE_ENV = "TRACEREAD_NO_CCAT"

# None when built without a compiler: the Python twin concatenates (same strings, slower)
COMPILED = optional("traceread.rules._ccat")


def _columns(parts: tuple[np.ndarray | str, ...]) -> tuple[list[str | list[str]], int] | None:
    """The parts as the compiled cat takes them (arrays as lists), and the row count; None when every
    part is a string."""
    listed: list[str | list[str]] = [p if isinstance(p, str) else np.asarray(p, dtype=object).tolist() for p in parts]
    lengths = {len(p) for p in listed if not isinstance(p, str)}
    if not lengths:
        return None
    if len(lengths) > 1:
        raise ValueError("cat: the parts' arrays differ in length")
    return listed, lengths.pop()


def cat(*parts: np.ndarray | str) -> np.ndarray:
    """Element-wise string concatenation of equally long arrays (of str) and scalars: an object array
    (a 0-d one when every part is a string)."""
    columns = _columns(parts)
    if columns is None:
        return np.asarray("".join(p for p in parts if isinstance(p, str)), dtype=object)
    if COMPILED is None or switched_off(DISABLE_ENV):
        return cat_python(*parts)
    listed, n = columns
    out = np.empty(n, dtype=object)
    out[:] = COMPILED.cat(listed, n)
    return out


def cat_python(*parts: np.ndarray | str) -> np.ndarray:
    """The compiled cat's exact twin: one ``"".join`` per row."""
    arrays = [np.asarray(p, dtype=object).tolist() for p in parts if not isinstance(p, str)]
    if not arrays:
        return np.asarray("".join(p for p in parts if isinstance(p, str)), dtype=object)
    n = len(arrays[0])
    it = iter(arrays)
    columns = [[p] * n if isinstance(p, str) else next(it) for p in parts]
    out = np.empty(n, dtype=object)
    out[:] = list(map("".join, zip(*columns, strict=True)))
    return out
