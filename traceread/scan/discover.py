"""Find the trace files under the scan roots, and say what was skipped and why.

Kineto by name (``*.json``, ``*.json.gz``, ``*.pt.trace.json(.gz)``, ``*.json.tmp`` of crashed runs),
Nsight Systems SQLite exports by their tables (opened read-only; other SQLite files are "not
traces"), ``.nsys-rep`` reports (the loader exports them when ``nsys`` is on PATH). Everything else
is counted and skipped. Directory symlinks are followed once (a loop is reported, not walked
forever); a file reached twice through symlinks is analysed once, and so is a Kineto capture kept
twice (one ``trace_id`` and the same text: :func:`_one_per_capture`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sqlite3
import stat
from dataclasses import dataclass, field

from traceread.loaders import detect
from traceread.trace import shown_path

KINETO_SUFFIXES = (".json", ".json.gz", ".json.tmp")
NSYS_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
SQLITE_MAGIC = b"SQLite format 3\x00"
# SQLite databases of the other profilers (read, or refused naming the format, like any trace)
SQLITE_TRACES = (detect.RPD, detect.ROCPD, detect.ROCPROF_V1)
# formats found by content in a file of any name; the rest of an unknown name is "other files"
_UNKNOWN = (detect.UNKNOWN_BINARY, detect.UNKNOWN_JSON, detect.UNKNOWN_SQLITE)


@dataclass(frozen=True)
class Candidate:
    """A file to analyse, with the stat facts the cache keys on."""

    path: str  # absolute path as reached (symlinks kept: the user's name for it)
    rel: str  # the user's view: relative to its scan root (prefixed with the root's name when several)
    root: str  # the scan root it was found under (absolute)
    kind: str  # a format name of traceread.loaders.detect ("kineto", "nsys", "nsys-rep", "xplane", ...)
    size: int
    mtime_ns: int
    inode: int


@dataclass(frozen=True)
class Problem:
    """A file that will not be analysed. ``kind``: "failed" (unreadable) or "not-trace"."""

    rel: str
    problem: str
    kind: str = "failed"


@dataclass
class Discovery:
    candidates: list[Candidate] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count (other files, duplicates)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def trace_kind(name: str) -> str | None:
    """"kineto", "sqlite" (to be checked), "nsys-rep", or None for a file that is not a trace by name."""
    low = name.lower()
    if low.endswith(KINETO_SUFFIXES):
        return "kineto"
    if low.endswith(NSYS_REPORT_SUFFIXES):
        return "nsys-rep"
    if low.endswith(SQLITE_SUFFIXES):
        return "sqlite"
    return None


def is_nsys_export(path: str) -> tuple[bool, str]:
    """Whether the SQLite file at ``path`` is an nsys export (by its tables); the reason when not."""
    from traceread.loaders.nsys.read import NSYS_MARKERS, one_line, read_only_uri

    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        return False, f"cannot read ({exc.strerror})"
    if not head:
        return False, "empty file"
    if not head.startswith(SQLITE_MAGIC):
        return False, "not an SQLite database"
    try:
        # immutable: a look at the schema creates no -shm beside an export with a -wal, and takes
        # no lock (a locked export is then found, and reading it is what may fail)
        conn = sqlite3.connect(read_only_uri(path, immutable=True), uri=True)
        # A damaged file can hold table names that are not UTF-8: read them as bytes.
        conn.text_factory = bytes
        try:
            tables = {r[0].decode("utf-8", "replace") if isinstance(r[0], bytes) else str(r[0])
                      for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return False, f"not a readable SQLite database ({one_line(exc)})"
    except UnicodeDecodeError:  # SQLite's error text quoting a damaged schema is not UTF-8
        return False, "not a readable SQLite database (damaged schema)"
    if "StringIds" in tables and any(t in tables for t in NSYS_MARKERS):
        return True, ""
    return False, "SQLite database without Nsight Systems tables"


def by_content(path: str) -> str | None:
    """The format of a file whose name says nothing, by its content (a regular, readable, non-empty
    file only: nothing else is opened); None when it is no trace traceread knows."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0 or not os.access(path, os.R_OK):
            return None
        found = detect.detect(path)
    except OSError:
        return None
    if found.format in _UNKNOWN or (found.format == detect.KINETO and found.why in ("gzip", "JSON")):
        return None  # a JSON or gzip with no mark of a trace, under a name no trace has: another file
    if found.format == detect.NSYS and found.why != "Nsight Systems tables":
        return None
    return found.format


