"""Command-line interface: a thin click group; each subcommand lives in its own module.

``main(argv) -> int`` turns errors into exit codes in one place (0 ok, 1 gate tripped, 2 usage or
unreadable input, 3 an internal error: a bug, shown as one line, with the traceback under ``--debug``).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Any

import click

from traceread.errors import EXIT_INTERNAL, EXIT_USAGE, UserFacingError
from traceread.printable import printable

# Set by the group's --debug flag (or TRACEREAD_DEBUG=1); read by main() when an unexpected error lands.
_debug = {"on": False}
# Subcommands, each in traceread.cli.<name> (its ``command``), imported when it runs or --help lists it.
COMMANDS = ("analyze", "info", "gaps", "kernels", "scan", "diff", "whatif")


class _ReaderGone(Exception):
    """A subcommand's standard output lost its reader. Raised past click, whose own handling of a broken
    pipe exits 1: the code of a tripped ``--fail-on`` gate."""


class _LazyGroup(click.Group):
    """A group that imports a subcommand's module only when that subcommand runs (or ``--help``
    lists it): ``traceread info`` then never imports the rules, metrics or renderers."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise _ReaderGone() from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None and cmd_name in COMMANDS:
            cmd = importlib.import_module(f"traceread.cli.{cmd_name}").command
            self.add_command(cmd, cmd_name)
        return cmd


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="traceread")
@click.option("--debug", is_flag=True, help="On an internal error, print the full traceback.")
@click.option("--max-json-size", metavar="SIZE", default=None,
              help="Largest uncompressed JSON a gzip trace may inflate to (default 64G; env TRACEREAD_MAX_JSON_SIZE).")
@click.option("--max-gzip-ratio", type=float, default=None,
              help="Largest inflate ratio of a gzip trace (default 250; env TRACEREAD_MAX_GZIP_RATIO).")
@click.option("--max-memory", metavar="SIZE", default=None,
              help="Cap this process's memory: a trace too large fails with a message, not an OOM kill "
                   "(env TRACEREAD_MAX_MEMORY).")
@click.option("--max-events", type=int, default=None,
              help="Most events one trace may hold (default: what this machine's memory holds; env TRACEREAD_MAX_EVENTS).")
def cli(debug: bool, max_json_size: str | None, max_gzip_ratio: float | None, max_memory: str | None,
        max_events: int | None) -> None:
    """traceread: why is this GPU training run below its possible MFU?"""
    _debug["on"] = debug or _debug["on"]
    from traceread.limits import configure

    configure(max_json_size, max_gzip_ratio, max_memory, max_events)


_OUT_OF_MEMORY = ("traceread: error: out of memory: the input needs more memory than this process may use "
                  "(--max-memory, or a machine with more memory)")


def _mapped_under_cap(exc: ImportError) -> bool:
    """A module first loaded under --max-memory whose shared object could not be mapped: out of
    memory, not a bug (the loaders are imported before the cap is set; a renderer may not be)."""
    from traceread.limits import LIMITS

    return bool(LIMITS.max_memory_bytes) and "map" in str(exc)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (tests call this directly)."""
    _debug["on"] = os.environ.get("TRACEREAD_DEBUG", "") not in ("", "0")
    from traceread.atomic import Terminated, guard_inputs, termination_raises

    guard_inputs()  # this command's inputs, from here on: no output of it replaces one
    _encodable_streams()
    try:
        with termination_raises():  # SIGTERM/SIGHUP clean up as SIGINT does (temporaries, a scan's workers)
            rv = cli.main(args=argv, prog_name="traceread", standalone_mode=False)
    except UserFacingError as exc:
        click.echo(f"traceread: error: {printable(str(exc))}", err=True)  # it may quote the trace
        return exc.exit_code
    except (click.exceptions.Abort, Terminated) as exc:
        stop = exc if isinstance(exc, Terminated) else exc.__context__
        if isinstance(stop, Terminated):  # the shell's code for a process ended by a signal
            import signal

            click.echo(f"traceread: stopped by {signal.Signals(stop.signum).name}", err=True)
            return 128 + stop.signum
        click.echo("traceread: aborted", err=True)
        return EXIT_USAGE
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE if exc.exit_code not in (0, 1) else exc.exit_code
    except (BrokenPipeError, _ReaderGone):  # the reader took what it wanted (`| head`): done
        from traceread.cli.output import reader_gone

        reader_gone()
        return 0
    except MemoryError:
        click.echo(_OUT_OF_MEMORY, err=True)
        return EXIT_USAGE
    except Exception as exc:  # a bug: one line and its own exit code, so CI can tell it from a finding
        if isinstance(exc, ImportError) and _mapped_under_cap(exc):
            click.echo(_OUT_OF_MEMORY, err=True)
            return EXIT_USAGE
        if _debug["on"]:
            traceback.print_exc()
        where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        at = f" at {os.path.basename(where.filename)}:{where.lineno}" if where else ""
        click.echo(f"traceread: internal error: {type(exc).__name__}: {printable(str(exc))}{at} "
                   "(a bug in traceread; rerun with --debug for the traceback)", err=True)
        return EXIT_INTERNAL
    return int(rv or 0)


def _encodable_streams() -> None:
    """Standard output and error never fail on a character their encoding lacks (an ASCII or
    Latin-1 locale: the report's own ellipsis, a micro sign, a kernel name turned every report
    into exit 3). Into a pipe or file the bytes are UTF-8, as every file traceread writes; on a
    terminal of another encoding, what it cannot show is escaped (``\u2026``)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
        if encoding in ("utf-8", "utf8") or not hasattr(stream, "reconfigure"):
            continue
        try:
            if stream.isatty():
                stream.reconfigure(errors="backslashreplace")
            else:
                stream.reconfigure(encoding="utf-8", errors="backslashreplace")
        except (OSError, ValueError):  # a stream closed or already written in another encoding
            continue


# The command's process settings (see run()). gen0 threshold: the imports alone create a hundred
# thousand or more long-lived objects (pandas, numpy, click); at Python's default of 700 the collector
# runs over them again and again while nothing they hold is garbage.
GC_THRESHOLDS = (20_000, 50, 100)


def run() -> None:
    """The ``traceread`` command: :func:`main` under the command's process settings, then exit
    without the interpreter's last garbage collection over every object the run created (pandas
    and the frames: a pass over millions of objects that frees nothing). Objects are still finalized
    and atexit handlers run; only the cycle search is skipped, which at exit frees nothing the
    exit would not.

    Settings: the collector runs less often (``GC_THRESHOLDS``), numpy's OpenBLAS starts no
    threads unless the user asks for them: traceread does no linear algebra, and each OpenBLAS
    thread (one per core) spins at start-up, taking CPU from the imports on a machine of few cores),
    and threads share one malloc heap (``traceread.runner.command_heap``)."""
    import gc

    from traceread.runner import command_heap

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    command_heap()  # before any thread starts (the loader's halves): see its doc
    gc.set_threshold(*GC_THRESHOLDS)
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
