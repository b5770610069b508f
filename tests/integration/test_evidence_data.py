"""Evidence as data: the sentences made later from the kept columns (``rules.evidence``) are the ones
each rule's evidence function makes from the whole context at classification time, for every class,
on any selection of rows; the analysis keeps no sentence per gap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.planted import CLASSES, PlantSpec, plant

from traceread import load, rules
from traceread.config import Thresholds
from traceread.engine.gaps import find_gaps
from traceread.engine.steps import find_steps
from traceread.rules import evidence, unattributed
from traceread.rules._columns import Rows, column_cache
from traceread.runner import analyze
from traceread.vocabulary import UNATTRIBUTED

CFG = Thresholds()


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = plant(PlantSpec(seed=11, ranks=1, steps=16, weights={c: 1.0 for c in CLASSES}))
    (path,) = write_kineto(p.scenario, str(tmp_path_factory.mktemp("ev") / "planted.pt.trace.json"))
    return Path(path)


def _reference(gaps: pd.DataFrame, steps: pd.DataFrame, trace, classes: np.ndarray) -> np.ndarray:
    """Each gap's sentence from the full rule context, as classify made it before the data was kept."""
    ref = np.full(len(gaps), "", dtype=object)
    out = gaps.copy(deep=False)
    with column_cache(out) as cols:
        ctx = rules.build_context(cols, steps, trace, CFG)
        fns = {r.name: r.evidence for r in rules.RULES} | {UNATTRIBUTED: unattributed.evidence}
        for name, fn in fns.items():
            idx = np.flatnonzero(classes == name)
            if len(idx):
                ref[idx] = fn(Rows(cols, idx), rules._subset(ctx, idx), CFG)
    return ref


def test_sentences_from_data_match_the_full_context(planted: Path) -> None:
    trace = load(str(planted))
    steps = find_steps(trace, CFG).steps
    gaps = find_gaps(trace, steps, CFG)
    data = rules.classify(gaps, steps, trace, CFG, text=False)
    assert "evidence" not in data.columns and any(evidence.is_data(c) for c in data.columns)
    classes = data["class"].astype(str).to_numpy()
    assert len(set(classes)) >= 5, set(classes)  # most classes planted: each one's data is read
    ref = _reference(gaps, steps, trace, classes)
    assert evidence.evidence_text(data, None, CFG).tolist() == ref.tolist()
    # any selection of rows, in any order, reads the same sentences as those rows had
    rows = np.random.default_rng(3).permutation(len(data))[: len(data) // 3]
    assert evidence.evidence_text(data, rows, CFG).tolist() == ref[rows].tolist()
    picked = data.iloc[rows].sort_values("dur_ns", kind="stable")
    assert evidence.with_evidence(picked, CFG)["evidence"].tolist() == ref[rows][
        np.argsort(data["dur_ns"].to_numpy()[rows], kind="stable")].tolist()
    # classify's sentences (text=True) are those same sentences, in the column's usual place
    text = rules.classify(gaps, steps, trace, CFG)
    assert text["evidence"].tolist() == ref.tolist()
    assert list(text.columns) == evidence.shown_columns(data)


def test_the_analysis_keeps_no_sentence_per_gap(planted: Path) -> None:
    a = analyze([load(str(planted))])
    g = a.gaps
    assert "evidence" not in g.columns
    for c in g.columns:  # the data: numbers sparse, text one string per distinct value
        if evidence.is_data(c):
            assert isinstance(g[c].dtype, (pd.SparseDtype, pd.CategoricalDtype)), (c, g[c].dtype)
    shown = evidence.with_evidence(g, a.cfg)
    assert shown["evidence"].str.len().gt(20).all()
    assert not any(evidence.is_data(c) for c in shown.columns)
