"""Evidence sentences written from their parts (``rules.evidence.evidence_parts``, ``textcat.Texts``):
the CSV cells the writer lays out from the parts are the bytes of the sentences written as str, on a
planted trace whose text data (op, call and kernel names) is made hostile: quotes, backslashes,
control characters, DEL and C1, non-ASCII, commas and path separators. The compiled gather and join
equal their Python twins, and the writer makes no sentence str per row. (The JSON tables do not
write the sentence since report schema 2.0.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.planted import CLASSES, PlantSpec, plant

from traceread import load
from traceread.render import csv_table, rowjoin
from traceread.rules import evidence, textcat
from traceread.rules._base import cat, cat_where, choose, fmt_int, fmt_ns, fmt_pct, where
from traceread.runner import analyze

# One xdist worker runs this module's tests (tests/conftest.py ONE_WORKER_MODULES): its module-scoped ``gaps`` is made once.

HOSTILE = ['say "hi"', "back\\slash", "esc\x1b[31m\nnl\ttab", "del\x7f c1\x9b\x85", "\u00b5s \u65e5\u672c \U0001f600",
           "/home/alice/proj/train.py(12): step", "C:\\Users\\bob\\x.py", "a, b", "", "sync/", "\\", "plain"]


@pytest.fixture(scope="module")
def gaps(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, object]:
    p = plant(PlantSpec(seed=11, ranks=1, steps=16, weights={c: 1.0 for c in CLASSES}))
    (path,) = write_kineto(p.scenario, str(tmp_path_factory.mktemp("parts") / "planted.pt.trace.json"))
    a = analyze([load(str(Path(path)))])
    g = a.gaps.copy()
    hostile = 0
    for c in g.columns:  # every text column the sentences read, renamed to hostile texts
        if isinstance(g[c].dtype, pd.CategoricalDtype) and c != "class":
            cats = g[c].cat.categories
            g[c] = g[c].cat.rename_categories([HOSTILE[i % len(HOSTILE)] + ("" if i < len(HOSTILE) else str(i))
                                               for i in range(len(cats))])
            hostile += 1
    assert hostile >= 3
    return g, a.cfg


def _csv(columns: list[csv_table.CsvColumn], n: int) -> bytes:
    return b"".join(csv_table.csv_chunks(columns, n, "\n"))


def _outputs(g: pd.DataFrame, cfg: object, from_parts: bool) -> bytes:
    n = len(g)
    ev = evidence.EvidenceChunks(g, cfg)  # type: ignore[arg-type]
    chunk = ev if from_parts else ev.__call__  # a plain function: the str path
    csv = _csv([csv_table.CsvColumn("evidence", chunk=chunk)], n)
    if not from_parts:  # and the sentences as a plain column give those bytes too
        text = pd.Series(evidence.evidence_text(g, None, cfg), dtype=object)  # type: ignore[arg-type]
        assert csv == _csv([csv_table.CsvColumn("evidence", text)], n)
    return csv


def test_parts_give_the_sentences(gaps: tuple[pd.DataFrame, object]) -> None:
    g, cfg = gaps
    want = evidence.evidence_text(g, None, cfg).tolist()  # type: ignore[arg-type]
    assert any(s for s in want) and any("/" in s for s in want) and any('"' in s for s in want)
    assert evidence.evidence_parts(g, None, cfg).rows() == want  # type: ignore[arg-type]
    rows = np.random.default_rng(1).permutation(len(g))[: len(g) // 2]
    assert evidence.evidence_parts(g, rows, cfg).rows() == [want[i] for i in rows]  # type: ignore[arg-type]
    block = np.arange(3, len(g) - 2)  # consecutive rows: read from a dense block of the frame
    assert evidence.evidence_parts(g, block, cfg).rows() == want[3:len(g) - 2]  # type: ignore[arg-type]


@pytest.mark.parametrize("twin", [False, True])
def test_cells_from_parts_are_the_sentences_bytes(gaps: tuple[pd.DataFrame, object], twin: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    g, cfg = gaps
    if twin:
        monkeypatch.setenv(rowjoin.DISABLE_ENV, "1")
    want = _outputs(g, cfg, from_parts=False)
    assert want.count(b'"') > 0 and b"\\x1b" in want and b"/home/alice" in want
    monkeypatch.setattr(evidence, "evidence_text", _no_sentences)  # the parts path makes no str per row
    assert _outputs(g, cfg, from_parts=True) == want


def _no_sentences(*args: object, **kwargs: object) -> None:
    raise AssertionError("a writer made the sentences as str")


def test_small_blocks_and_chunks(gaps: tuple[pd.DataFrame, object], monkeypatch: pytest.MonkeyPatch) -> None:
    g, cfg = gaps
    # every row of the rarer classes and every 8th of the two common ones: each class's sentences
    # still cross the block and chunk edges, in ~650 rows instead of 4,500 (~130 writer chunks)
    common = g["class"].isin(["unattributed", "launch-bound"]).to_numpy()
    g = g[~common | (np.arange(len(g)) % 8 == 0)].reset_index(drop=True)
    assert g["class"].nunique() >= 6 and len(g) > 300
    want = _outputs(g, cfg, from_parts=False)
    monkeypatch.setattr(evidence, "BLOCK_ROWS", 7)  # blocks and writer chunks out of step
    monkeypatch.setattr(csv_table, "CHUNK_ROWS", 11)
    assert _outputs(g, cfg, from_parts=True) == want


def test_a_lone_surrogate_is_refused_as_before(gaps: tuple[pd.DataFrame, object]) -> None:
    g, cfg = gaps
    g = g.copy()
    c = next(c for c in g.columns if evidence.is_data(c) and isinstance(g[c].dtype, pd.CategoricalDtype))
    cats = pd.Index([f"\ud800{i}" for i in range(len(g[c].cat.categories))], dtype=object)
    g[c] = pd.Categorical.from_codes(g[c].cat.codes.to_numpy(), categories=cats)
    ev = evidence.EvidenceChunks(g, cfg)  # type: ignore[arg-type]
    for chunk in (ev, ev.__call__):
        with pytest.raises(UnicodeEncodeError):
            _csv([csv_table.CsvColumn("evidence", chunk=chunk)], len(g))


def test_helpers_as_parts_equal_the_str_forms() -> None:
    rng = np.random.default_rng(5)
    n = 400
    names = np.array(HOSTILE, dtype=object)[rng.integers(0, len(HOSTILE), n)]
    ns, pct = rng.integers(0, 5_000_000_000, n), rng.random(n)
    cond, other = rng.random(n) < 0.4, rng.random(n) < 0.5

    def sentence() -> np.ndarray:
        a = cat("took ", fmt_ns(ns), " (", fmt_pct(pct), ") in ", names)
        b = cat_where(cond, "host in ", names, " for ", (fmt_ns, ns), other=choose(other.astype(np.int64), ["x", "y, z"]))
        c = where(other, cat(fmt_int(ns // 7), "/", names), where(cond, "const", names))
        return cat(a, "; ", b, where(cond, "", c), "; end")

    want = sentence().tolist()
    with textcat.as_parts():
        got = sentence()
    assert isinstance(got, textcat.Texts) and got.codes.dtype == np.int32
    assert got.rows() == want
    assert got.slice(3, 9).rows() == want[3:9]


@pytest.mark.parametrize("seed", range(4))
def test_gather_compiled_equals_its_twin(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    table = [t.encode("utf-8", "surrogatepass") for t in HOSTILE] + [b"x" * int(rng.integers(0, 90))]
    buf, starts, ends = rowjoin.spread(table, np.arange(len(table)))
    n, k = int(rng.integers(0, 3000)), int(rng.integers(0, 6))
    codes = rng.integers(0, len(table), (n, k)).astype(np.int32)
    want = [b"<" + b"".join(table[c] for c in row) + b">" for row in codes.tolist()]
    got = rowjoin.gather((buf, starts, ends), codes, b"<", b">")
    assert rowjoin.cells(got, n) == want
    monkeypatch.setenv(rowjoin.DISABLE_ENV, "1")
    twin = rowjoin.gather((buf, starts, ends), codes, b"<", b">")
    assert twin[0] == got[0] and np.array_equal(twin[1], got[1]) and np.array_equal(twin[2], got[2])


def test_gather_refuses_codes_outside_the_table() -> None:
    table = (b"abc", np.array([0, 1], dtype=np.int64), np.array([1, 3], dtype=np.int64))
    for bad in (np.array([[2]], dtype=np.int32), np.array([[-1]], dtype=np.int32)):
        with pytest.raises(ValueError):
            rowjoin.gather(table, bad)
    with pytest.raises(ValueError):
        rowjoin.gather((b"abc", np.array([0], dtype=np.int64), np.array([4], dtype=np.int64)),
                       np.zeros((1, 1), dtype=np.int32))


def test_text_columns_coded_as_parts() -> None:
    words = np.array(HOSTILE, dtype=object)[np.random.default_rng(2).integers(0, len(HOSTILE), 1000)]
    copies = np.array([str(w) + "" for w in words.tolist()], dtype=object)  # equal text, maybe other objects
    for values in (words, copies, words.astype(str)):
        t = textcat.texts(values, len(values))
        assert t.rows() == words.tolist() and len(t.table) <= len(values) + 1
    with pytest.raises(TypeError):
        textcat.texts(np.array(["a", 3], dtype=object), 2)
    with pytest.raises(ValueError):
        textcat.texts(np.array(["a"], dtype=object), 2)
