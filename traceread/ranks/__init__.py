"""Jobs, ranks and stragglers: which traces belong together, how their clocks align, who is late.

Used by ``traceread analyze`` (several inputs) and ``traceread scan`` (a tree of traces). The data
flow is one way: a loaded ``Trace`` (and its analysed tables) -> :func:`identify` -> :func:`summarize`
(both in the worker that loaded it) -> :func:`group_jobs` and :func:`analyze_job` (anywhere: they
read only the small picklable objects).

API (stable; extended, never broken):

* ``identify(trace, path=None, rank_pattern=None) -> list[RankIdentity]``: one identity per rank in
  the trace (a Kineto file: one; an nsys export: one per process with GPU work). ``RankIdentity``
  is frozen, picklable and holds no user/host/env value: ``path, format, rank (None when nothing
  says), world_size, rank_source ('distributedInfo'|'nsys-process'|'filename'|None), frame_rank,
  member, members_in_file, devices, gpu_model, backend, process_groups ((pg_name, pg_desc, pg_size),
  ...), time_base, epoch_offset_ns, start_ns, end_ns, n_events`` plus ``start_epoch_ns``,
  ``end_epoch_ns``, ``key`` (path, member), ``label``, ``claimed_rank`` (``rank``, known to be
  claimed) and ``to_dict()``.
* ``summarize(trace, identity, steps, gaps, step_source) -> RankSummary`` (``steps``/``gaps``: the
  analysis' rows of that trace; ``traceread.analysis.rank_summary(analysis, identity)`` does it from
  an ``Analysis``): that rank's
  collectives (``COLLECTIVE_COLUMNS``: device, pg, pg_desc, seq, step, collective, bytes,
  start_ns, end_ns and the lead before each: lead_start_ns, lead_busy_ns, lead_<class>_ns), steps
  (``STEP_COLUMNS``, busy/idle by class) and classified gaps (``GAP_COLUMNS``), as plain numpy
  columns (``RankSummary.table(name)`` for a DataFrame); ``step_source``.
* ``group_jobs(identities, rank_pattern=None, cfg=Thresholds()) -> list[JobGroup]``: each
  ``JobGroup`` is one capture of one job: ``name`` (stable, unique in the result), ``job_key``,
  ``directory``, ``rule``, ``capture``/``captures``, ``members``, ``world_size``, ``ranks``,
  ``missing_ranks``, ``duplicate_ranks`` ((rank, (labels...)), ...), ``unranked``,
  ``start_epoch_ns``/``end_epoch_ns``, ``evidence`` (sentences) and ``to_dict()``.
* ``analyze_job(summaries, cfg=Thresholds(), group=None) -> JobReport``: alignment (per rank offset,
  uncertainty, method), matched collectives (arrival, wait, last rank), per-rank last arrivals and
  ``waited_on_ns``, ``stragglers`` worst first (``Straggler``: ``rank, waited_on_ns, last_arrivals, cause,
  reason, evidence, ...``), job step time on aligned windows, ``verdict``; ``JobReport.to_dict()`` is JSON-able.
  Ranks are aligned through the process-group graph (``traceread.ranks.graph``); ``stages`` (pipeline
  stages read from p2p), ``stage_imbalance`` (``StageImbalance``: the slow stage and its fix), ``waiting_for``
  (``WaitingFor``: whom the others' waiting is for: a rank, a stage, or moving) and per rank/straggler ``stage``,
  ``attributed_wait_ns`` (waits passed on along chains, ``traceread.ranks.blame``) and
  ``share_of_others_time`` (at most 1); ``prediction``: the job step without the straggler / with
  balanced stages from the ranks' own steps in the what-if replay (``traceread.ranks.predict``).
  ``evidence`` (``traceread.ranks.evidence.ClaimEvidence``): collectives, steps and ranks present against the
  world size, and which claims they support (a claim withheld says "not judged: insufficient evidence" with
  the numbers; a partial job's verdict starts "N of M ranks present"). Arrivals are when a rank was ready for
  a call (``ready_ns``: a kernel that started late waiting for a peer arrived when its rank got there).
  Point-to-point transfers are paired by direction and per-pair order (``traceread.ranks.p2p``).
* ``align(summaries, max_spread_ns=1_000_000, max_skew_ns=100_000_000)``: the alignment alone
  (``RankAlignment``: rank, offset_ns, uncertainty_ns, method, matched, shift, end_spread_ns).
* ``DEFAULT_RANK_PATTERN``: the file-name rank regex (named group ``rank``, optional ``world``).
* ``traceread.ranks.section.job_section(traces, summary_of, cfg, rank_pattern, groups=None)``: the analyze
  report's job section (``JobSection``: groups, reports, summary, separate, to_dict());
  ``traceread.render.jobsection.group_markdown(group, report)`` renders one job as Markdown.

Times: identities and summaries hold each trace's own ns (``epoch_offset_ns`` maps them to epoch);
a ``JobReport`` holds aligned ns on its reference rank's clock (epoch ns when that is epoch).
"""

from traceread.ranks.align import RankAlignment, align
from traceread.ranks.grouping import JobGroup, group_jobs, ranges
from traceread.ranks.identity import DEFAULT_RANK_PATTERN, RankIdentity, identify, rank_from_name
from traceread.ranks.job import JobReport, analyze_job
from traceread.ranks.results import StageImbalance, Straggler, WaitingFor
from traceread.ranks.summary import RankSummary, summarize

__all__ = ["DEFAULT_RANK_PATTERN", "JobGroup", "JobReport", "RankAlignment", "RankIdentity", "RankSummary",
           "StageImbalance", "Straggler", "WaitingFor", "align", "analyze_job", "group_jobs", "identify",
           "rank_from_name", "ranges", "summarize"]
