"""traceread.ranks on hand-built identities and summaries: grouping rules, rank patterns, matching."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from traceread.ranks import RankIdentity, RankSummary, align, analyze_job, group_jobs, ranges, rank_from_name
from traceread.ranks.align import METHOD_ORDER, METHOD_SEQ
from traceread.ranks.job import COMPONENTS, REASONS
from traceread.ranks.summary import COLLECTIVE_COLUMNS, GAP_COLUMNS, STEP_COLUMNS, lead_col
from traceread.render.notes import text as words  # notes are data; the reports word them

T0 = 1_735_632_360_000_000_000
MIN = 60 * 10**9


def ident(path: str, rank: int | None, source: str | None = "distributedInfo", world: int | None = 4,
          start: int = T0, dur: int = 10**9, **kw) -> RankIdentity:
    base = dict(path=path, format="kineto", rank=rank, world_size=world, rank_source=source,
                frame_rank=rank or 0, member=0, members_in_file=1, devices=(0,), gpu_model="H100",
                backend="nccl" if source == "distributedInfo" else None, process_groups=(), time_base="epoch",
                epoch_offset_ns=0, start_ns=start, end_ns=start + dur, n_events=100)
    base.update(kw)
    return RankIdentity(**base)


@pytest.mark.parametrize("name,rank,world", [("trace_rank-3.json", 3, None), ("x.rank_3.pt.trace.json.gz", 3, None),
                                             ("worker3.1700000.pt.trace.json", 3, None),
                                             ("sampled_rank12of128.json.gz", 12, 128), ("RANK7.json", 7, None),
                                             ("trace.json", None, None), ("ranking.json", None, None)])
def test_default_rank_pattern(name, rank, world):
    assert rank_from_name(f"/x/{name}") == (rank, world)


def test_custom_rank_pattern_needs_a_rank_group():
    assert rank_from_name("/x/node2-gpu05.json", r"gpu(?P<rank>\d+)") == (5, None)
    with pytest.raises(ValueError, match="named group 'rank'"):
        rank_from_name("/x/a.json", r"gpu(\d+)")


def test_one_job_with_missing_and_duplicate_ranks():
    ids = [ident("/j/a.json", 0), ident("/j/b.json", 1), ident("/j/c.json", 1, start=T0 + 5), ident("/j/d.json", 3)]
    (g,) = group_jobs(ids)
    assert g.ranks == (0, 1, 3) and g.missing_ranks == (2,) and g.world_size == 4
    assert g.duplicate_ranks == ((1, ("b.json", "c.json")),)
    assert any("1 of 4 ranks have no trace: 2" in e for e in g.evidence)
    rep = analyze_job([_summary(i) for i in ids], group=g)
    assert any("rank 1 is claimed by 2 traces" in n for n in map(words, rep.notes))
    assert {a.rank for a in rep.alignment} == {0, 3}  # the duplicate is not aligned, and not replaced


def test_windows_apart_are_separate_captures_and_dirs_are_separate_jobs():
    ids = [ident("/j/a.json", 0), ident("/j/b.json", 1), ident("/j/c.json", 0, start=T0 + 80 * MIN),
           ident("/j/d.json", 1, start=T0 + 80 * MIN), ident("/k/a.json", 0)]
    groups = group_jobs(ids)
    assert [(g.directory, g.capture, g.captures, g.ranks) for g in groups] == [
        ("/j", 0, 2, (0, 1)), ("/j", 1, 2, (0, 1)), ("/k", 0, 1, (0,))]
    assert groups[0].job_key == groups[1].job_key != groups[2].job_key
    assert len({g.name for g in groups}) == 3


def test_no_rank_is_never_rank_0_and_filename_ranks_group_by_stem():
    ids = [ident("/j/plain.json", None, None, None), ident("/j/plain2.json", None, None, None),
           ident("/j/run.rank0.json", 0, "filename", None), ident("/j/run.rank1.json", 1, "filename", None),
           ident("/j/other.rank0.json", 0, "filename", None)]
    groups = group_jobs(ids)
    by = {tuple(m.path for m in g.members): g for g in groups}
    assert by[("/j/run.rank0.json", "/j/run.rank1.json")].rule == "filename"
    assert by[("/j/plain.json",)].ranks == () and by[("/j/plain.json",)].rule == "single"
    assert len(groups) == 4


def test_different_world_sizes_are_different_jobs():
    groups = group_jobs([ident("/j/a.json", 0, world=2), ident("/j/b.json", 0, world=8)])
    assert len(groups) == 2 and not any(g.duplicate_ranks for g in groups)


def test_ranges():
    assert ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8" and ranges([]) == ""


# --- alignment on hand-built summaries -------------------------------------------------------------

def _summary(i: RankIdentity, starts=(), ends=(), seq=None, step=None, typ="all-reduce") -> RankSummary:
    n = len(starts)
    c = {k: np.zeros(n, dtype=np.int64) for k in COLLECTIVE_COLUMNS}
    c.update(pg=np.array(["0"] * n, dtype=object), pg_desc=np.array([""] * n, dtype=object),
             collective=np.array([typ] * n, dtype=object), bytes=np.full(n, 1 << 20, dtype=np.int64),
             seq=np.asarray(seq if seq is not None else [-1] * n, dtype=np.int64),
             step=np.asarray(step if step is not None else [-1] * n, dtype=np.int64),
             start_ns=np.asarray(starts, dtype=np.int64), end_ns=np.asarray(ends, dtype=np.int64))
    c["lead_start_ns"] = c["start_ns"] - 1000
    c["ready_ns"] = c["start_ns"].copy()  # every call started when its rank was ready (no peer wait)
    steps = {k: np.zeros(0, dtype=np.int64) for k in STEP_COLUMNS}
    gaps = {k: np.zeros(0, dtype=object if k == "class" else np.int64) for k in GAP_COLUMNS}
    return RankSummary(identity=i, collectives=c, steps=steps, gaps=gaps)


def _irregular(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ends = T0 + np.cumsum(rng.integers(200_000, 3_000_000, n))
    return ends - 100_000, ends


def test_order_matching_finds_the_shift_and_offset_without_steps():
    starts, ends = _irregular(40, 1)
    off = 1_700_000
    a = _summary(ident("/j/a.json", 0), starts[:30], ends[:30])
    b = _summary(ident("/j/b.json", 1), starts[3:] + off, ends[3:] + off + 700)  # window starts 3 calls later
    al, _ = align([a, b])
    assert al[1].method == METHOD_ORDER and al[1].shift == -3 and abs(al[1].offset_ns - off - 700) < 1_000
    assert al[1].matched == 27


def test_sequence_numbers_win_over_order():
    starts, ends = _irregular(20, 2)
    seq = np.arange(20)
    a = _summary(ident("/j/a.json", 0), starts, ends, seq=seq)
    keep = np.r_[0:5, 7:20]  # rank 1 lost two records: order would be off by two from there on
    b = _summary(ident("/j/b.json", 1), starts[keep] - 900_000, ends[keep] - 900_000, seq=seq[keep])
    al, _ = align([a, b])
    assert al[1].method == METHOD_SEQ and al[1].offset_ns == -900_000 and al[1].matched == 18


def test_mismatched_collectives_are_not_matched():
    starts, ends = _irregular(10, 3)
    a = _summary(ident("/j/a.json", 0), starts, ends, typ="all-reduce")
    b = _summary(ident("/j/b.json", 1), starts, ends, typ="all-gather")
    al, _ = align([a, b])
    assert al[1].offset_ns is None and al[1].matched == 0
    rep = analyze_job([a, b])
    assert rep.stragglers == () and any("not aligned" in n for n in map(words, rep.notes))


def test_straggler_needs_more_than_the_alignment_error():
    """Lateness inside the per-collective spread of end times is not evidence of a straggler."""
    rng = np.random.default_rng(4)
    starts, ends = _irregular(30, 4)
    noise = rng.integers(-400_000, 400_000, 30)  # ends scattered: a loose alignment
    a = _summary(ident("/j/a.json", 0), starts, ends)
    b = _summary(ident("/j/b.json", 1), starts + 60_000, ends + noise)
    rep = analyze_job([a, b])
    assert rep.alignment[1].end_spread_ns > 100_000
    assert rep.stragglers == ()
    tight = analyze_job([a, dataclasses.replace(b, collectives={**b.collectives, "end_ns": ends + 5})])
    assert [s.rank for s in tight.stragglers] == [1]


def test_nearest_end_matching_when_records_are_dropped():
    """Sampled traces drop calls on each rank independently: the n-th call is not the n-th elsewhere."""
    starts, ends = _irregular(60, 5)
    rng = np.random.default_rng(5)
    keep_a = np.sort(rng.choice(60, 40, replace=False))
    keep_b = np.sort(rng.choice(60, 40, replace=False))
    a = _summary(ident("/j/a.json", 0), starts[keep_a], ends[keep_a])
    b = _summary(ident("/j/b.json", 1), starts[keep_b] + 2_500_000, ends[keep_b] + 2_500_000 + 3)
    al, _ = align([a, b])
    common = len(np.intersect1d(keep_a, keep_b))
    assert al[1].method.startswith("collective end times, matched by nearest end time")
    assert abs(al[1].offset_ns - 2_500_003) < 1_000 and al[1].matched == common


def test_arrivals_are_exact_epoch_ns():
    """Aligned times stay exact int64 ns (epoch ns do not fit a float64 exactly)."""
    starts, ends = _irregular(12, 6)
    starts = starts + 7  # odd ns
    a = _summary(ident("/j/a.json", 0), starts, ends)
    b = _summary(ident("/j/b.json", 1), starts + 1_000_003, ends + 1_000_000)
    rep = analyze_job([a, b])
    assert [c["arrival_ns"][0] for c in rep.collectives] == starts.tolist()
    assert [c["arrival_ns"][1] for c in rep.collectives] == (starts + 3).tolist()
    assert [c["wait_ns"][0] for c in rep.collectives] == (ends - starts).tolist()


def test_a_stragglers_one_time_cost_is_named_not_short_gaps():
    """The lead's one-time-cost idle is its own component (the ranks once had no one-time-cost and
    reported a straggler's compile time as "short-gaps")."""
    starts, ends = _irregular(30, 7)
    a = _summary(ident("/j/a.json", 0), starts, ends)
    b = _summary(ident("/j/b.json", 1), starts + 60_000, ends + 5)
    cb = dict(b.collectives)
    cb["lead_start_ns"] = cb["start_ns"] - 61_000  # 60 us longer lead than rank 0's, all of it one-time work
    cb[lead_col("one-time-cost")] = np.full(30, 60_000, dtype=np.int64)
    rep = analyze_job([a, dataclasses.replace(b, collectives=cb)])
    (s,) = rep.stragglers
    assert s.rank == 1 and s.cause == "one-time-cost" and s.reason == REASONS["one-time-cost"]
    assert s.lead_excess_ns["one-time-cost"] == 60_000 and s.lead_excess_ns["short-gaps"] == 0
    assert set(REASONS) >= set(COMPONENTS)


