"""SIGTERM (a CI timeout, Slurm, Kubernetes) or SIGHUP to a running scan: it stops its workers and
waits for them before it exits; no orphan goes on writing into the output folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.planted import PlantSpec, plant

from traceread.scan.work import SLOW_START_ENV

psutil = pytest.importorskip("psutil")


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_terminated_scan_stops_and_waits_for_its_workers(tmp_path, sig):
    tree = tmp_path / "tree" / "a"
    tree.mkdir(parents=True)
    write_kineto(plant(PlantSpec(seed=5, ranks=2, steps=3, weights={})).scenario,
                 str(tree / "train.rank{rank}.pt.trace.json"))
    out = tmp_path / "o"
    # the workers take a minute to start: without the forwarding they would outlive the scan by that long
    env = {**os.environ, SLOW_START_ENV: "60"}
    proc = subprocess.Popen([sys.executable, "-c", "from traceread.cli import run; run()", "scan",
                             str(tmp_path / "tree"), "--out", str(out), "--workers", "2"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 60
        workers: list = []
        while time.monotonic() < deadline and len(workers) < 2:
            time.sleep(0.1)
            workers = parent.children()
        assert len(workers) == 2, "the scan did not start its workers"
        time.sleep(0.5)  # they are in their start-up now, their files waiting in their pipes
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + getattr(signal, sig), err
    assert err.strip().splitlines()[-1] == f"traceread: stopped by {sig}", err
    alive = [w.pid for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
    assert not alive, "workers outlived the terminated scan"
    assert not [p for p in out.rglob(".traceread-*.tmp")]
