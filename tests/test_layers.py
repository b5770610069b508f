"""Imports go one way: every module of ``traceread/`` sits in one layer and imports only its own layer
or lower ones, no import cycle crosses a package boundary, and no module reaches into another package's
private names. ``scripts/`` use the public names of traceread only.

Imports are read with ``ast`` from the source, every ``import`` statement counts wherever it sits
(module level, inside a function, under ``if TYPE_CHECKING``): a function-level import is still a
dependency, only a later one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from conftest import REPO

PACKAGE = "traceread"

# The layer order, lowest first: a module may import its own layer and the layers above it in this
# list, never one below. Entries are module prefixes: an entry names a module and everything under it
# (``traceread.loaders`` covers ``traceread.loaders.kineto.split``); the longest matching entry wins.
# A module no entry covers fails the test: put a new module where its job belongs.
LAYERS: list[tuple[str, list[str]]] = [
    # Definitions every layer shares: errors, thresholds, the frame's schema and the Trace container,
    # the cause records (traceread.causes: a record names its rule and fix by module path, each resolved by
    # its own layer, so the record sits here and nothing imports up), notes as data (traceread.note), names
    # and patterns (kernel classes, gap classes, host calls), input limits, output primitives, pure interval
    # arithmetic. Knows nothing of how a trace is read or analysed.
    ("base", [
        "traceread.config", "traceread.errors", "traceread.schema", "traceread.trace", "traceread.printable",
        "traceread.atomic", "traceread.limits", "traceread.extensions", "traceread.vocabulary",
        "traceread.causes", "traceread.note",
        "traceread.host_calls", "traceread.kernel_classes", "traceread.intervals", "traceread.grouped",
        "traceread.bounds",
    ]),
    # Readers of the input formats (Kineto, Nsight Systems, rocprof, Perfetto, XPlane); each produces a Trace.
    # They start no thread or process: the caller passes what runs beside them (loaders.parallel).
    ("loaders", ["traceread.loaders"]),
    # Facts about one loaded frame before any analysis: the ``info`` summary, sanity notes.
    ("frame", ["traceread.frame"]),
    # The engine: row selections, steps, gaps, collective identity.
    ("engine", ["traceread.engine"]),
    # Rules classify the engine's gaps.
    ("rules", ["traceread.rules"]),
    # Where the time went (attribution, verdict) and the tables read from kernels (MFU, roofline).
    ("attribution/metrics", ["traceread.attribution", "traceread.metrics"]),
    # Several ranks: grouping into jobs, alignment, stragglers. Take frames or plain data.
    ("ranks", ["traceread.ranks"]),
    # The what-if: a dependency replay of each rank, once per fix.
    ("whatif", ["traceread.whatif"]),
    # The analysis: its stages in order (traceread.analysis.stages.STAGES) over the pieces above, returning an
    # Analysis with its findings (what the reports show beyond the tables: largest gaps with their evidence,
    # per-unit verdicts).
    ("analysis", ["traceread.analysis"]),
    # The runner walks the analysis' stages and owns their threads, heap and caches (``runner.analyze``), and the
    # loads' threads and forked decoders (``runner.load``: the loaders take its ``Parallel``).
    ("runner", ["traceread.runner"]),
    # Renderers read an Analysis (Markdown, JSON, pictures, Perfetto) and only format it: no rule or
    # attribution module (test_renderers_only_format); serialization lives here.
    ("render", ["traceread.render"]),
    # Many analyses: scanning a tree of traces, comparing two runs.
    ("scan/diff", ["traceread.scan", "traceread.diff"]),
    # The command line only wires the layers below.
    ("cli", ["traceread.cli"]),
    # ``import traceread``: the package's public face (``load``, ``analyze``), exact match only.
    ("facade", ["traceread", "traceread.api"]),
]

LAYER_INDEX = {prefix: i for i, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes}


@dataclass(frozen=True)
class Import:
    importer: str  # the importing module, or a script's file name
    target: str  # the traceread module imported
    name: str | None  # the attribute imported from it (``from target import name``), if not a module
    line: int

    def where(self) -> str:
        what = f"{self.target}.{self.name}" if self.name else self.target
        return f"{self.importer}:{self.line} imports {what}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((REPO / PACKAGE).rglob("*.py"))}


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _package_of(module: str) -> str:
    """The package a module belongs to: itself for a package's ``__init__``, else its parent."""
    return module if _is_package(module) else module.rpartition(".")[0]


