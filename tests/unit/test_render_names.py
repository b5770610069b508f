"""Names in reports: shortened readably, escaped for Markdown, private paths scrubbed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from traceread.render.names import md_code, md_text, scrub_paths, shorten

MUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
       "at::native::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<float, "
       "float, float, at::native::MulFunctor<float> >, at::detail::Array<char*, 3>)")


def test_short_names_unchanged() -> None:
    assert shorten("ampere_sgemm_128x64_nn") == "ampere_sgemm_128x64_nn"
    assert shorten("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)") == \
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def test_templated_name_keeps_its_identity() -> None:
    assert shorten(MUL) == "at::native::vectorized_elementwise_kernel<4, BinaryFunctor<…>, Array<…>>"


def test_shorten_bounds_length() -> None:
    assert len(shorten("x" * 500, 40)) == 40
    assert shorten("a" * 30 + "MIDDLE" + "b" * 30, 40).count("…") == 1


def test_scrub_paths() -> None:
    assert scrub_paths("/home/alice/proj/train.py(42): forward") == "train.py(42): forward"
    assert scrub_paths(r"C:\Users\bob\x\t.py(3): f") == "t.py(3): f"
    assert scrub_paths("nn.Module: Linear_0") == "nn.Module: Linear_0"
    assert scrub_paths("aten::add / aten::mul") == "aten::add / aten::mul"


def test_md_code_fences_backticks_and_pipes() -> None:
    assert md_code("a`b") == "``a`b``"
    assert md_code("`x`") == "`` `x` ``"
    assert md_code("a|b") == "`a\\|b`"


def test_md_text_escapes_html_and_markup() -> None:
    assert md_text("<b>x|y</b> _z_") == "&lt;b&gt;x\\|y&lt;/b&gt; \\_z\\_"


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=300))
def test_escaped_text_never_breaks_a_table_cell(s: str) -> None:
    import re

    for cell in (md_text(s), md_code(shorten(s))):
        assert "\n" not in cell
        assert not re.search(r"(?<!\\)\|", cell)
        assert "<" not in cell or cell.startswith("`")
