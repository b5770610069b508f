"""Synthetic traces with known answers: a flat scenario model and writers for both input formats.

Used by tests (cross-format equivalence, planted causes) and by scripts/synth.py / eval_rules.py.
"""