def _layer(module: str) -> int:
    if module == PACKAGE:
        return LAYER_INDEX[PACKAGE]
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYER_INDEX:
            return LAYER_INDEX[prefix]
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/test_layers.py, in the layer "
                         "its job belongs to")


def _resolve(dotted: str) -> tuple[str, str | None]:
    """``a.b.c`` -> (the longest prefix that is a module of the package, the next name or None): a
    name imported from a module, or a compiled extension module, counts as its package's name."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        module = ".".join(parts[:n])
        if module in MODULES:
            return module, parts[n] if n < len(parts) else None
    return dotted, None


def _imports(path: Path, importer: str, package: str) -> Iterator[Import]:
    """Every import of a traceread module in one file; ``package`` resolves relative imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    yield Import(importer, *_resolve(alias.name), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            if not (base == PACKAGE or base.startswith(PACKAGE + ".")):
                continue
            for alias in node.names:
                yield Import(importer, *_resolve(f"{base}.{alias.name}"), node.lineno)


def _all_imports() -> list[Import]:
    return [imp for module, path in MODULES.items() for imp in _imports(path, module, _package_of(module))]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_owner(imp: Import) -> str | None:
    """The package whose private name ``imp`` uses, or None when it uses public names only.

    A private module ``P._m`` belongs to package ``P``; a private attribute belongs to the package of
    the module that defines it.
    """
    parts = imp.target.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            return ".".join(parts[:i])
    if imp.name is not None and _private(imp.name):
        return _package_of(imp.target) if imp.target in MODULES else imp.target.rpartition(".")[0]
    return None


def test_every_module_has_a_layer() -> None:
    missing = []
    for module in MODULES:
        try:
            _layer(module)
        except AssertionError as err:
            missing.append(str(err))
    assert not missing, "\n".join(missing)


def _target_layer(imp: Import) -> int:
    """The layer ``imp`` reaches. The root package's metadata (``from traceread import __version__``)
    is base: every module's import runs the root package first anyway; its other names are the facade."""
    if imp.target == PACKAGE and imp.name is not None and imp.name.startswith("__"):
        return 0
    return _layer(imp.target)


def test_imports_only_go_down() -> None:
    bad = []
    for imp in _all_imports():
        assert imp.target in MODULES, f"{imp.where()}, which does not exist"
        low, high = _target_layer(imp), _layer(imp.importer)
        if low > high:
            bad.append(f"{imp.where()}: layer {LAYERS[high][0]} imports layer {LAYERS[low][0]}")
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(bad)


def test_no_private_names_across_packages() -> None:
    """A package's private names are its own and its subpackages'; the root package's are its own only
    (its subpackages are separate layers)."""
    bad = []
    for imp in _all_imports():
        owner = _private_owner(imp)
        if owner is None:
            continue
        mine = _package_of(imp.importer)
        if mine == owner or (owner != PACKAGE and mine.startswith(owner + ".")):
            continue
        bad.append(f"{imp.where()}: a private name of {owner}")
    assert not bad, "private names imported from another package:\n" + "\n".join(bad)


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; returns the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_cycles_across_packages() -> None:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for imp in _all_imports():
        if imp.target != imp.importer:
            graph[imp.importer].add(imp.target)
    bad = []
    for component in _strongly_connected(graph):
        packages = sorted({_package_of(m) for m in component})
        if len(packages) > 1:
            members = set(component)
            edges = [f"  {a} -> {b}" for a in component for b in sorted(graph[a] & members)]
            bad.append(f"cycle through {', '.join(packages)}:\n" + "\n".join(edges))
    assert not bad, "import cycles between packages:\n" + "\n".join(bad)


# What a renderer may not import: the analysis' findings (``Analysis.findings``) carry what it shows.
NOT_FOR_RENDERERS = ("traceread.rules", "traceread.attribution")


def test_renderers_only_format() -> None:
    """No module under ``traceread.render`` imports a rule or attribution module (wherever the import
    sits): evidence sentences and per-unit verdicts come from the analysis' findings."""
    bad = [imp.where() for imp in _all_imports()
           if imp.importer.startswith("traceread.render")
           and any(imp.target == m or imp.target.startswith(m + ".") for m in NOT_FOR_RENDERERS)]
    assert not bad, "renderers importing rules or attribution:\n" + "\n".join(bad)
    renderers = {imp.importer for imp in _all_imports() if imp.importer.startswith("traceread.render")}
    assert "traceread.render.markdown" in renderers  # the check reads the renderers' imports


def test_scripts_use_public_names() -> None:
    """Scripts and the test-side trace generator (``tests/tracesynth``, out of the package) use traceread's
    public names only."""
    bad = []
    outside = sorted((REPO / "scripts").glob("*.py")) + sorted((REPO / "tests" / "tracesynth").glob("*.py"))
    assert len(outside) > 10
    for path in outside:
        where = path.relative_to(REPO).as_posix()
        for imp in _imports(path, where, where.split("/")[0]):
            if imp.target not in MODULES:
                bad.append(f"{imp.where()}, which does not exist")
            elif _private_owner(imp) is not None:
                bad.append(f"{imp.where()}: a private name")
    assert not bad, "scripts import private names of traceread:\n" + "\n".join(bad)


def test_the_checker_sees_what_it_checks() -> None:
    """The layer table and the import reader agree with the tree: a guard against a test that passes
    because it reads nothing."""
    assert "traceread.analysis" in MODULES and "traceread.loaders" in MODULES
    edges = {(imp.importer, imp.target) for imp in _all_imports()}
    assert ("traceread.cli", "traceread.errors") in edges or any(a.startswith("traceread.cli") for a, _ in edges)
    assert _layer("traceread.loaders.kineto.split") == LAYER_INDEX["traceread.loaders"]
    assert _layer("traceread.render.jsonout") > _layer("traceread.analysis") > _layer("traceread.rules")
    assert _strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _resolve("traceread.loaders._no_such_extension") == ("traceread.loaders", "_no_such_extension")


# --- The runner owns threads, the heap and caches ------------------------------------------------------------

CONCURRENCY = ("threading", "concurrent", "multiprocessing", "_thread")
HEAP = "traceread.runner.heap"
# Modules outside the runner that may still use these, each with its reason. An entry names a module and
# everything under it. Shrink this list; never grow it without a reason a reviewer accepts.
CONCURRENCY_ALLOWED = {
    "traceread.runner": "the runner: the what-if replay's thread, the loaders' threads and forked decoders "
                        "(runner.workers), pandas imported beside the decode, the output writer's thread",
    "traceread.scan": "scan's worker orchestration (its worker processes and their pipes)",
}
HEAP_ALLOWED = {  # exact module names (a new module of the package is not let in by its parent)
    "traceread.runner": "its own",
    "traceread.scan.pool": "scan's worker orchestration: a worker gives its pages back between traces",
}
# Module-level containers that are mutated, or names ending in _CACHE, outside the runner: each is a cache
# keyed by data (an object's id or a weak reference) unless listed here with why it is not, or why it stays.
MUTABLE_ALLOWED = {
    "traceread.cli._debug": "the command's --debug switch (one flag), not a cache",
    "traceread.kernel_classes._USER_PATTERNS": "the user's --kernel-pattern registry (configuration), not a cache",
    "traceread.loaders.kineto.decode._ARG_TYPES": "a constant table filled once at import",
    "traceread.scan.dask_run._ANALYSING": "scan's worker orchestration: when each task's analysis began",
    "traceread.atomic._pruned": "the folders this command has pruned of stale temporaries (reset per command)",
}
_MUTATORS = {"append", "extend", "insert", "pop", "popitem", "clear", "update", "setdefault", "add", "discard",
             "remove"}
_CONTAINER_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter", "WeakKeyDictionary",
                    "WeakValueDictionary", "WeakSet"}


