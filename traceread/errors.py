"""Errors that reach the user as one line and an exit code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_GATE = 1  # analysed, and a --fail-on gate tripped
EXIT_USAGE = 2  # usage error, or an input that could not be read
EXIT_INTERNAL = 3  # a bug in traceread: an unexpected exception (traceback only under --debug)


class UserFacingError(Exception):
    """Base class of the errors meant for the user (not bugs): ``str(err)`` is the one line shown."""

    exit_code = EXIT_USAGE


class TraceReadError(UserFacingError):
    """An input file could not be read as a trace. The message names the file and the problem."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class UsageError(UserFacingError):
    """Bad or inconsistent command-line / job-file inputs."""


class MissingInputError(UserFacingError):
    """An analysis needs an input the trace does not carry (for example the GPU count for MFU)."""


class OutputError(UserFacingError):
    """An output file could not be written (missing folder, no permission, disk full)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: cannot write: {problem}")
        self.path = path
