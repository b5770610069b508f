"""The cause records (traceread.causes): each names code that exists, the rules' facts are declared and
joined, the shipped schema lists the records, and a cause defined outside the package reaches every output."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO

from traceread import causes, schema
from traceread.render import jsonout, plotbits
from traceread.rules import FACTS, RESIDUAL, RULES, RuleContext
from traceread.vocabulary import BUSY_PARTS, GAP_CLASSES, IDLE_CAUSES, VERDICTS
from traceread.whatif import fixes

RULES_DIR = REPO / "traceread" / "rules"


def test_every_gap_class_has_a_rule_a_colour_and_a_reason():
    assert [c.name for c in causes.gap_classes()] == list(GAP_CLASSES)
    assert [r.name for r in RULES] == [c.name for c in causes.rules_in_order()]
    assert RESIDUAL.name == causes.residual().name == GAP_CLASSES[-1]
    for c in causes.gap_classes():
        assert c.colour is not None and c.colour.startswith("#") and c.job_reason
        assert c.part_label == f"idle: {c.name}"
    assert len({c.colour for c in causes.gap_classes()}) == len(GAP_CLASSES)  # told apart in a picture
    assert set(IDLE_CAUSES) <= set(VERDICTS) and not set(BUSY_PARTS) & set(GAP_CLASSES)


def test_every_fix_names_a_planner_of_the_whatif():
    assert fixes.FIX_CAUSES == tuple(c.name for c in causes.CAUSES if c.fix)
    for c in causes.fixes():
        assert callable(fixes.planner(c)) and c.assumption, c.name
    assert set(fixes.GAP_CLASSES_READ) <= set(GAP_CLASSES)


def test_evidence_lanes_are_lanes_of_the_frame():
    lanes = {v for k, v in vars(schema).items() if k.startswith("LANE_")}
    for c in causes.CAUSES:
        assert set(c.evidence_lanes) <= lanes, c.name


def test_the_shipped_schema_lists_the_records():
    """The report schema's enums are read off the records; the file users read lists the same names."""
    shipped = json.loads((REPO / "traceread" / "data" / "report.schema.json").read_text())
    assert jsonout.schema() == shipped


