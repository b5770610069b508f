"""What ``pip install .`` ships: the ``traceread`` packages only, never the test-side generator.

Cheap, in process: the package discovery of pyproject's ``[tool.setuptools.packages.find]`` is
re-done here (the rule of setuptools' ``find_namespace_packages``, which that table uses), and
compared with setuptools' own answer where setuptools is importable (3.12+ venvs lack it). The
full check, a built wheel's file list and every documented command run from it in a fresh venv,
is ``scripts/check_wheel.py``.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from pathlib import Path

from conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # the declared floor, 3.10
    import tomli as tomllib


def _find_config() -> dict:
    with open(REPO / "pyproject.toml", "rb") as fh:
        setuptools_cfg = tomllib.load(fh)["tool"]["setuptools"]
    assert set(setuptools_cfg["packages"]) == {"find"}, "packages are discovered, never listed by hand"
    return setuptools_cfg["packages"]["find"]


def _discovered(find: dict) -> list[str]:
    """Every directory below ``where`` is a candidate (namespace packages), dotted names with no dot in
    a part, kept when an include pattern matches and no exclude pattern does."""
    where = REPO / find.get("where", ["."])[0]
    include, exclude = find.get("include", ["*"]), find.get("exclude", [])
    found = []
    for root, dirs, _files in os.walk(where):
        dirs[:] = sorted(d for d in dirs if "." not in d)
        for d in dirs:
            name = os.path.relpath(os.path.join(root, d), where).replace(os.sep, ".")
            if any(fnmatch.fnmatchcase(name, p) for p in include) and \
                    not any(fnmatch.fnmatchcase(name, p) for p in exclude):
                found.append(name)
    return sorted(found)


def test_only_traceread_is_installed() -> None:
    find = _find_config()
    packages = _discovered(find)
    assert "traceread" in packages and "traceread.loaders" in packages
    assert all(p == "traceread" or p.startswith("traceread.") for p in packages), packages
    assert not [p for p in packages if "synth" in p or p.startswith("tests")], packages
    try:
        from setuptools import find_namespace_packages
    except ImportError:
        return
    theirs = find_namespace_packages(where=str(REPO / find.get("where", ["."])[0]),
                                     include=find.get("include", ["*"]), exclude=find.get("exclude", []))
    assert sorted(p for p in theirs if "__pycache__" not in p) == \
        [p for p in packages if "__pycache__" not in p]


def test_the_generator_is_test_side() -> None:
    import tracesynth

    assert Path(tracesynth.__file__).resolve().parent == REPO / "tests" / "tracesynth"
    assert not (REPO / "traceread" / "synth").exists()
