"""Names in reports: shortened readably, escaped for Markdown, private paths scrubbed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from traceread.render.names import (
    DEFAULT_MAX_LEN,
    ShortNames,
    md_code,
    md_name,
    md_text,
    scrub_paths,
    shorten,
)

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


# --- distinct kernels stay distinct (issue 12) ------------------------------------------------------

# PyTorch CUDA kernels as Kineto writes them (gcc demangling), from hta_sampled_rank0of128.json.gz.
_SIGMOID_BWD = ("void at::native::vectorized_elementwise_kernel<4, at::native::sigmoid_backward_kernel_cuda("
                "at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::"
                "{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, at::native::sigmoid_backward_kernel_cuda("
                "at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::"
                "{lambda(float, float)#1}, at::detail::Array<char*, 3>)")
_MSE = ("void at::native::vectorized_elementwise_kernel<4, at::native::mse_kernel_cuda(at::TensorIteratorBase&)::"
        "{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::{lambda(float, float)#1}, "
        "at::detail::Array<char*, 3> >(int, at::native::mse_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}::"
        "operator()() const::{lambda()#2}::operator()() const::{lambda(float, float)#1}, at::detail::Array<char*, 3>)")
_ADD_FLOAT = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
              "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
_ADD_INT = _ADD_FLOAT.replace("<float>", "<int>")
# The same family as Nsight Systems spells it (its own demangler), from nsysai_h100_2gpu_window_2026.sqlite.
_NSYS_POW = ("void at::native::vectorized_elementwise_kernel<(int)4, void at::native::<unnamed>::"
             "pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase &, T2)::[lambda(float) "
             "(instance {})], std::array<char *, (unsigned long)2>>(int, T2, T3)")
_NSYS_MUL = ("void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<"
             "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>>("
             "at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)")
_NSYS_COPY = ("void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<"
              "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() "
              "const::[lambda() (instance 7)]::operator ()() const::[lambda(float) (instance 1)]>("
              "at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)")
# ROCm Tensile GEMMs differing deep inside one long identifier (tracelens_sglang_decode_mi300x.json.gz).
_TENSILE = ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT32x32x256_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_"
            "CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMB_GLS0_ISA942_IU1_K1_LBSPPA512_LBSPPB512_"
            "LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT1_1_MO40_NTn1_NTA{}_NTB0_NTC0_NTD4_NTM0_NEPBS{}_NLCA1_"
            "NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW1_SK0_SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_"
            "USFGROn1_VSn1_VWA8_VWB2_WSGRA0_WSGRB0_WS64_WG32_8_1")
# CUTLASS 3 FP8 GEMMs as vLLM instantiates them: only the tile and cluster shapes tell them apart.
_FP8 = ("void cutlass::device_kernel<vllm::cutlass_3x_gemm<cutlass::float_e4m3_t, cutlass::bfloat16_t, "
        "vllm::c3x::ScaledEpilogue, cute::tuple<cute::C<{m}>, cute::C<{n}>, cute::C<128> >, cute::tuple<cute::C<{c}>, "
        "cute::C<1>, cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum, "
        "cutlass::epilogue::TmaWarpSpecialized>::GemmKernel>(vllm::cutlass_3x_gemm<cutlass::float_e4m3_t, "
        "cutlass::bfloat16_t, vllm::c3x::ScaledEpilogue, cute::tuple<cute::C<{m}>, cute::C<{n}>, cute::C<128> >, "
        "cute::tuple<cute::C<{c}>, cute::C<1>, cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum, "
        "cutlass::epilogue::TmaWarpSpecialized>::GemmKernel::Params)")
# CloverLeaf's kernels: one template launched with nvcc extended lambdas (__nv_dl_wrapper_t spelling).
_CLOVER = ("void clover::par_ranged2d_kernel<__nv_dl_wrapper_t<__nv_dl_tag<void (*)(bool, int, int, int, int, "
           "clover::Buffer2D<double>&, clover::Buffer2D<double>&, clover::Buffer2D<double>&, double), &{k}, 1u>, "
           "clover::Buffer2D<double>, clover::Buffer2D<double>, clover::Buffer2D<double>, double> >(clover::Range2d, "
           "__nv_dl_wrapper_t<__nv_dl_tag<void (*)(bool, int, int, int, int, clover::Buffer2D<double>&, "
           "clover::Buffer2D<double>&, clover::Buffer2D<double>&, double), &{k}, 1u>, clover::Buffer2D<double>, "
           "clover::Buffer2D<double>, clover::Buffer2D<double>, double>)")


def _shown(names: list[str]) -> list[str]:
    short = ShortNames(names)
    return [short(n) for n in names]


def _assert_distinct_and_short(names: list[str], max_len: int = DEFAULT_MAX_LEN) -> list[str]:
    shown = _shown(names)
    assert len(set(shown)) == len(set(names)), shown
    assert all(len(s) <= max_len for s in shown), shown
    return shown


def test_plain_shortening_folds_these_together() -> None:
    """The premise: one name at a time, these families read alike."""
    assert len({shorten(_FP8.format(m=m, n=n, c=c)) for m, n, c in ((64, 128, 2), (128, 128, 1), (128, 256, 1))}) == 1
    assert len({shorten(_CLOVER.format(k=k)) for k in ("PdV_kernel", "accelerate_kernel", "viscosity_kernel")}) == 1


def test_kineto_wrapper_kernels_show_the_op_inside() -> None:
    shown = _assert_distinct_and_short([_SIGMOID_BWD, _MSE, _ADD_FLOAT, _ADD_INT])
    assert "sigmoid_backward_kernel_cuda" in shown[0] and "mse_kernel_cuda" in shown[1]
    assert "CUDAFunctor_add<float>" in shown[2] and "CUDAFunctor_add<int>" in shown[3]
    assert all("vectorized_elementwise_kernel<" in s for s in shown), shown


def test_nsys_spellings_show_the_op_inside() -> None:
    names = [_NSYS_POW.format(1), _NSYS_POW.format(2), _NSYS_MUL, _NSYS_COPY]
    shown = _assert_distinct_and_short(names)
    assert "pow_tensor_scalar" in shown[0] and shown[0].count("#1") == 1 and "#2" in shown[1]
    assert "MulFunctor" in shown[2] and "direct_copy_kernel_cuda" in shown[3]
    assert not any("(int)" in s or "<unnamed>" in s for s in shown)


def test_fp8_gemms_keep_their_tile_shapes() -> None:
    shapes = ((64, 128, 2), (128, 128, 1), (128, 256, 1))
    shown = _assert_distinct_and_short([_FP8.format(m=m, n=n, c=c) for m, n, c in shapes])
    assert all(s.startswith("cutlass::device_kernel<") for s in shown)
    assert "256" in shown[2] and "64" in shown[0]


def test_clover_kernels_keep_their_own_names() -> None:
    kernels = ("PdV_kernel", "accelerate_kernel", "viscosity_kernel", "advec_cell_kernel", "advec_mom_kernel")
    shown = _assert_distinct_and_short([_CLOVER.format(k=k) for k in kernels])
    for k, s in zip(kernels, shown, strict=True):
        assert k in s and s.startswith("clover::par_ranged2d_kernel<")


def test_long_identifiers_show_where_they_differ() -> None:
    shown = _assert_distinct_and_short([_TENSILE.format(0, 8), _TENSILE.format(4, 16)])
    assert "NTA0" in shown[0] and "NTA4" in shown[1]
    assert all(s.startswith("Cijk_Alik_Bljk") for s in shown)


def test_short_names_are_unchanged_and_outsiders_get_plain_shortening() -> None:
    short = ShortNames(["ampere_sgemm_128x64_nn", _ADD_FLOAT, _ADD_INT])
    assert short("ampere_sgemm_128x64_nn") == "ampere_sgemm_128x64_nn"
    assert short(MUL) == shorten(MUL)
    assert md_name(_ADD_INT, short=short).startswith("`") and "int" in md_name(_ADD_INT, short=short)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["float", "int", "Half", "long", "4", "8", "Mul", "Add"]), min_size=2, max_size=6),
       st.integers(1, 12))
def test_generated_template_families_stay_distinct(args: list[str], n: int) -> None:
    """Names that differ in any one argument of a long template stay apart (and short)."""
    base = "void ns::some_long_kernel_name<" + ", ".join(f"ns::Wrapper<{a}, ns::Inner<{a}>>" for a in args) + ">"
    names = sorted({base.replace(args[i % len(args)], f"X{k}", 1) for k in range(n) for i in range(len(args))})
    _assert_distinct_and_short(names)