def _allowed(module: str, table: dict[str, str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in table)


def test_only_the_runner_starts_threads_and_trims_the_heap() -> None:
    bad = []
    for imp in _all_imports():
        if not imp.importer.startswith(PACKAGE):
            continue
        if imp.target == HEAP or (imp.target == "traceread.runner" and imp.name == "heap"):
            if not (imp.importer in HEAP_ALLOWED or _allowed(imp.importer, {"traceread.runner": ""})):
                bad.append(f"{imp.where()}: the heap is the runner's (take a ``between`` hook instead)")
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                if name.split(".")[0] in CONCURRENCY and not _allowed(module, CONCURRENCY_ALLOWED):
                    bad.append(f"{module}:{node.lineno} imports {name}: threads and processes are the runner's")
    assert not bad, "\n".join(bad)


def _module_containers(tree: ast.Module) -> dict[str, int]:
    """Module-level names bound to a mutable container (a display or a container's constructor): name -> line."""
    out = {}
    for node in tree.body:
        targets, value = ((node.targets, node.value) if isinstance(node, ast.Assign) else
                          ([node.target], node.value) if isinstance(node, ast.AnnAssign) else ([], None))
        for t in targets:
            if not isinstance(t, ast.Name) or value is None:
                continue
            call = value.func if isinstance(value, ast.Call) else None
            called = getattr(call, "id", getattr(call, "attr", None))
            if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)) or \
                    called in _CONTAINER_CALLS or t.id.upper().endswith("_CACHE"):
                out[t.id] = node.lineno
    return out


