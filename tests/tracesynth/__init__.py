"""Synthetic traces with known answers: a flat scenario model and writers for both input formats.

Test data, not part of the installed package (``pip install .`` ships ``traceread`` only). Used by
tests (cross-format equivalence, planted causes; importable as ``tracesynth`` through pyproject's
pytest ``pythonpath = ["tests"]``) and by scripts/synth.py, eval_rules.py and the benchmarks (through
scripts/tests_on_path.py). It imports only public names of traceread.
"""
