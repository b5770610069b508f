"""CUDA / cuDNN lazy start-up on a real trace is named as such in one-time-cost's evidence, not
"allocator growth". The reason is re-measured from the raw Kineto file (json/gzip), independently of
traceread."""

from __future__ import annotations

import gzip
import json

from conftest import SHARED_TRACES, needs_shared

from traceread import load
from traceread.config import Thresholds
from traceread.rules.evidence import with_evidence
from traceread.runner import analyze

pytestmark = needs_shared


def test_cudnn_handle_creation_is_lazy_start_up_not_allocator_growth():
    """hta_alexnet_a100: the first aten::cudnn_convolution holds a 6 s cudaFree (cudaFree(0): context and
    cuDNN handle creation) and a 0.7 s cudaStreamCreateWithFlags; the gap they hold is lazy start-up."""
    path = SHARED_TRACES / "kineto/hta_alexnet_a100.json.gz"
    with gzip.open(path, "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    convs = sorted((e for e in events if e.get("name") == "aten::cudnn_convolution"), key=lambda e: e["ts"])
    first = (convs[0]["ts"], convs[0]["ts"] + convs[0]["dur"])
    free = max((e for e in events if e.get("name") == "cudaFree"), key=lambda e: e["dur"])
    assert free["dur"] > 5e6 and first[0] <= free["ts"] < first[1]  # 6 s, inside the first cuDNN op
    a = analyze([load(path)], cfg=Thresholds())
    assert a.dominant_cause == "one-time-cost" and a.dominant_evidence == "lazy-init"
    g = with_evidence(a.gaps, a.cfg)
    big = g.loc[g["dur_ns"].idxmax()]
    assert big["evidence_kind"] == "lazy-init" and "lazy start-up" in big["evidence"]
    assert "cudaFree" in big["evidence"] and "allocator growth" not in big["evidence"]