def _json_kind(path: str) -> str:
    """A file named like a Kineto trace: the JSON format its content names (Kineto when unsure)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return "kineto"
        found = detect.detect(path)
    except OSError:
        return "kineto"
    return found.format if found.format in (detect.XPLANE_JSON, detect.ROCPROFV3_JSON, detect.RPD_JSON,
                                            detect.CHROME_JSON, detect.PERFETTO) else "kineto"


def discover(roots: list[str], exclude: list[str] | None = None) -> Discovery:
    """Walk ``roots`` (files or directories) and sort every file into candidates, problems and skips.

    ``exclude``: absolute directories not to enter (the output directory when it lies inside).
    """
    out = Discovery()
    seen_files: set[tuple[int, int]] = set()
    roots = [os.path.abspath(r) for r in roots]
    labels = _root_labels(roots)
    skip_dirs = {os.path.realpath(e) for e in exclude or []}
    for root, label in zip(roots, labels, strict=True):
        if os.path.isdir(root):
            _walk(root, label, out, seen_files, skip_dirs)
        else:
            _consider(root, root, os.path.basename(root), out, seen_files, explicit=True)
    _distinct_names(out)
    _one_run_once(out)
    out.candidates.sort(key=lambda c: c.rel)
    _one_per_capture(out)
    out.problems.sort(key=lambda p: p.rel)
    return out


COPY_SKIP = ("copies of a trace found elsewhere in the tree (the same trace_id and the same content; "
             "the first by path is analysed)")
_HASH_READ = 4 << 20


def _one_per_capture(out: Discovery) -> None:
    """Kineto files that name one ``trace_id`` and hold the same JSON text are one capture (a trace
    copied to a second folder, or kept both plain and gzipped): only the first by path (a finished
    file before a crashed run's ``.json.tmp``) is analysed, the others are counted as skipped.

    The id alone does not make a copy: a profiler session writes it into every capture it exports
    (two distinct vLLM captures in the reference traces share one), so files sharing an id are
    compared by a digest of their uncompressed text; only those are read whole. The id is read from
    the file's first bytes (:func:`~traceread.loaders.kineto.chunks.peek_header`), compared, never
    shown. Files without one are all analysed."""
    from traceread.loaders.kineto.chunks import peek_header
    from traceread.loaders.kineto.meta import trace_id

    kineto = [c for c in out.candidates if c.kind == "kineto"]
    if len(kineto) < 2:
        return
    by_id: dict[str, list[Candidate]] = {}
    for c in sorted(kineto, key=lambda c: (c.rel.lower().endswith(".tmp"), c.rel)):
        top = peek_header(c.path)
        tid = trace_id(top) if top else None
        if tid is not None:
            by_id.setdefault(tid, []).append(c)
    copies: set[str] = set()
    for group in by_id.values():
        if len(group) < 2:
            continue
        seen: set[str] = set()
        for c in group:
            digest = _text_digest(c.path)
            if digest is None:
                continue
            if digest in seen:
                copies.add(c.rel)
                out.skip(COPY_SKIP)
            seen.add(digest)
    if copies:
        out.candidates = [c for c in out.candidates if c.rel not in copies]


def _text_digest(path: str) -> str | None:
    """A digest of a Kineto file's uncompressed text (plain and gzipped copies agree); None when it
    cannot be read whole (the analysis then reports the problem)."""
    from traceread.errors import TraceReadError
    from traceread.loaders.kineto.source import Source

    try:
        src = Source(path, ahead=False)
    except OSError:
        return None
    h = hashlib.blake2b(digest_size=16)
    try:
        while block := src.read(_HASH_READ):
            h.update(block)
    except (OSError, TraceReadError, EOFError, ValueError):
        return None
    finally:
        src.close()
    return h.hexdigest()


def _distinct_names(out: Discovery) -> None:
    """Names are shown escaped where their bytes are not UTF-8 (``run\\xff``); when that makes two
    files' names equal (another name spells ``\\xff`` literally), every escaped part of every such
    name gets a short hash of its bytes, so distinct files and folders never share a name in the outputs."""
    counts: dict[str, int] = {}
    for c in out.candidates:
        counts[c.rel] = counts.get(c.rel, 0) + 1
    if all(n == 1 for n in counts.values()):
        return
    for i, c in enumerate(out.candidates):
        raw = c.path.split(os.sep)[-len(c.rel.split(os.sep)):]  # rel's parts as the OS gives them
        if shown_path(c.path) != c.path:
            parts = [shown_path(p) + (f"~{hashlib.blake2b(os.fsencode(p), digest_size=3).hexdigest()}"
                                      if shown_path(p) != p else "") for p in raw]
            out.candidates[i] = dataclasses.replace(c, rel=os.sep.join(parts))


def _root_labels(roots: list[str]) -> list[str]:
    """Prefix for relative paths: none for one root, else each root's name (made unique)."""
    if len(roots) == 1:
        return [""]
    labels, used = [], set()
    for r in roots:
        base = os.path.basename(r.rstrip(os.sep)) or "root"
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name)
        labels.append(name)
    return labels


