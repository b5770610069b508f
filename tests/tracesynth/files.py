"""A generated scenario written in one of the formats the tests run on, and loaded back."""

from __future__ import annotations

from pathlib import Path

import traceread
from tracesynth.kineto_writer import write_kineto
from tracesynth.model import Scenario
from tracesynth.nsys_writer import write_nsys

SUFFIX = {"kineto": "pt.trace.json", "nsys": "sqlite"}


def write_as(scenario: Scenario, directory: Path, stem: str, fmt: str) -> Path:
    """``scenario`` written to ``directory/stem.<suffix of fmt>`` (``fmt``: 'kineto' or 'nsys'); the path."""
    path = directory / f"{stem}.{SUFFIX[fmt]}"
    (write_kineto if fmt == "kineto" else write_nsys)(scenario, str(path))
    return path


def load_as(scenario: Scenario, directory: Path, stem: str, fmt: str) -> traceread.Trace:
    """:func:`write_as`, then the file loaded as a user loads it."""
    return traceread.load(str(write_as(scenario, directory, stem, fmt)))
