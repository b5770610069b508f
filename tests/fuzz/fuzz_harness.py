"""Shared pieces of the fuzz suite: the watchdog worker, base inputs, and what an acceptable result is.

An acceptable result of ``traceread <cmd> FILE`` on any input, however broken: exit 0 (a result) or
exit 2 with one line on standard error that names the file, and no raw control character from the
trace on either stream. Anything else (an internal error, a traceback, a crash of the process, no
answer within the watchdog, an escape sequence reaching the terminal) is a finding.
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
WATCHDOG_S = 60.0  # a hang watchdog, not a timing threshold: a healthy tiny input takes well under 1 s


@dataclass
class Outcome:
    rc: int | None  # None: the worker hung or died
    err: str
    why: str = ""
    control: str = ""  # where a raw control character reached the output ('' when none did)


class Worker:
    """One ``fuzz_worker.py`` process, replaced after a hang or a crash."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        return subprocess.Popen([sys.executable, str(HERE / "fuzz_worker.py")], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)

    def run(self, argv: list[str]) -> Outcome:
        return self._ask({"argv": argv})

    def compare_decoders(self, path: str) -> str | None:
        """Why the compiled scanner and the msgspec fallback disagree on Kineto ``path`` (None: they agree)."""
        out = self._ask({"compare": path})
        if out.rc is None:
            return out.why
        return out.err or None if out.rc else None

    def _ask(self, req: dict) -> Outcome:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = sel.select(WATCHDOG_S)
        sel.close()
        if not ready:
            self.close()
            return Outcome(None, "", f"no answer within {WATCHDOG_S:.0f} s (hang)")
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            self.proc = None
            return Outcome(None, "", f"worker died (exit {code})")
        rep = json.loads(line)
        return Outcome(rep["rc"], rep["err"], control=rep.get("control", ""))

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def problem(outcome: Outcome, path: str) -> str | None:
    """Why ``outcome`` is not acceptable for input ``path``, or None when it is."""
    if outcome.rc is None:
        return outcome.why
    if outcome.control:
        return f"a raw control character reached the output: {outcome.control}"
    if outcome.rc == 0:
        return None
    err = outcome.err.strip()
    if outcome.rc != 2:
        return f"exit {outcome.rc}: {err[-600:]}"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    # One line per unreadable input (diff with two bad sides reports both), each a traceread error.
    if "Traceback" in err or not lines or not all(ln.startswith("traceread: ") for ln in lines) or len(lines) > 2:
        return f"exit 2 but not one line per bad input: {err[-600:]}"
    if os.path.basename(path) not in err:
        return f"exit 2 but the message does not name the file: {err}"
    return None


def check_case(worker: Worker, path: str, command: str, out_dir: str, base: str | None = None) -> str | None:
    """Run ``traceread COMMAND PATH`` (JSON into ``out_dir``); the problem found, or None when acceptable.

    ``scan`` scans the folder holding only ``path`` (a bad file is listed as a failure, exit 0, or
    nothing is readable, exit 2); ``diff`` compares the unmutated ``base`` with ``path``."""
    with open(path, "rb") as fh:
        before = hashlib.sha256(fh.read()).hexdigest()
    beside = _folder_state(path)  # nothing created beside it (an nsys -shm), nothing changed
    named = path
    if command == "scan":
        named = os.path.dirname(path)
        argv = ["scan", named, "--out", os.path.join(os.path.dirname(named), "scan-out-" + os.path.basename(named)),
                "--workers", "1", "--no-cache"]
    elif command == "diff":
        argv = ["diff", base or path, path, "--json", os.path.join(out_dir, "diff.json")]
    else:
        argv = [command, path, "--json", os.path.join(out_dir, "out.json")]
    why = problem(worker.run(argv), named)
    with open(path, "rb") as fh:
        if hashlib.sha256(fh.read()).hexdigest() != before:
            why = (why + "; " if why else "") + "the input file was modified"
    if _folder_state(path) != beside:
        why = (why + "; " if why else "") + "a file beside the input was created or changed"
    return f"traceread {' '.join(argv)}: {why}" if why else None


def _folder_state(path: str) -> dict[str, str]:
    """Name -> content hash of ``path`` and the files beside it named after it (``x.sqlite-wal``,
    ``-shm``, ``-journal``); outputs may share the folder, so other names do not count."""
    folder, own = os.path.dirname(path), os.path.basename(path)
    out = {}
    for name in sorted(os.listdir(folder)):
        full = os.path.join(folder, name)
        if name.startswith(own) and os.path.isfile(full):
            with open(full, "rb") as fh:
                out[name] = hashlib.sha256(fh.read()).hexdigest()
    return out
