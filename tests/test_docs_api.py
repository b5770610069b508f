"""docs/api.md's examples run: its ```python blocks, in order, in one namespace, from the repository
root (they read fixtures/), as a reader would paste them."""

from __future__ import annotations

import os
import re

from conftest import REPO

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_api_page_examples_run(capsys) -> None:
    blocks = BLOCK.findall((REPO / "docs" / "api.md").read_text("utf-8"))
    assert len(blocks) >= 5  # the page's examples were found
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        namespace: dict = {"__name__": "__docs_api__"}
        for i, code in enumerate(blocks):
            exec(compile(code, f"docs/api.md block {i + 1}", "exec"), namespace)  # noqa: S102 - the docs' own code
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert "launch-bound" in out


def test_readme_links_the_api_page() -> None:
    assert "docs/api.md" in (REPO / "README.md").read_text("utf-8")


def test_readme_python_example_runs(capsys) -> None:
    blocks = BLOCK.findall((REPO / "README.md").read_text("utf-8"))
    assert blocks
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        for i, code in enumerate(blocks):
            exec(compile(code, f"README.md python block {i + 1}", "exec"), {"__name__": "__readme__"})  # noqa: S102
    finally:
        os.chdir(cwd)
    assert "## Verdict" in capsys.readouterr().out
