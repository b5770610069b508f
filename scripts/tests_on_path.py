"""Puts the repository's tests/ folder on ``sys.path`` so that scripts import the synthetic-trace
generator (``tests/tracesynth``) as the tests do (pyproject's pytest ``pythonpath = ["tests"]``).

The generator is test data, not part of the installed package. A script imports this module
before any ``tracesynth`` module: ``import tests_on_path  # noqa: F401``. Appended, not prepended:
nothing under tests/ may shadow an installed module.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS_DIR = str(Path(__file__).resolve().parent.parent / "tests")
if TESTS_DIR not in sys.path:
    sys.path.append(TESTS_DIR)
