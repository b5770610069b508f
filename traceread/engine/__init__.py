"""The engine: what one loaded frame says before any rule reads it.

Row selections per lane (``lanes``), steps and how they are inferred (``steps``, ``step_inference``,
``step_totals``), the idle gaps between GPU work (``gaps``), a capture's edges (``capture_edges``) and
which collective kernels are the same call across ranks (``collective_identity``). Every function
here is a pure function of a frame and the thresholds; caches are passed in by the runner.
"""
