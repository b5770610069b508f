"""Fuzzing the XSpace reader: mutated ``.xplane.pb`` bytes and mutated trace-viewer JSON through every
command, in the watched worker (see ``test_fuzz_inputs``): a result or one line naming the file with
exit 2, never a traceback, a crash or a hang, and the input unchanged.

The bases and the byte mutations are in ``fuzz_xplane``; the trace-viewer JSON (written from each
base by ``xplane_synth.viewer_json``) takes the suite's JSON mutations.
"""

from __future__ import annotations

import gzip
import os
import random

import pytest
from fuzz_harness import Worker, check_case
from fuzz_mutations import COMMANDS, JSON_MUTATIONS, mutate_json
from fuzz_xplane import BYTE_MUTATIONS, XPLANE_COMMANDS, mutate_xplane, xplane_bases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xplane_synth import viewer_json, walk

EXAMPLES = int(os.environ.get("TRACEREAD_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


@pytest.fixture(scope="module")
def bases():
    return xplane_bases()


@FUZZ
@given(data=st.data())
def test_mutated_xplane(worker, bases, tmp_path_factory, data) -> None:
    base_name = data.draw(st.sampled_from(sorted(bases)), label="base")
    kind = data.draw(st.sampled_from(BYTE_MUTATIONS), label="mutation")
    rnd = random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    mutated, how = mutate_xplane(rnd, bases[base_name], kind)
    d = tmp_path_factory.mktemp("case")
    (d / "in").mkdir()
    path = d / "in" / f"{base_name}.xplane.pb"
    path.write_bytes(mutated)
    base = d / f"base-{base_name}.xplane.pb"
    base.write_bytes(bases[base_name])
    command = data.draw(st.sampled_from(XPLANE_COMMANDS), label="command")
    why = check_case(worker, str(path), command, str(d), str(base))
    assert why is None, f"{base_name}: {how}\n{why}"


@FUZZ
@given(data=st.data())
def test_mutated_trace_viewer_json(worker, bases, tmp_path_factory, data) -> None:
    base_name = data.draw(st.sampled_from(sorted(bases)), label="base")
    text = viewer_json(walk(bases[base_name]), filtered=data.draw(st.booleans(), label="filtered")).decode()
    kind = data.draw(st.sampled_from(JSON_MUTATIONS), label="mutation")
    mutated, how = mutate_json(random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed")), text, kind)
    d = tmp_path_factory.mktemp("case")
    (d / "in").mkdir()
    path = d / "in" / f"{base_name}.trace.json.gz"
    path.write_bytes(gzip.compress(mutated, mtime=0))
    base = d / f"base-{base_name}.trace.json"
    base.write_text(text)
    command = data.draw(st.sampled_from(COMMANDS), label="command")
    why = check_case(worker, str(path), command, str(d), str(base))
    assert why is None, f"{base_name}: {how}\n{why}"
