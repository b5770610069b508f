"""Every number a user gives, checked once, here: finite, of its type, inside its stated range.

The command line, the job TOML files and the Python API all pass their numbers through these
functions, so a value is refused the same way wherever it comes from (a NaN gate that never fires,
an infinite decompression limit, a speed-up factor whose product wraps int64, a batch size past
int64 that later dies inside the JSON writer). A refused value raises :class:`BadValue`: a
:class:`~traceread.errors.UsageError` (one line, exit 2 on the command line) that is also a
``ValueError`` for API callers; a value of the wrong kind (bytes where a path belongs) raises
:class:`BadType`, also a ``TypeError``.

Ranges (``docs/reliability.md``):

* percentages (``--fail-on CLASS:PCT``): 0 .. 100;
* speed-up factors (``--fix CAUSE=F``, ``--scale PATTERN=F``): :data:`FACTOR_MIN` .. :data:`FACTOR_MAX`;
  below 1 is a slow-down, down to 1000x;
* counts (MFU inputs, sizes, event caps): 1 .. 2^63-1, and so is every product of them
  (tokens per step = batch x sequence length).
"""

from __future__ import annotations

import math
from typing import Any

from traceread.errors import UsageError

INT64_MAX = 2**63 - 1
# A speed-up factor: durations are divided by it in int64 ns. 1000x slower keeps any step of a
# trace below a day far inside int64; a million-fold speed-up already makes every op 0 ns.
FACTOR_MIN = 1e-3
FACTOR_MAX = 1e6


class BadValue(UsageError, ValueError):
    """A number (or other value) outside what its input accepts; names the input."""


class BadType(UsageError, TypeError):
    """A value of the wrong kind for its input (bytes, a file object or a DataFrame as a path)."""


