"""Build script for the optional compiled Kineto scanner (everything else is in pyproject.toml).

The extension is optional, as in PyYAML and msgpack: without a C compiler (or Python headers)
the build prints a warning and installs the pure-Python package, whose loader then decodes every
chunk with msgspec (the exact fallback the scanner is checked against).
"""

from __future__ import annotations

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Build extensions when possible; never fail the install because of them."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - no compiler, no headers, any platform oddity
            _skipped(e)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            _skipped(e)


def _skipped(e: Exception) -> None:
    print(f"WARNING: the compiled Kineto scanner was not built ({e}); traceread will load Kineto traces "
          "with its pure-Python decoder (same results, slower)", file=sys.stderr)


setup(
    ext_modules=[Extension("traceread.loaders.kineto._cscan", ["traceread/loaders/kineto/_cscan.c"],
                           # -O3: 2% fewer instructions than -O2 on the scanner (callgrind, both benchmark shapes)
                           optional=True, extra_compile_args=["-O3"]),
                 # the what-if replay's sweep (traceread/whatif/sweep.py has its exact Python twin)
                 Extension("traceread.whatif._csweep", ["traceread/whatif/_csweep.c"], optional=True,
                           extra_compile_args=["-O2"]),
                 # the nsys loader's integer column reader (read.py's _fetch is its Python twin); it
                 # resolves SQLite's functions at run time, so it needs no SQLite headers or library here
                 Extension("traceread.loaders.nsys._cread", ["traceread/loaders/nsys/_cread.c"], optional=True,
                           extra_compile_args=["-O2"], libraries=["dl"]),
                 # a column-wise writer's rows (traceread/render/rowjoin.py has its exact Python twin), and
                 # floats' reprs (_frepr.c: without the GIL where it decides exactly; Python's own for the rest)
                 Extension("traceread.render._cjoin", ["traceread/render/_cjoin.c", "traceread/render/_frepr.c",
                                                          "traceread/render/_cparts.c"],
                           depends=["traceread/render/_cjoin.h"], optional=True,
                           extra_compile_args=["-O2"]),
                 # the gap engine's interval sweeps (traceread/intervals.py has their exact numpy twins)
                 Extension("traceread._cintervals", ["traceread/_cintervals.c"], optional=True,
                           extra_compile_args=["-O2"])],
    cmdclass={"build_ext": OptionalBuildExt},
)
