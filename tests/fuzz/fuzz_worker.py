"""A long-lived process that runs ``traceread`` commands for the fuzz tests, one JSON request a line.

Request: ``{"argv": [...]}``; reply: ``{"rc": int, "out": str, "err": str, "control": str}`` (``control``:
where a raw control character, other than newline and tab, appeared in the output, else ''). Or
``{"compare": PATH}``: load a Kineto file with the compiled scanner and with the msgspec fallback;
reply ``{"rc": 0}`` when both fail or both give the same trace, else ``{"rc": 1, "err": why}``. The fuzz tests talk to
it through :class:`fuzz_harness.Worker`, which kills and replaces it when an input hangs or kills it,
so one bad input never takes the test process down with it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [_TESTS, os.path.join(_TESTS, "unit", "loaders")]  # conftest and the scanner tests' frame comparison


def _load_both(path: str) -> str | None:
    """None when scanner and fallback agree on ``path`` (both fail, or the same trace), else why not."""
    from test_kineto_scanner import assert_same_trace

    from traceread.errors import UserFacingError
    from traceread.loaders import load
    from traceread.loaders.kineto import scan

    got = []
    for disable in ("", "1"):
        os.environ[scan.DISABLE_ENV] = disable
        try:
            got.append(load(path))
        except UserFacingError as exc:
            got.append(exc)
        except Exception as exc:  # noqa: BLE001 - an escaped error is a finding, reported, not a dead worker
            got.append(RuntimeError(f"unhandled {type(exc).__name__}: {exc}"))
    os.environ.pop(scan.DISABLE_ENV, None)
    fast, slow = got
    if isinstance(fast, Exception) or isinstance(slow, Exception):
        if isinstance(fast, UserFacingError) and isinstance(slow, UserFacingError):
            return None
        return f"scanner gave {fast!r:.300}, fallback gave {slow!r:.300}"
    try:
        assert_same_trace(fast, slow)
    except AssertionError as exc:
        return f"scanner and fallback frames differ: {str(exc)[:1500]}"
    return None


_RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _control(text: str) -> str:
    """Where ``text`` holds a raw control character (none may reach a terminal), else ''."""
    m = _RAW_CONTROL.search(text)
    return "" if m is None else repr(text[max(m.start() - 60, 0):m.end() + 20])


# A hostile input may ask for more memory than the machine has (a world size of 10^12): the worker
# gets a MemoryError (a one-line exit 2) instead of the machine's OOM killer taking a neighbour.
MEMORY_CAP = 8 << 30


def main() -> None:
    import resource

    from traceread.cli import main as cli_main

    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP if hard == resource.RLIM_INFINITY else min(hard, MEMORY_CAP),
                                            hard))

    proto = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        if "compare" in req:
            why = _load_both(req["compare"])
            proto.write(json.dumps({"rc": 0 if why is None else 1, "out": "", "err": why or ""}) + "\n")
            proto.flush()
            continue
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli_main(req["argv"])
            except BaseException as exc:  # noqa: BLE001 - main() must not let anything out: report it
                rc = -1
                err.write(f"ESCAPED {type(exc).__name__}: {exc}")
        control = _control(out.getvalue()) or _control(err.getvalue())
        proto.write(json.dumps({"rc": rc, "out": out.getvalue()[-2000:], "err": err.getvalue()[-4000:],
                                "control": control}) + "\n")
        proto.flush()


if __name__ == "__main__":
    main()
