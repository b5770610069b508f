"""Start-up cost: ``import traceread.cli`` and ``traceread info`` import only what they use.

Each check runs in a fresh interpreter (this test process has imported everything already) and
reads ``sys.modules`` after the command: the analysis stack (rules, metrics, renderers), matplotlib
and perfetto must stay out of a command that only loads and summarizes.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import FIXTURES, REPO, shared_nsys

HEAVY = ("matplotlib", "perfetto", "traceread.rules", "traceread.metrics", "traceread.render",
         "traceread.analysis", "traceread.engine.gaps", "traceread.engine.steps", "traceread.attribution")

_CHILD = r"""
import contextlib, io, json, sys
import traceread.cli
after_import = sorted(sys.modules)
with contextlib.redirect_stdout(io.StringIO()):
    code = traceread.cli.main(sys.argv[1:]) if len(sys.argv) > 1 else 0
print(json.dumps({"code": code, "after_import": after_import, "after_run": sorted(sys.modules)}))
"""


def _modules(*argv: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True, cwd=REPO,
                          check=True, timeout=300)
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ``info`` words its loader notes through ``traceread.render.notes`` (the notes' words live there only); that
# module and the package's light ``__init__`` are not the analysis stack.
LIGHT = ("traceread.render", "traceread.render.notes")


def _heavy(mods: list[str]) -> list[str]:
    return [m for m in mods if m not in LIGHT and (
        m.split(".")[0] in HEAVY or any(m == h or m.startswith(h + ".") for h in HEAVY))]


def test_importing_the_cli_imports_no_subcommand_and_no_pandas() -> None:
    got = _modules()
    assert _heavy(got["after_import"]) == []
    assert "pandas" not in got["after_import"]
    assert not [m for m in got["after_import"] if m.startswith("traceread.cli.")]


def _inputs() -> list[str]:
    out = [str(FIXTURES / "hta_nccl_a100_rank0of2.json.gz")]
    out += [str(p) for p in shared_nsys()[:1]]
    return out


@pytest.mark.parametrize("trace", _inputs(), ids=lambda p: p.rsplit("/", 1)[-1])
def test_info_imports_no_analysis_stack(trace: str) -> None:
    got = _modules("info", trace)
    assert got["code"] == 0
    assert _heavy(got["after_run"]) == []
    assert "traceread.loaders" in got["after_run"]  # the command did load the trace


def test_every_subcommand_is_still_offered_and_runs() -> None:
    # The lazy group must still offer every subcommand (help lists them, each one runs).
    proc = subprocess.run([sys.executable, "-c", "import sys, traceread.cli; sys.exit(traceread.cli.main(['--help']))"],
                          capture_output=True, text=True, cwd=REPO, check=True, timeout=300)
    for name in ("analyze", "gaps", "info", "kernels"):
        assert f"  {name} " in proc.stdout, name
    got = _modules("gaps", "--json", "-", str(FIXTURES / "hta_nccl_a100_rank0of2.json.gz"))
    assert got["code"] == 0 and "traceread.rules" in got["after_run"]