def _mutated(tree: ast.Module, names: set[str]) -> set[str]:
    """Which of ``names`` the module mutates: a mutating method, an item or slice assigned or deleted, or a
    ``global`` rebinding."""
    hit = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and node.func.attr in _MUTATORS:
            hit.add(node.func.value.id)
        targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        hit.update(t.value.id for t in targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name))
        if isinstance(node, ast.Global):
            hit.update(node.names)
    return hit & names


def _module_caches() -> dict[str, str]:
    found = {}
    for module, path in MODULES.items():
        if _allowed(module, {"traceread.runner": ""}):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        containers = _module_containers(tree)
        for name in _mutated(tree, set(containers)) | {n for n in containers if n.upper().endswith("_CACHE")}:
            found[f"{module}.{name}"] = f"{path.relative_to(REPO)}:{containers[name]}"
    return found


def test_no_module_level_mutable_cache_outside_the_runner() -> None:
    found = _module_caches()
    bad = [f"{where}: {name} is a module-level mutable container (a cache belongs to the runner's cache object)"
           for name, where in sorted(found.items()) if name not in MUTABLE_ALLOWED]
    stale = [f"{name}: allowed but no longer there: remove it from MUTABLE_ALLOWED" for name in MUTABLE_ALLOWED
             if name not in found]
    assert not bad + stale, "\n".join(bad + stale)


def test_the_cache_and_concurrency_checks_see_what_they_check() -> None:
    tree = ast.parse("A = {}\nB: list = []\nC = 1\nD = set()\nX_CACHE = None\ndef f():\n    A[1] = 2\n"
                     "    D.add(3)\n    global C\n")
    containers = _module_containers(tree)
    assert set(containers) == {"A", "B", "D", "X_CACHE"}
    assert _mutated(tree, set(containers)) == {"A", "D"}
    assert "traceread.runner.replay" in MODULES and "traceread.runner.heap" in MODULES
    assert not _allowed("traceread.rules", CONCURRENCY_ALLOWED) and _allowed("traceread.scan.pool", CONCURRENCY_ALLOWED)
    assert not _allowed("traceread.loaders.kineto.split", CONCURRENCY_ALLOWED)
    # the check reads real imports: the runner's workers import threading (the loaders' threads are theirs)
    workers = ast.parse(MODULES["traceread.runner.workers"].read_text(encoding="utf-8"))
    assert any(isinstance(n, ast.Import) and any(a.name == "threading" for a in n.names) for n in ast.walk(workers))