def _as_float(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise BadValue(f"{what}: expected a number, got {value!r}")
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an int past float's range
            raise BadValue(f"{what}: {value} is out of range") from None
    try:
        return float(str(value).strip().rstrip("%"))
    except (ValueError, OverflowError):
        raise BadValue(f"{what}: {value!r} is not a number") from None


def finite(value: Any, what: str, lo: float = -math.inf, hi: float = math.inf, *,
           lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a finite float inside ``[lo, hi]`` (an end excluded with ``lo_open``/``hi_open``)."""
    x = _as_float(value, what)
    if not math.isfinite(x):
        raise BadValue(f"{what}: {value!r} is not a finite number")
    if x < lo or x > hi or (lo_open and x == lo) or (hi_open and x == hi):
        raise BadValue(f"{what}: {value!r} is out of range; allowed: {range_text(lo, hi, lo_open, hi_open)}")
    return x


def integer(value: Any, what: str, lo: int = -INT64_MAX - 1, hi: int = INT64_MAX) -> int:
    """``value`` as an exact integer inside ``[lo, hi]`` (int64 by default); a float must be whole."""
    if isinstance(value, bool):
        raise BadValue(f"{what}: expected an integer, got {value!r}")
    if isinstance(value, int):
        out = value
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise BadValue(f"{what}: {value!r} is not a whole number")
        out = int(value)
    else:
        text = str(value).strip()
        if len(text) > 40:  # past any int64 in any spelling; int() of 5,000 digits is slow and limited
            raise BadValue(f"{what}: {text[:20]}... is out of range; allowed: {range_text(lo, hi)}")
        try:
            out = int(text)
        except ValueError:
            return integer(finite(text, what), what, lo, hi)
    if out < lo or out > hi:
        raise BadValue(f"{what}: {value!r} is out of range; allowed: {range_text(lo, hi)}")
    return out


def percent(value: Any, what: str) -> float:
    """A percentage 0..100 (``--fail-on CLASS:PCT``)."""
    return finite(value, what, 0.0, 100.0)


def factor(value: Any, what: str) -> float:
    """A speed-up factor in ``[FACTOR_MIN, FACTOR_MAX]``: how many times faster (below 1: slower)."""
    return finite(value, what, FACTOR_MIN, FACTOR_MAX)


def product(values: list[int], what: str) -> int:
    """The product of counts, refused past int64 (tokens per step = batch x sequence length)."""
    out = 1
    for v in values:
        out *= v
    if abs(out) > INT64_MAX:
        raise BadValue(f"{what} = {out:.3g} is out of range; allowed: up to 2^63-1")
    return out


def range_text(lo: float, hi: float, lo_open: bool = False, hi_open: bool = False) -> str:
    def num(x: float) -> str:
        if x == INT64_MAX:
            return "2^63-1"
        if x == -INT64_MAX - 1:
            return "-2^63"
        return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:g}"
    return f"{'(' if lo_open else '['}{num(lo)}, {num(hi)}{')' if hi_open else ']'}"


def path_like(value: Any, what: str) -> None:
    """Refuse what is not a path (``str``/``os.PathLike``) where one is expected, naming ``what``:
    bytes would be iterated as numbers, a file object read line by line as paths, a DataFrame's
    column labels taken for paths."""
    import os

    if isinstance(value, (bytes, bytearray, memoryview)):
        raise BadType(f"{what}: got {type(value).__name__}; give a path as str or os.PathLike "
                      "(os.fsdecode(b) for a bytes path)")
    if isinstance(value, (str, os.PathLike)):
        return
    raise BadType(f"{what}: got a {type(value).__module__}.{type(value).__name__}; expected a path "
                  "(str or os.PathLike), a Trace, or a list of them")


# --- user regexes ---------------------------------------------------------------------------------
# A pattern the user gives (``whatif --scale PATTERN=F``) runs over names the trace chooses. Python's
# engine backtracks: ``(a+)+$`` takes exponential time on ``aaaa...b``. Bounds: patterns whose
# backtracking can explode are refused when parsed (a repeat over something that itself repeats or
# alternates, a backreference), names are matched on their first NAME_MATCH_CHARS characters (as
# kernel names are classified), and in the main thread the matching of one pattern over all
# distinct names runs under a time budget (MATCH_BUDGET_S): past it, a usage error, never a hang.
NAME_MATCH_CHARS = 16_384
MATCH_BUDGET_S = 20.0


def _sre() -> Any:
    import importlib

    try:
        return importlib.import_module("re._parser")  # Python 3.11+
    except ImportError:  # pragma: no cover - Python 3.10
        return importlib.import_module("sre_parse")


def _explosive(items: Any, sre: Any, inside_repeat: bool) -> str | None:
    """Why the parsed pattern ``items`` may backtrack exponentially, or None."""
    c = sre.constants if hasattr(sre, "constants") else sre
    repeats = {getattr(c, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(c, n)}
    for op, arg in items:
        if op in repeats:
            lo, hi, sub = arg
            if inside_repeat and hi > 1:
                return "a repeat inside a repeat (as in (a+)+)"
            why = _explosive(sub, sre, inside_repeat or hi > 1)
            if why:
                return why
        elif op == c.BRANCH:
            if inside_repeat:
                return "an alternation inside a repeat (as in (a|ab)*)"
            for sub in arg[1]:
                if why := _explosive(sub, sre, inside_repeat):
                    return why
        elif op == c.SUBPATTERN:
            if why := _explosive(arg[-1], sre, inside_repeat):
                return why
        elif op in (c.GROUPREF, getattr(c, "GROUPREF_EXISTS", None)):
            return "a backreference"
        elif op in (c.ASSERT, c.ASSERT_NOT):
            if why := _explosive(arg[1], sre, inside_repeat):
                return why
    return None


def user_pattern(pattern: str, what: str, flags: int = 0) -> Any:
    """Compile a user's regex, refusing one that may backtrack exponentially (see above)."""
    import re

    try:
        rx = re.compile(pattern, flags)
    except re.error as exc:
        raise BadValue(f"{what}: {exc}") from None
    sre = _sre()
    try:
        why = _explosive(sre.parse(pattern, flags), sre, False)
    except Exception:  # a parser of another Python version: the time budget still holds
        why = None
    if why:
        raise BadValue(f"{what}: the pattern has {why}, which can take exponential time on a trace's names; "
                       "write it without nesting (a+ instead of (a+)+)")
    return rx


class _Overrun(Exception):
    pass


def search_names(rx: Any, names: Any, what: str, budget_s: float = MATCH_BUDGET_S) -> list[bool]:
    """``bool(rx.search(name))`` for each name (its first NAME_MATCH_CHARS characters), under a time
    budget in the main thread (the regex engine checks for signals as it runs)."""
    import signal

    def run() -> list[bool]:
        return [bool(rx.search(str(n)[:NAME_MATCH_CHARS])) for n in names]

    if not hasattr(signal, "setitimer"):
        return run()

    def alarm(_sig: int, _frame: Any) -> None:
        raise _Overrun

    try:
        before = signal.signal(signal.SIGALRM, alarm)
    except ValueError:  # not the main thread, where no handler can be set (nor a signal received)
        return run()
    signal.setitimer(signal.ITIMER_REAL, budget_s)
    try:
        return run()
    except _Overrun:
        raise BadValue(f"{what}: matching the pattern over the trace's names took more than {budget_s:g} s; "
                       "write a simpler pattern") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
