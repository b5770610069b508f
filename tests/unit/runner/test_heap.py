"""The command's malloc settings (traceread.runner.heap.reuse_freed_pages, heap.one_heap): applied on glibc, left to
the user when they set malloc's own environment; large allocations then come from the heap, and what one
thread freed is reused by another. And its page size (heap.small_pages): numpy's huge-page advice off, unless
the user set numpy's own."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest
from conftest import FIXTURES

from traceread.runner import heap

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"

_PROBE = """
import numpy as np, resource, sys
from traceread.runner import heap
applied = heap.reuse_freed_pages() if sys.argv[1] == "1" else False
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
a = np.ones(64 << 20, np.uint8); del a  # 64 MiB: above glibc's largest mmap threshold
before = faults()
for _ in range(10):
    a = np.ones(64 << 20, np.uint8); del a
print(int(applied), faults() - before)
"""


def _probe(apply: bool, env: dict[str, str], script: str = _PROBE) -> tuple[bool, int]:
    """(setting applied, the script's measure) from a fresh process: malloc's settings are per process."""
    out = subprocess.run([sys.executable, "-c", script, "1" if apply else "0"], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return out[0] == "1", int(out[1])


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    # 4 KiB pages, so that a fresh mapping's faults are many (transparent huge pages fault 2 MiB at once)
    return {**env, "NUMPY_MADVISE_HUGEPAGE": "0"}


@pytest.mark.skipif(not GLIBC, reason="the setting is glibc's")
def test_freed_large_allocations_are_reused_without_faulting() -> None:
    env = _clean_env()
    applied, faults = _probe(True, env)
    _, faults_plain = _probe(False, env)
    assert applied
    assert faults_plain >= 10 * (64 << 20) // (2 << 20)  # each fresh mapping faults its pages in again
    assert faults * 10 < faults_plain  # the heap's freed pages are reused




def _counting_trims(monkeypatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(heap, "_looked", True)
    monkeypatch.setattr(heap, "_trim", lambda pad: calls.append(pad) or 0)
    return calls


def test_no_pages_given_back_inside_freed_pages_kept(monkeypatch) -> None:
    calls = _counting_trims(monkeypatch)
    with heap.freed_pages_kept():
        heap.trim()
        with heap.freed_pages_kept():
            heap.trim()
        heap.trim()
    assert calls == []
    heap.trim()
    assert calls == [0]


def test_gaps_reuses_freed_pages_and_gives_none_back_between_its_stages(monkeypatch, tmp_path, capsys) -> None:
    from traceread.cli import main

    calls = _counting_trims(monkeypatch)
    applied: list[int] = []
    monkeypatch.setattr(heap, "reuse_freed_pages", lambda: applied.append(1) or True)  # (not this process's malloc)
    monkeypatch.setattr(heap, "small_pages", lambda: applied.append(2) or True)  # (nor its numpy)
    trace = str(FIXTURES / "hta_alexnet_a100.json.gz")
    assert main(["gaps", trace, "--json", str(tmp_path / "g.json"), "--csv", str(tmp_path / "g.csv")]) == 0
    assert applied == [2, 1] and calls == []  # the load's and the stages' trims are no-ops inside the command
    assert (tmp_path / "g.json").stat().st_size and (tmp_path / "g.csv").stat().st_size
    heap.trim()
    assert calls == [0]  # and give pages back again after it


def test_a_small_input_keeps_freed_pages_through_its_analysis_and_a_large_one_does_not(monkeypatch) -> None:
    from traceread import runner
    from traceread.loaders import load
    from traceread.runner import replay

    trace = load(str(FIXTURES / "hta_alexnet_a100.json.gz"))
    calls = _counting_trims(monkeypatch)
    runner.analyze([trace])  # waits for the replay (its trims after the analysis' stages count)
    small = len(calls)
    monkeypatch.setattr(replay, "REPLAY_BESIDE_RULES_MAX_EVENTS", 0)  # as a trace over the limit is analysed
    calls.clear()
    runner.analyze([trace])
    assert small < len(calls)  # the phases' trims give pages back only for the larger input


_THREADS_PROBE = """
import numpy as np, sys, threading
from traceread.runner import heap
applied = heap.one_heap() if sys.argv[1] == "1" else False
heap.reuse_freed_pages()
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
def work():  # a thread's 32 MiB, touched and freed (below a thread arena's 64 MiB: its own heap would hold it)
    a = np.ones(32 << 20, np.uint8); del a
t = threading.Thread(target=work); t.start(); t.join()
before = rss()
b = np.ones(32 << 20, np.uint8)  # the main thread's, touched
print(int(applied), (rss() - before) >> 20)
"""


def _threads_probe(apply: bool, env: dict[str, str]) -> tuple[bool, int]:
    return _probe(apply, env, _THREADS_PROBE)


@pytest.mark.skipif(not GLIBC, reason="the setting is glibc's")
def test_one_heap_lets_a_thread_reuse_what_another_freed() -> None:
    env = _clean_env()
    applied, grown = _threads_probe(True, env)
    _, grown_apart = _threads_probe(False, env)
    assert applied
    assert grown_apart >= 24  # in an arena of its own, the thread's freed pages serve no other thread
    assert grown <= 8  # one heap: the main thread's array takes the pages the thread freed


@pytest.mark.skipif(not GLIBC, reason="the settings are glibc's")
@pytest.mark.parametrize("probe", [_probe, _threads_probe])
def test_user_malloc_settings_win(probe) -> None:
    applied, _ = probe(True, {**_clean_env(), "MALLOC_ARENA_MAX": "2"})
    assert not applied


_HUGE_PROBE = """
import numpy as np, sys
from traceread.runner import heap
applied = heap.small_pages() if sys.argv[1] == "1" else False
a = np.ones(64 << 20, np.uint8)  # 64 MiB, touched: mappings of its own (advice splits them at 2 MiB)
at, to = a.ctypes.data, a.ctypes.data + a.nbytes
huge, inside = 0, False
with open("/proc/self/smaps") as f:
    for line in f:
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo < to and at < hi
        elif inside and head == "AnonHugePages:":
            huge += int(line.split()[1])
print(int(applied), huge)
"""


def _thp_mode() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return "none"


@pytest.mark.skipif(_thp_mode() != "madvise", reason="huge pages here are the kernel's choice, not numpy's advice")
def test_small_pages_stops_numpy_advising_huge_pages() -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    applied, huge = _probe(True, env, _HUGE_PROBE)
    _, huge_plain = _probe(False, env, _HUGE_PROBE)
    if huge_plain == 0:
        pytest.skip("the kernel gave numpy's advised array no huge page (none free)")
    assert applied
    assert huge == 0


def test_small_pages_leaves_the_users_numpy_setting() -> None:
    applied, _ = _probe(True, {**os.environ, "NUMPY_MADVISE_HUGEPAGE": "1"}, _HUGE_PROBE)
    assert not applied


@pytest.mark.parametrize("setting", [heap.reuse_freed_pages, heap.one_heap, heap.small_pages])
def test_elsewhere_a_no_op(monkeypatch: pytest.MonkeyPatch, setting) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert setting() is False
