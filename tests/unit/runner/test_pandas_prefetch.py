"""pandas is imported beside the decode (traceread.runner.prefetch), not before it.

The commands that load traces must reach the decode without importing pandas, or the import
(~0.25 s of one core) runs before the decode instead of beside it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"

_NO_PANDAS = "import sys; sys.modules['pandas'] = None\n"


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_load_path_imports_no_pandas():
    out = _run(_NO_PANDAS + "import traceread.cli.analyze, traceread.cli.info, traceread.loaders.kineto.stream\n"
               "import traceread.loaders.kineto.split, traceread.loaders.kineto.frame\nprint('ok')")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_pandas_is_imported_on_a_thread_while_a_trace_decodes():
    trace = FIXTURES / "hta_nccl_a100_rank0of2.json.gz"
    code = (
        "import sys, threading\n"
        "import traceread.runner.prefetch as p\n"
        "from traceread.runner import load\n"
        "assert 'pandas' not in sys.modules\n"
        f"t = load({str(trace)!r})\n"
        "print(len(t.events), [x.name for x in p._thread], p._thread[0].is_alive())\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    rows, names, alive = out.stdout.split(" ", 1)[0], out.stdout.split(" ", 1)[1], out.stdout.split()[-1]
    assert int(rows) > 0
    assert "traceread-import-pandas" in names
    assert alive == "False"  # the frame needed pandas: the load waited for the import


def test_an_import_failure_on_the_thread_is_the_callers_error(tmp_path):
    # a pandas that fails to import: the thread swallows the error; the caller's own import raises it
    (tmp_path / "pandas.py").write_text("raise ImportError('broken pandas install')\n")
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
            "import traceread.runner.prefetch as p\n"
            "p.pandas_in_background(); p._thread[0].join()\n"
            "try:\n    import pandas\nexcept ImportError as e:\n    print('raised', e)\n")
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "raised broken pandas install"
    assert out.stderr == ""


def test_metrics_package_names_resolve_lazily():
    from traceread import metrics
    from traceread.metrics.mfu import compute_mfu

    assert metrics.compute_mfu is compute_mfu
    assert set(metrics.__all__) <= set(dir(metrics)) | set(metrics._HOMES)
    try:
        metrics.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


_FIRST_PANDAS_IMPORT = """
import builtins, sys, threading
first = []
real = builtins.__import__
def record(name, *args, **kwargs):
    if name == "pandas" and not first and "pandas" not in sys.modules:
        first.append(threading.current_thread().name)
    return real(name, *args, **kwargs)
builtins.__import__ = record
from traceread.cli import main
rc = main(sys.argv[1:])
print(rc, first[0] if first else "none")
"""


def test_the_commands_import_pandas_first_on_the_decode_thread():
    # an option parser or command module importing pandas first (as --fail-on's check once did)
    # would put the import back in front of the decode
    trace = str(FIXTURES / "hta_nccl_a100_rank0of2.json.gz")
    for argv in (["analyze", trace, "-o", "/dev/null", "--fail-on", "launch-bound:99"], ["info", trace]):
        out = subprocess.run([sys.executable, "-c", _FIRST_PANDAS_IMPORT, *argv], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split()[-2:] == ["0", "traceread-import-pandas"], (argv, out.stdout[-300:])