def test_records_are_frozen_and_hashable():
    c = causes.get("data-starved")
    assert len(set(causes.CAUSES)) == len(causes.CAUSES) and hash(c) == hash(causes.get("data-starved"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.title = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        c.by_evidence["x"] = ("y", ())  # type: ignore[index]


def test_a_record_is_checked_when_made():
    with pytest.raises(ValueError, match="kind"):
        causes.Cause("x", "sideways", "X", "m", "r", ())
    with pytest.raises(ValueError, match="rule module"):
        causes.Cause("x", causes.STEADY, "X", "m", "r", ())  # a gap class without a rule
    with pytest.raises(ValueError, match="precedence"):
        causes.Cause("x", causes.STEADY, "X", "m", "r", (), colour="#000000", job_reason="j", rule="m")


# --- the facts each rule reads ------------------------------------------------------------------------------

def _functions(path: Path) -> dict[str, ast.AST]:
    tree = ast.parse(path.read_text())
    out: dict[str, ast.AST] = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    out["<module>"] = ast.Module(body=[n for n in tree.body if not isinstance(n, ast.FunctionDef)], type_ignores=[])
    return out


def _ctx_reads(module: str, name: str, seen: set[tuple[str, str]]) -> set[str]:
    """The ``ctx.<field>`` a function of a rule module reads, with the functions of this and other rule modules
    it calls (by name, or as ``module.function``)."""
    if (module, name) in seen or not (RULES_DIR / f"{module}.py").exists():
        return set()
    seen.add((module, name))
    fns = _functions(RULES_DIR / f"{module}.py")
    node = fns.get(name)
    if node is None:
        return set()
    out = {n.attr for n in ast.walk(node)
           if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "ctx"}
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        f = call.func
        if isinstance(f, ast.Name) and f.id in fns:
            out |= _ctx_reads(module, f.id, seen)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            out |= _ctx_reads(f.value.id, f.attr, seen)
    return out


@pytest.mark.parametrize("rule", RULES + (RESIDUAL,), ids=lambda r: r.name)
def test_each_rule_reads_only_the_facts_it_declares(rule):
    module = causes.get(rule.name).rule.rpartition(".")[2]
    seen: set[tuple[str, str]] = set()
    read = set().union(*(_ctx_reads(module, f, seen) for f in _functions(RULES_DIR / f"{module}.py")))
    fields = {f.name for f in dataclasses.fields(RuleContext)}
    assert set(rule.facts) <= fields, f"{rule.name} declares facts the context does not have"
    assert set(rule.reads) <= set(rule.facts), f"{rule.name}'s evidence reads undeclared facts"
    assert read <= set(rule.facts), f"{rule.name} reads undeclared facts {sorted(read - set(rule.facts))}"
    assert read, "the reader found no fact read: it reads nothing"


def test_the_context_is_the_join_of_the_declared_facts():
    """Every fact the context carries is one some rule declares (``notes`` are the rules' sentences;
    ``recurring_n`` and ``recurring_ranks`` are set after the rules by ``rules.recurring`` and ``rules.across``,
    for the evidence of every class)."""
    fields = [f.name for f in dataclasses.fields(RuleContext)
              if f.name not in ("notes", "recurring_n", "recurring_ranks")]
    assert list(FACTS) == fields


# --- a cause defined outside the package reaches every output -----------------------------------------------

TOY_RECORD = '''
from traceread.causes import STEADY, Cause

CAUSE = Cause(
    "toy-bound", STEADY, title="Toy-bound", meaning="the GPUs wait for the toy",
    first_response="unplug the toy, then re-measure", levers=("Unplug the toy.", "Put the toy away."),
    colour="#123456", job_reason="the toy held it before the collective",
    rule="toyrule", precedence=0.5, fix="toyfix:plan_toy", fix_reads_gaps=True,
    assumption="the toy is unplugged",
)
'''

# The rule: imported by traceread.rules (which it imports), as the built-in rule modules are.
TOY_RULE = '''
from traceread.rules._base import Rule, cat, col, fmt_ns


def mask(gaps, ctx, cfg):
    return ctx.judged


def evidence(gaps, ctx, cfg):
    return cat("toy signature over the ", fmt_ns(col(gaps, "dur_ns")), " gap")


RULE = Rule("toy-bound", mask, evidence, facts=("judged",))
'''

# The fix: a planner of the what-if's (it changes nothing; it records how many toy gaps it was given).
TOY_FIX = '''
from traceread.whatif.fixes import Plan, gap_union

PLANNED = []


def plan_toy(m, fix, ctx):
    starts, _ = gap_union(ctx, m, "toy-bound")
    PLANNED.append(len(starts))
    return Plan()
'''

DRIVER = '''
import json, sys
from traceread.render import plotbits
from traceread.cli import main

legend = []
real = plotbits.legend_handles


def spy(seen, lanes):
    handles = real(seen, lanes)
    legend.extend((h.get_label(), h.get_facecolor()[:3]) for h in handles)
    return handles


plotbits.legend_handles = spy
trace, out = sys.argv[1], sys.argv[2]
rc = main(["analyze", trace, "-o", out + "/r.md", "--json", out + "/r.json", "--plot", out + "/r.png",
           "--perfetto", out + "/r.pftrace"])
rc2 = main(["whatif", trace, "-o", out + "/w.md"])
json.dump({"rc": [rc, rc2], "legend": legend, "planned": sys.modules["toyfix"].PLANNED}, open(out + "/spy.json", "w"))
'''


def test_a_cause_defined_outside_the_package_flows_into_every_output(tmp_path):
    """A toy cause (a record and a rule module with its fix, in a test folder, named by TRACEREAD_EXTRA_CAUSES)
    classifies gaps and shows in the Markdown report, the JSON (valid under the schema), the picture's
    legend, the Perfetto trace and the what-if tables, with its own words, colour and assumption."""
    (tmp_path / "toycause.py").write_text(textwrap.dedent(TOY_RECORD))
    (tmp_path / "toyrule.py").write_text(textwrap.dedent(TOY_RULE))
    (tmp_path / "toyfix.py").write_text(textwrap.dedent(TOY_FIX))
    (tmp_path / "driver.py").write_text(textwrap.dedent(DRIVER))
    trace = REPO / "fixtures" / "hta_alexnet_a100.json.gz"
    env = {**os.environ, causes.ENV: "toycause:CAUSE",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(trace), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    spy = json.loads((tmp_path / "spy.json").read_text())
    assert spy["rc"] == [0, 0]

    doc = json.loads((tmp_path / "r.json").read_text())
    toy_ns = sum(doc["steps"]["toy_bound_ns"])
    assert toy_ns > 0  # the toy rule claimed gaps
    assert all("toy-bound" in r["parts"] for r in doc["attribution"])
    assert doc["dominant_cause"] == "toy-bound"
    # the schema the report is checked against lists the toy (the running process' records)
    import jsonschema
    check = subprocess.run([sys.executable, "-c", "import json, sys; from traceread.render.jsonout import schema; "
                            "print(json.dumps(schema()))"], env=env, capture_output=True, text=True, timeout=120)
    jsonschema.validate(doc, json.loads(check.stdout))
    with pytest.raises(jsonschema.ValidationError):  # the shipped schema does not know it: the check can fail
        jsonschema.validate(doc, jsonout.schema())

    md = (tmp_path / "r.md").read_text()
    assert "idle: toy-bound" in md  # Where the step time goes
    assert "Toy-bound:" in md and "the GPUs wait for the toy" in md and "unplug the toy, then re-measure" in md
    assert "1. Unplug the toy." in md  # What to do next
    assert "toy signature over the" in md  # the largest gaps' evidence

    assert ["idle: toy-bound", [0x12 / 255, 0x34 / 255, 0x56 / 255]] in [[lab, pytest.approx(rgb)]
                                                                        for lab, rgb in spy["legend"]]
    assert (tmp_path / "r.png").stat().st_size > 0

    pf = (tmp_path / "r.pftrace").read_bytes()
    assert b"toy-bound" in pf and b"toy signature over the" in pf  # the diagnosis track's slices

    assert spy["planned"] and max(spy["planned"]) > 0  # the what-if planned the toy fix on the toy's gaps
    whatif = (tmp_path / "w.md").read_text()
    row = next(line for line in whatif.splitlines() if line.startswith("| toy-bound"))
    assert "the toy is unplugged" in row
    assert any(p["cause"] == "toy-bound" and p["assumption"] == "the toy is unplugged" for p in doc["whatif"]["fixes"])


def test_the_toy_is_not_a_cause_here():
    """The records of this process are the built-in ones (the toy lived in its own process only)."""
    assert causes.find("toy-bound") is None and "toy-bound" not in plotbits.CLASS_COLORS


def test_the_builder_computes_only_the_declared_facts(monkeypatch):
    """A fact no rule declares is not computed: the builder builds the join, not a fixed list."""
    import pandas as pd
    from test_rules import CFG, gap

    from traceread import rules

    def refuse(*args, **kwargs):
        raise AssertionError("computed a fact no rule declares")

    gaps = pd.DataFrame([gap()])
    monkeypatch.setattr(rules, "dispatch_cover", refuse)
    with pytest.raises(AssertionError, match="no rule declares"):
        rules.build_context(gaps, None, None, CFG)
    monkeypatch.setattr(rules, "FACTS_SET", rules.FACTS_SET - {"dispatch", "dispatch_op"})
    ctx = rules.build_context(gaps, None, None, CFG)
    assert not ctx.dispatch.any() and list(ctx.dispatch_op) == [""]
    assert ctx.judged.all()  # the declared facts are still there
