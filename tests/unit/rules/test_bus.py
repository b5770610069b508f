"""Bus-bound input transfer (issue 42): a gap held by host-to-device copies at the link's measured rate is
data-starved with evidence kind bus-bound, its bytes and GB/s named, never "add loader workers"."""

from __future__ import annotations

import re

import numpy as np
from test_rules import CFG
from tracesynth.one_time import plant_scenario
from tracesynth.planted import classify_file

from traceread.causes import first_response
from traceread.rules.bus import _copied_by


def test_bytes_in_a_window_are_prorated_by_overlap():
    """Two copies [0, 100) of 1000 bytes and [50, 250) of 400 bytes: by t=100, 1000 + 100 bytes moved."""
    s, e, b = np.array([0, 50]), np.array([100, 250]), np.array([1000.0, 400.0])
    got = _copied_by(np.array([0, 50, 100, 250, 300]), s, e, b)
    assert np.allclose(got, [0, 500, 1100, 1400, 1400])


def test_planted_bus_bound_copies_are_named_with_their_bytes_in_both_formats(tmp_path):
    from tracesynth.kineto_writer import write_kineto
    from tracesynth.nsys_writer import write_nsys

    planted = plant_scenario("host-side", seed=5, jitter=0.1, steps=6, ranks=1, uniform=True)
    copies = [c for c in planted.scenario.ranks[0].copies if c.kind == "HtoD" and c.src_kind == "Pinned"
              and c.bytes >= CFG.bus_min_copy_bytes]
    assert copies
    paths = write_kineto(planted.scenario, str(tmp_path / "b.rank{rank}.pt.trace.json"))
    paths += [write_nsys(planted.scenario, str(tmp_path / "b.sqlite"))]
    for path in paths:
        got = classify_file(path, CFG)
        shift = planted.scenario.origin_epoch_ns - int(got.attrs.get("epoch_offset_ns", planted.scenario.origin_epoch_ns))
        bus = got[got["evidence_kind"].astype(str) == "bus-bound"]
        assert len(bus) == 3 and (bus["class"].astype(str) == "data-starved").all(), path  # steps 0, 2, 4
        for _, row in bus.iterrows():
            # an independent sum: the planted copies inside the gap, prorated by hand
            inside = sum(c.bytes * max(0, min(c.end_ns + shift, row.end_ns) - max(c.start_ns + shift, row.start_ns))
                         / (c.end_ns - c.start_ns) for c in copies)
            gb = float(re.search(r"move ([0-9.]+) GB", row["evidence"]).group(1))
            assert abs(gb - inside / 1e9) <= 0.051, (path, gb, inside)
            assert "GB/s" in row["evidence"] and "loader workers does not" in row["evidence"]
    assert "loader workers will not help" in first_response("data-starved", "bus-bound")


def test_copy_kinds_are_read_as_the_text_of_each_row():
    """A copy's kind and source are tested on their text, categorical or not, a missing one reading 'nan'
    (as ``astype(str)`` gave): the same rows as testing each row's text."""
    import numpy as np
    import pandas as pd

    from traceread.rules.bus import _texts_where

    values = ["HtoD", "DtoH", None, "HtoD", "PageableHtoD", "Device", float("nan"), "Pinned"]
    for column in (pd.Series(values, dtype=object), pd.Series(values, dtype="category")):
        for test in (lambda t: t == "HtoD", lambda t: "Pageable" not in t, lambda t: t == "nan"):
            want = np.array([test(str(v)) if v is not None else test("nan") for v in values], dtype=bool)
            assert _texts_where(column, test).tolist() == want.tolist()