def test_uncertainty_includes_what_does_not_average_out():
    """All-reduce ends 1 ms late and all-gather ends 1 ms early on rank 1 (their algorithms, every call): the
    offset is off by up to 1 ms whatever the number of calls, and the stated uncertainty says so."""
    from traceread.ranks.graph import align_graph

    rng = np.random.default_rng(9)
    starts, ends = _irregular(80, 9)
    kind = np.array(["all-reduce", "all-gather"] * 40, dtype=object)
    pg = np.array(["0", "1"] * 40, dtype=object)
    seq = np.concatenate([np.arange(40)[:, None], np.arange(40)[:, None]], axis=1).ravel()
    off = 5_000_000
    bias = np.where(kind == "all-reduce", 1_000_000, -1_300_000) + rng.integers(-2_000, 2_000, 80)

    def rank(i, s, e):
        x = _summary(ident(f"/j/{i}.json", i), s, e, seq=seq)
        return dataclasses.replace(x, collectives={**x.collectives, "collective": kind, "pg": pg})

    al, _ = align_graph([rank(0, starts, ends), rank(1, starts + off, ends + off + bias)])
    got = al[1]
    assert got.uncertainty_ns >= 1_000_000  # half the two groups' disagreement (2.3 ms), not spread / sqrt(80)
    assert abs(got.offset_ns - off) <= 3 * got.uncertainty_ns
    # without the systematic part the same calls give a tight figure
    even = rank(1, starts + off, ends + off + rng.integers(-2_000, 2_000, 80))
    al2, _ = align_graph([rank(0, starts, ends), even])
    assert al2[1].uncertainty_ns < 10_000 and abs(al2[1].offset_ns - off) <= 3 * al2[1].uncertainty_ns


