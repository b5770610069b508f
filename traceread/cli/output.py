"""The one output convention of every subcommand: a table on stdout, ``--json PATH|-`` for JSON."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click

from traceread.atomic import atomic_open
from traceread.printable import printable
from traceread.runner.write import write_pieces


def reader_gone() -> None:
    """Standard output's reader went away (``traceread gaps T --json - | head``): the output ends there, the
    command does not fail. What is still buffered for the reader goes to /dev/null instead, as does anything
    written later: the interpreter's last flush would otherwise fail again at exit (a second error, exit 120)."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):  # no file descriptor behind it (a test's capture)
        pass


def output_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Callback of every output option: an empty path (an unset shell variable: ``-o "$OUT"``) is a usage
    error, not "no output"; so is standard output (``-``) given to two outputs (``--csv - --json -``
    would interleave them)."""
    from click.core import ParameterSource

    from traceread.errors import UsageError

    name = max(param.opts, key=len) if param.opts else str(param.name)
    if value == "":
        raise UsageError(f"{name}: an empty path (an unset variable?); give a file name, or '-' for standard output")
    if value == "-" and ctx.get_parameter_source(str(param.name)) == ParameterSource.COMMANDLINE:
        taken = ctx.meta.setdefault("traceread.stdout", [])
        taken.append(name)
        if len(taken) > 1:
            raise UsageError(f"{taken[0]} and {taken[1]} both write to standard output ('-'); give one of them a "
                             "file name")
    return value


json_option = click.option(
    "--json", "json_path", metavar="PATH", default=None, callback=output_path,
    help="Also write the same content as JSON to PATH ('-' for standard output, replacing the table).",
)


def emit(table_text: str, data: Any, json_path: str | None) -> None:
    """Print ``table_text`` unless JSON goes to stdout; write ``data`` as JSON when asked."""
    if json_path == "-":
        click.echo(_dumps(data).decode())
        return
    click.echo(printable(table_text, layout=True), nl=not table_text.endswith("\n"))
    if json_path:
        with atomic_open(json_path, "wb") as fh:
            fh.write(_dumps(data) + b"\n")


def emit_chunks(table_text: str, chunks: Callable[[], Iterator[bytes]], json_path: str | None) -> None:
    """:func:`emit` for JSON written piece by piece (``chunks()`` is called only when JSON is asked for:
    a table alone builds no JSON)."""
    if json_path == "-":
        for piece in chunks():
            click.echo(piece.decode(), nl=False)
        click.echo("")
        return
    click.echo(printable(table_text, layout=True), nl=not table_text.endswith("\n"))
    if json_path:
        with atomic_open(json_path, "wb") as fh:
            write_pieces(fh, itertools.chain(chunks(), (b"\n",)))


def _dumps(data: Any) -> bytes:
    # The one JSON encoder lives in render; imported only when JSON is written, so a plain ``info``
    # loads no renderer.
    from traceread.render.json_text import dumps

    return dumps(data)
