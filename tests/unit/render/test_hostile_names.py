"""Hostile names (issue 48): the name shortener's work is linear in the name's length, and bidi
controls never reach a terminal or Markdown raw."""

from __future__ import annotations

import difflib

import pytest

from traceread.render import names


def _huge(n: int, k: int = 0, vary: bool = False) -> str:
    args = ", ".join(f"Foo{(i * (k + 1)) % 97 if vary else i}<float, {i}>" for i in range(n))
    return f"void kern<{args}, {k}>(int)"


def test_a_name_of_thousands_of_template_groups_collapses_in_a_few_rounds(monkeypatch) -> None:
    # one group per round made a 34 KB name quadratic (analyze: 141 s)
    rounds = {"n": 0}
    real = names._candidates

    def counted(s):
        rounds["n"] += 1
        return real(s)

    monkeypatch.setattr(names, "_candidates", counted)
    name = _huge(1600)
    assert len(name) > 30_000
    short = names.shorten(name)
    assert short == "kern<…>" and rounds["n"] <= 10, rounds
    rounds["n"] = 0
    deep = "void kern<" + "A<" * 5000 + "int" + ">" * 5000 + ">(int)"
    assert len(names.shorten(deep)) <= names.DEFAULT_MAX_LEN and rounds["n"] <= 10, rounds


def test_ordinary_names_shorten_as_before() -> None:
    # below HUGE_NAME one group at a time, longest first (what every golden report shows)
    name = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
            "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, "
            "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
            "at::detail::Array<char*, 3>)")
    assert names.shorten(name) == "at::native::vectorized_elementwise_kernel<4, BinaryFunctor<…>, Array<…>>"


@pytest.mark.parametrize("vary", [False, True])
def test_huge_names_told_apart_without_a_quadratic_alignment(monkeypatch, vary) -> None:
    seen: list[int] = []
    real = difflib.SequenceMatcher

    def matcher(junk, a, b, autojunk=True):
        seen.append(len(a) + len(b))
        return real(junk, a, b, autojunk=autojunk)

    monkeypatch.setattr(names.difflib, "SequenceMatcher", matcher)
    group = [_huge(1600, k, vary) for k in range(7)]
    short = names.ShortNames(group)
    shown = [short(n) for n in group]
    assert len(set(shown)) == len(group), shown  # still told apart
    assert all(len(s) <= names.DEFAULT_MAX_LEN + 4 for s in shown)
    assert max(seen, default=0) <= names._DIFF_TOKENS, max(seen)