def test_implied_world_from_rank_numbers():
    from traceread.ranks.evidence import implied_world

    assert implied_world([4, 8]) == 9  # ranks 0-3 and 5-7 missing
    assert implied_world([0, 1, 2, 3]) is None  # nothing missing below the highest (trailing ones unknowable)
    assert implied_world(list(range(1, 9))) is None  # numbered from 1: a missing 0 alone is no hole
    assert implied_world([0, 2]) == 3 and implied_world([]) is None
    top = 2**31 - 2  # rank numbers near int32's limit: counted, never listed (a list of them is GBs)
    assert implied_world([0, top]) == top + 1 and implied_world([1, 2]) is None


@pytest.mark.parametrize("name", ["hta_nccl_a100_rank0of2.json.gz", "kineto2021_resnet50_bare_list.pt.trace.json.gz"])
def test_rank_count_is_the_number_of_identities(name):
    from tests.conftest import FIXTURES
    from traceread.loaders import load
    from traceread.ranks.identity import identify, rank_count

    t = load(str(FIXTURES / name))
    assert rank_count(t) == len(identify(t)) == 1
    two = dataclasses.replace(t, events=t.events.assign(rank=np.arange(len(t.events)) % 2),
                              meta=dataclasses.replace(t.meta, ranks=[]))
    assert rank_count(two) == len(identify(two)) == 2
