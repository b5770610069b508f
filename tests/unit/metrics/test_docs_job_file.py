"""docs/job-file.md lists every job.toml key Workload accepts, and its example file reads."""

from __future__ import annotations

import dataclasses
import re

from conftest import REPO

from traceread.metrics.workload import Workload, make_workload, read_workload_file

DOC = REPO / "docs" / "job-file.md"


def test_every_key_is_documented() -> None:
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", DOC.read_text("utf-8"), re.M))
    assert listed == {f.name for f in dataclasses.fields(Workload)}


def test_the_example_file_reads(tmp_path) -> None:
    (block,) = re.findall(r"^```toml\n(.*?)^```", DOC.read_text("utf-8"), re.S | re.M)
    path = tmp_path / "job.toml"
    path.write_text(block)
    w = make_workload(read_workload_file(str(path)), {})
    assert w is not None and w.params == 7e9 and w.tokens() == (512 * 4096, w.tokens()[1])
