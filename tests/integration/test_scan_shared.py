"""``traceread scan`` groups the reference traces into the jobs the issue lists (all in one folder)."""

from __future__ import annotations

import json
import os

from conftest import SHARED_TRACES, needs_shared

from traceread.cli import main

FILES = ("kineto/hta_sampled_rank0of128.json.gz", "kineto/hta_sampled_rank1of128.json.gz",
         "kineto/hta_nccl_a100_rank0of2.json.gz", "kineto/hta_compare_base.json.gz",
         "kineto/hta_compare_test.json.gz", "kineto/tracelens_vllm_graph_capture_rocm.json.gz",
         "kineto/tracelens_vllm_graph_replay_rocm.json.gz", "nsys/nsysai_h100_2gpu_window_2026.sqlite")


@needs_shared
def test_reference_traces_group_as_expected(tmp_path):
    tree = tmp_path / "dev"
    tree.mkdir()
    for f in FILES:  # one folder: "same directory" alone must not merge them
        os.symlink(SHARED_TRACES / f, tree / os.path.basename(f))
    out = tmp_path / "out"
    assert main(["scan", str(tree), "--out", str(out), "--workers", "2"]) == 0
    index = json.loads((out / "index.json").read_text())
    paths = {t["trace_id"]: t["path"] for t in index["traces"]}
    jobs = {tuple(sorted(paths[i] for i in j["trace_ids"])): json.loads((out / j["link_json"]).read_text())
            for j in index["jobs"]}
    sampled = jobs[("hta_sampled_rank0of128.json.gz", "hta_sampled_rank1of128.json.gz")]
    assert sampled["world_size"] == 128 and len(sampled["group"]["missing_ranks"]) == 126
    assert jobs[("hta_nccl_a100_rank0of2.json.gz",)]["group"]["missing_ranks"] == [1]
    compare = jobs[("hta_compare_base.json.gz", "hta_compare_test.json.gz")]
    assert [d["rank"] for d in compare["group"]["duplicate_ranks"]] == [1]  # reported, not merged
    assert ("tracelens_vllm_graph_capture_rocm.json.gz",) in jobs and ("tracelens_vllm_graph_replay_rocm.json.gz",) in jobs
    nsys = jobs[("nsysai_h100_2gpu_window_2026.sqlite",)]
    assert nsys["group"]["ranks"] == [0, 1]
    assert len(jobs) == 6
