"""Renderers: each reads an :class:`traceread.analysis.Analysis` and writes one format.

``markdown`` (the report), ``jsonout`` (versioned JSON), ``plot`` (timeline picture, matplotlib
imported lazily), ``perfetto`` (annotated trace). ``write_outputs`` writes the requested ones
atomically.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from traceread.atomic import atomic_open, check_not_input

if TYPE_CHECKING:  # the JSON encoder (render.json_text) is used without the analysis stack
    from traceread.analysis import Analysis


def check_outputs(*paths: str | None) -> None:
    """UsageError when a path given is an input of the command (an output never replaces an input)."""
    for path in paths:
        if path:
            check_not_input(path)


def write_json(analysis: Analysis, json_path: str, whole: Callable[[], Analysis] | None = None,
               release: Callable[[int], None] | None = None) -> None:
    """The JSON report, written atomically (``-``: standard output). ``whole``: ``analysis`` with its what-if,
    asked for once the tables are written (``analysis`` is then the analysis before its what-if: the tables
    are written while the replay finishes; :func:`traceread.runner.analyze`'s ``early``). ``release``: as
    :func:`traceread.atomic.atomic_open` takes it."""
    from traceread.render import jsonout

    with atomic_open(json_path, "wb", release) as fh:
        jsonout.render(analysis, fh, whole)


def write_outputs(analysis: Analysis, markdown: str | None = None, json_path: str | None = None,
                  plot_path: str | None = None, perfetto_path: str | None = None,
                  perfetto_steps: str = "key", plot_ranks: tuple[int, ...] | None = None,
                  verbose: bool = False, release: Callable[[int], None] | None = None) -> None:
    """Write each requested output (``-`` is standard output for Markdown and JSON); ``plot_ranks``:
    the ranks the picture draws (None: all of a job); ``verbose``: the Markdown lists every threshold;
    ``release``: as :func:`traceread.atomic.atomic_open` takes it (the JSON and Markdown files replaced)."""
    check_outputs(markdown, json_path, plot_path, perfetto_path)  # before any is written
    # JSON, Markdown, picture, Perfetto: the order the outputs were always written in.
    if json_path:
        write_json(analysis, json_path, release=release)
    if markdown:
        from traceread.render import markdown as md

        with atomic_open(markdown, "w", release) as fh:
            md.render(analysis, fh, verbose=verbose)
    if plot_path:
        from traceread.render import plot

        plot.render(analysis, plot_path, ranks=plot_ranks)
    if perfetto_path:
        from traceread.render import perfetto

        with atomic_open(perfetto_path, "wb") as fh:
            perfetto.render(analysis, fh, steps=perfetto_steps)