def _walk(root: str, label: str, out: Discovery, seen_files: set, skip_dirs: set[str]) -> None:
    visited: set[tuple[int, int]] = set()  # directories on every path walked: loop detection
    stack = [root]
    while stack:
        d = stack.pop()
        rel_d = os.path.relpath(d, root)
        shown = shown_path(os.path.normpath(os.path.join(label, rel_d)) if label else rel_d)
        try:
            st = os.stat(d)
        except OSError as exc:
            out.problems.append(Problem(shown, f"cannot enter directory ({exc.strerror})"))
            continue
        if (st.st_dev, st.st_ino) in visited:  # a symlink loop, or a second way into a scanned directory
            real, parent = os.path.realpath(d), os.path.realpath(os.path.dirname(d))
            out.skip("symbolic link loops (not followed)" if (parent + os.sep).startswith(real + os.sep)
                     else "directories reached again through a symbolic link")
            continue
        visited.add((st.st_dev, st.st_ino))
        if os.path.realpath(d) in skip_dirs:
            continue
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.problems.append(Problem(shown, f"cannot list directory ({exc.strerror})"))
            continue
        subdirs = []
        for e in entries:
            try:
                is_dir = e.is_dir(follow_symlinks=True)
            except OSError:
                is_dir = False
            if is_dir:
                subdirs.append(e.path)
            else:
                rel = os.path.relpath(e.path, root)
                _consider(e.path, root, os.path.join(label, rel) if label else rel, out, seen_files)
        stack.extend(reversed(subdirs))


def _consider(path: str, root: str, rel: str, out: Discovery, seen_files: set, explicit: bool = False) -> None:
    rel = shown_path(rel)  # reports, the index and the tables are UTF-8; ``path`` keeps the name's own bytes
    kind = trace_kind(os.path.basename(path))
    if kind is None and not explicit:
        kind = by_content(path)
        if kind is None:
            out.skip("other files")
            return
        if kind == detect.TRACEREAD_PERFETTO:
            out.problems.append(Problem(rel, f"not a trace: {detect.describe(kind)}", "not-trace"))
            return
    elif kind == "kineto":
        kind = _json_kind(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        problem = "broken symbolic link" if os.path.islink(path) else "no such file"
        out.problems.append(Problem(rel, problem))
        return
    except OSError as exc:
        out.problems.append(Problem(rel, f"cannot read ({exc.strerror})"))
        return
    if not stat.S_ISREG(st.st_mode):
        out.skip("not regular files (sockets, devices, pipes)")
        return
    if (st.st_dev, st.st_ino) in seen_files:
        out.skip("already found through another path (symbolic link)")
        return
    seen_files.add((st.st_dev, st.st_ino))
    if not os.access(path, os.R_OK):
        out.problems.append(Problem(rel, "permission denied"))
        return
    if st.st_size == 0:
        out.problems.append(Problem(rel, "empty file"))
        return
    if kind is None:  # named on the command line: sniff it like analyze does
        from traceread.errors import TraceReadError
        from traceread.loaders import sniff

        try:
            kind = sniff(path)
        except TraceReadError as exc:
            out.problems.append(Problem(rel, exc.problem, "not-trace"))
            return
    if kind in ("sqlite", "nsys"):
        ok, why = is_nsys_export(path)
        other = detect.detect_sqlite(path).format if not ok and why != "empty file" else ""
        if other in SQLITE_TRACES:  # read (or refused naming the format) like any trace
            ok, kind = True, other
        if not ok:
            # an SQLite file that SQLite cannot read is damaged (truncated, corrupt): a failure
            kind_of = "failed" if why.startswith(("cannot read", "not a readable SQLite")) else "not-trace"
            out.problems.append(Problem(rel, why, kind_of))
            return
        kind = kind if kind in SQLITE_TRACES else "nsys"
    out.candidates.append(Candidate(path=os.path.abspath(path), rel=rel, root=root, kind=kind, size=st.st_size,
                                    mtime_ns=st.st_mtime_ns, inode=st.st_ino))


def _one_run_once(out: Discovery) -> None:
    """A trace-viewer JSON beside the ``.xplane.pb`` it was derived from (same folder, its processes
    among the xplane's planes, the same host prefix when several xplanes are there) is the same run:
    the xplane is read, the JSON is counted as skipped."""
    xplanes: dict[str, list[str]] = {}
    for c in out.candidates:
        if c.kind == detect.XPLANE:
            xplanes.setdefault(os.path.dirname(c.path), []).append(c.path)
    if not xplanes:
        return
    keep = []
    planes: dict[str, set[str]] = {}
    for c in out.candidates:
        beside = xplanes.get(os.path.dirname(c.path), []) if c.kind == detect.XPLANE_JSON else []
        if beside and detect.derived_from_xplane(c.path, beside, planes):
            out.skip("trace-viewer JSONs beside the .xplane.pb of the same run (the .xplane.pb is read)")
            continue
        keep.append(c)
    out.candidates[:] = keep
