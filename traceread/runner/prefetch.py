"""Import pandas (and the modules the command names, :func:`also_import`) on a background thread while
this process decodes a trace (started by the loaders' :meth:`~traceread.loaders.parallel.Parallel.beside_decode`
of the runner's :data:`traceread.runner.workers.THREADS`).

Importing pandas (with numpy's and pyarrow's set-up) is a sizeable share of a whole ``analyze`` of a
mid-sized trace. Decoding the file runs in the compiled scanner with the GIL released,
so the import can run beside it: the loader's modules import pandas only where they build a frame
(after the decode), and by then the import is done or nearly so. Started only after the loader has
forked any decoding child or pool (a fork while another thread imports would hand the child a held
import lock), and not a daemon: the interpreter waits for it at exit instead of freezing it mid-import.
"""

from __future__ import annotations

import sys
import threading

_started = threading.Lock()
_thread: list[threading.Thread] = []
_after: list[str] = []  # modules the command imports once the trace is loaded (also_import)


def _import_pandas() -> None:
    for name in ["pandas", *_after]:
        try:
            __import__(name)  # an import statement's own hook (builtins.__import__), as ``import pandas`` calls
        except Exception:  # the importing caller meets the same error where it needs the module, and reports it
            pass


def also_import(*names: str) -> None:
    """Import ``names`` on the same thread after pandas: the command's own modules (the analysis and its
    renderers, whose imports take one core a while) then cost the main thread nothing after the decode."""
    _after.extend(n for n in names if n not in _after)


def pandas_in_background() -> None:
    """Start importing pandas on a thread, unless it is imported (or being imported) already."""
    if "pandas" in sys.modules:
        return
    with _started:
        if _thread:
            return
        thread = threading.Thread(target=_import_pandas, name="traceread-import-pandas")
        _thread.append(thread)
        thread.start()
