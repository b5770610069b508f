"""A long-lived process that runs ``traceread`` commands for the fuzz tests, one JSON request a line.

Request: ``{"argv": [...]}``; reply: ``{"rc": int, "out": str, "err": str}``. The fuzz tests talk to
it through :class:`fuzz_harness.Worker`, which kills and replaces it when an input hangs or kills it,
so one bad input never takes the test process down with it.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys


def main() -> None:
    from traceread.cli import main as cli_main

    proto = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli_main(req["argv"])
            except BaseException as exc:  # noqa: BLE001 - main() must not let anything out: report it
                rc = -1
                err.write(f"ESCAPED {type(exc).__name__}: {exc}")
        proto.write(json.dumps({"rc": rc, "out": out.getvalue()[-2000:], "err": err.getvalue()[-4000:]}) + "\n")
        proto.flush()


if __name__ == "__main__":
    main()
