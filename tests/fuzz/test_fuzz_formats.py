"""Fuzzing every detected format through ``load``: each format's seeds (fuzz_formats.format_seeds),
mutated by their family, through every command in the watched worker. A format whose reader is
not in the build must be refused naming it, one line, exit 2; a reader must give a result or one
line: never a traceback, a crash, a hang or a changed input."""

from __future__ import annotations

import random

import pytest
from fuzz_formats import format_seeds, mutate_format, mutations
from fuzz_harness import Worker, check_case
from fuzz_mutations import COMMANDS
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_inputs import FUZZ


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return format_seeds(tmp_path_factory.mktemp("format-seeds"))


@FUZZ
@given(data=st.data())
def test_mutated_format_files(worker, seeds, tmp_path_factory, data) -> None:
    name = data.draw(st.sampled_from(sorted(seeds)), label="seed")
    seed = seeds[name]
    kind = data.draw(st.sampled_from(mutations(seed)), label="mutation")
    rnd = random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed value"))
    case = tmp_path_factory.mktemp("case")
    (case / "in").mkdir()
    path, how = mutate_format(rnd, seed, case / "in", kind)
    command = data.draw(st.sampled_from([c for c in COMMANDS if c != "diff"]), label="command")
    why = check_case(worker, str(path), command, str(case))
    assert why is None, f"{name}: {how}\n{why}"


def test_every_seed_unmutated_through_every_command(worker, seeds, tmp_path) -> None:
    for name, seed in sorted(seeds.items()):
        for command in ("analyze", "info", "scan"):
            case = tmp_path / f"{len(list(tmp_path.iterdir()))}"
            (case / "in").mkdir(parents=True)
            path = case / "in" / seed.name
            path.write_bytes(seed.read_bytes())
            why = check_case(worker, str(path), command, str(case))
            assert why is None, f"{name}: {why}"


def test_scan_of_a_folder_with_no_recognisable_file_names_the_folder(worker, seeds, tmp_path) -> None:
    # a pftrace whose first byte is destroyed is no format at all: scan finds nothing, and says where
    (tmp_path / "in").mkdir()
    data = bytearray(seeds["perfetto"].read_bytes())
    data[0] = 0xFF
    path = tmp_path / "in" / "capture.pftrace"
    path.write_bytes(bytes(data))
    assert check_case(worker, str(path), "scan", str(tmp_path)) is None
