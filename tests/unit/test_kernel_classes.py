"""Kernel classes on the real top kernel names of every trace in ../shared/traces.

``REAL_TOP_KERNELS`` lists, per trace, its top kernels by GPU time (the first characters of each
name, enough to fix its class) and the class a performance engineer would give it. The core test
classifies these names; the shared test checks they are still the traces' top kernels and that
every full name with that prefix gets the class.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections import Counter

import pytest
from conftest import SHARED_TRACES, needs_shared

from traceread import kernel_classes as kc

REAL_TOP_KERNELS: dict[str, list[tuple[str, str]]] = {
    'hta_alexnet_a100.json.gz': [
        ('ampere_sgemm_32x32_sliced1x4_tn', 'gemm'),
        ('cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1', 'convolution'),
        ('sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_wa', 'convolution'),
        ('void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_sc', 'elementwise'),
        ('ampere_gcgemm_64x64_nt', 'gemm'),
    ],
    'hta_compare_base.json.gz': [
        ('void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<int>, at::detail::Arra', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Ar', 'elementwise'),
    ],
    'hta_compare_test.json.gz': [
        ('void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<int>, at::detail::Arra', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Ar', 'elementwise'),
    ],
    'hta_event_sync_a100.json.gz': [
        ('at::cuda::(anonymous namespace)::spin_kernel(long)', 'other'),
        ('void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::Half, at::native::func_wrapper_t<c1', 'reduction'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::Half>, at::detail::Ar', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::compare_scalar_kernel<c10::Half>(at::T', 'elementwise'),
    ],
    'hta_event_sync_multistream_a100.json.gz': [
        ('ampere_sgemm_128x64_nn', 'gemm'),
    ],
    'hta_gpu_user_annotation_gp100.json.gz': [
        ('void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Ar', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<', 'elementwise'),
        ('void gemmk1_kernel<int, float, 256, 5, false, false, false, false, cublasGemvTensorStridedBatched<fl', 'gemm'),
        ('void gemv2N_kernel<int, int, float, float, float, float, 128, 1, 4, 4, 1, false, cublasGemvParams<cu', 'gemm'),
        ('void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>', 'reduction'),
        ('void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false, cublasGemv', 'gemm'),
    ],
    'hta_legacy_categories_rank1.json.gz': [
        ('void cutlass::Kernel<cutlass_70_wmma_tensorop_f16_s161616gemm_f16_32x32_64x2_tn_align8>(cutlass_70_w', 'gemm'),
        ('void gemmk1_kernel<float, 256, 5, false, false, false, false, cublasGemvTensorStridedBatched<__half ', 'gemm'),
        ('void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::BinaryFunctor<c1', 'elementwise'),
        ('void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::(anonymous names', 'elementwise'),
    ],
    'hta_nccl_a100_rank0of2.json.gz': [
        ('ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)', 'communication'),
        ('void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(cudnn:', 'elementwise'),
        ('void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float, float, float, float, cu', 'normalization'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Ar', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at:', 'elementwise'),
        ('void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float, float, float, float, cud', 'normalization'),
    ],
    'hta_rocm_mi250_train.json.gz': [
        ('Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CAD', 'gemm'),
        ('void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float,', 'reduction'),
        ('Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CAD', 'gemm'),
        ('void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float,', 'reduction'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Ar', 'elementwise'),
        ('void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace):', 'elementwise'),
    ],
    'hta_sampled_rank0of128.json.gz': [
        ('ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)', 'communication'),
        ('void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<c10::Half, flo', 'elementwise'),
        ('void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, long, 2ul', 'elementwise'),
        ('void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_warp_per_row_1<c10::Half, fl', 'elementwise'),
        ('void split_embedding_backward_codegen_rowwise_adagrad_weighted_kernel_cta_per_row_1<c10::Half, float', 'elementwise'),
        ('void permute_pooled_embs_kernel<float>(float const*, long const*, long const*, long const*, float*, ', 'elementwise'),
    ],
    'hta_sampled_rank1of128.json.gz': [
        ('ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)', 'communication'),
        ('void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<c10::Half, flo', 'elementwise'),
        ('void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, long, 2ul', 'elementwise'),
        ('void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_warp_per_row_1<c10::Half, fl', 'elementwise'),
        ('void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false', 'reduction'),
        ('void permute_pooled_embs_kernel<float>(float const*, long const*, long const*, long const*, float*, ', 'elementwise'),
    ],
    'hta_simple_add_tiny_a100.json.gz': [
        ('void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, at::na', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Ar', 'elementwise'),
    ],
    'hta_triton_a100.json.gz': [
        ('triton_poi_fused_add_cos_sin_0', 'triton'),
    ],
    'hta_uint64_arg.pt.trace.json.gz': [
        ('ncclKernel_AllReduce', 'communication'),
    ],
    'kineto2021_compute_properties.json': [
        ('void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<c', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<', 'elementwise'),
        ('volta_sgemm_128x32_nt', 'gemm'),
        ('void gemmSN_TN_kernel_64addr<float, 128, 16, 2, 4, 8, 9, false, cublasGemvTensorStridedBatched<float', 'gemm'),
        ('void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float,', 'reduction'),
        ('void at::native::unrolled_elementwise_kernel<at::native::AddFunctor<float>, at::detail::Array<char*,', 'elementwise'),
    ],
    'kineto2021_resnet50_13streams.pt.trace.json.gz': [
        ('void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*, int,', 'convolution'),
        ('void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, float const', 'convolution'),
        ('void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float, float, float, cu', 'normalization'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel_impl<float>(at::Tenso', 'elementwise'),
        ('volta_cgemm_32x32_tn', 'gemm'),
        ('volta_gcgemm_32x32_nt', 'gemm'),
    ],
    'kineto2021_resnet50_bare_list.pt.trace.json.gz': [
        ('void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, float const', 'convolution'),
        ('void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*, int,', 'convolution'),
        ('void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float, float, float, cu', 'normalization'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel_impl<float>(at::Tenso', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<c', 'elementwise'),
        ('void implicit_convolve_sgemm<float, float, 128, 6, 7, 3, 3, 5, 1, false, true, true>(int, int, int, ', 'convolution'),
    ],
    'param_linear_rtx2080ti.json.gz': [
        ('volta_sgemm_64x64_tn', 'gemm'),
        ('volta_sgemm_128x64_nn', 'gemm'),
        ('volta_sgemm_128x128_nt', 'gemm'),
        ('void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace):', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Ar', 'elementwise'),
        ('void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float,', 'reduction'),
    ],
    'tracelens_bert_small_h100.json.gz': [
        ('void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(cutlass_', 'gemm'),
        ('void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>(cutlass_80_te', 'gemm'),
        ('void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, ', 'attention'),
        ('sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_k', 'gemm'),
        ('void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, floa', 'normalization'),
        ('void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(cutlass_80', 'gemm'),
    ],
    'tracelens_compile_triton_mi300x.json.gz': [
        ('Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_', 'gemm'),
        ('attn_fwd', 'attention'),
        ('Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_', 'gemm'),
        ('Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_', 'gemm'),
        ('triton_poi_fused__unsafe_view_mul_silu_2', 'triton'),
        ('triton_poi_fused__unsafe_view_add_3', 'triton'),
    ],
    'tracelens_gpu_only_mi210.json.gz': [
        ('void at::native::batch_norm_backward_kernel<c10::BFloat16, c10::BFloat16, float, int>(at::GenericPac', 'normalization'),
        ('void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::a', 'elementwise'),
        ('batched_transpose_16x64_pack_1x4_ediv_1x2_half', 'elementwise'),
        ('void at::native::batch_norm_collect_statistics_kernel<at::native::Var, c10::BFloat16, c10::BFloat16,', 'normalization'),
        ('SubTensorOpWithCastTensor1d', 'elementwise'),
        ('igemm_wrw_gtcx2_nhwc_bf16_bx0_ex1_bt256x128x16_wt32x32x8_ws2x1_wr2x2_ta1x4x1x4_1x4x1x64_tb1x4x1x2_1x', 'convolution'),
    ],
    'tracelens_qwen_0p5b_h100.json.gz': [
        ('sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off', 'gemm'),
        ('void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::BinaryFun', 'elementwise'),
        ('void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_co', 'elementwise'),
        ('void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, ', 'attention'),
        ('void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::Opaqu', 'memcpy'),
        ('void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunct', 'elementwise'),
    ],
    'tracelens_sglang_decode_mi300x.json.gz': [
        ('Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_C', 'gemm'),
        ('void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDat', 'attention'),
        ('Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT32x32x256_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_C', 'gemm'),
        ('Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x32x256_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_C', 'gemm'),
        ('Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT16x32x512_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_C', 'gemm'),
        ('Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x48x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_C', 'gemm'),
    ],
    'tracelens_vllm_graph_replay_rocm.json.gz': [
        ('_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1', 'gemm'),
        ('_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu', 'gemm'),
        ('kernel_unified_attention_3d', 'attention'),
        ('Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT32x32x256_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_C', 'gemm'),
        ('Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT32x32x256_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_C', 'gemm'),
        ('_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineP', 'normalization'),
    ],
    'nsysai_h100_2gpu_window_2026.sqlite': [
        ('sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_exe', 'gemm'),
        ('sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_ex', 'gemm'),
        ('sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_exe', 'gemm'),
        ('void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::MeanOps<flo', 'reduction'),
        ('void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<at::na', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, std::arra', 'elementwise'),
    ],
    'nsysai_tiny_rtx3080_2026.sqlite': [
        ('void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::func_wrappe', 'reduction'),
        ('void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>, std::array<ch', 'elementwise'),
    ],
    'nvfuser_h100_2024.sqlite': [
        ('<unnamed>::nvfuser_none_f0_c0_r0_g0(<unnamed>::Tensor<<unnamed>::__half, (int)3, (int)3>, <unnamed>:', 'other'),
        ('nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN', 'gemm'),
        ('void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4, void at::nati', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<(int)4, at::native::AbsFunctor<c10::Half>, std::array', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<(int)4, at::native::BinaryFunctor<c10::Half, c10::Hal', 'elementwise'),
        ('void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<c10::Half>, std::', 'elementwise'),
    ],
    'pipit_saxpy_mpi_a100_2022.sqlite': [
        ('saxpy(double *, double *, double *, double, int)', 'other'),
    ],
}

CASES = [(trace, prefix, cls) for trace, items in REAL_TOP_KERNELS.items() for prefix, cls in items]


@pytest.mark.parametrize(("trace", "prefix", "cls"), CASES)
def test_real_top_kernel_names(trace: str, prefix: str, cls: str) -> None:
    assert kc.classify_name(prefix) == cls


def test_every_class_but_memcpy_reached_by_real_names() -> None:
    seen = {cls for _, _, cls in CASES}
    assert seen >= {"gemm", "attention", "convolution", "elementwise", "reduction", "normalization",
                    "communication", "triton", "other"}


def _top_kernels(path, n: int = 6) -> dict[str, float]:
    if path.suffix == ".sqlite":
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT s.value, SUM(k.end - k.start) AS t FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                               "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value").fetchall()
        finally:
            con.close()
        return dict(rows)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    events = doc if isinstance(doc, list) else doc.get("traceEvents", [])
    total: Counter[str] = Counter()
    for e in events:
        if str(e.get("cat", "")).lower() == "kernel" and e.get("ph") == "X":
            total[e["name"]] += float(e.get("dur") or 0)
    return dict(total)


@needs_shared
@pytest.mark.parametrize("trace", sorted(REAL_TOP_KERNELS))
def test_listed_names_are_the_traces_top_kernels(trace: str) -> None:
    path = next(p for p in (SHARED_TRACES / "kineto" / trace, SHARED_TRACES / "nsys" / trace) if p.exists())
    totals = _top_kernels(path)
    top = sorted(totals, key=lambda n: -totals[n])[:len(REAL_TOP_KERNELS[trace])]
    for prefix, cls in REAL_TOP_KERNELS[trace]:
        full = [n for n in totals if n.startswith(prefix)]
        assert full, f"{prefix!r} not in {trace}"
        assert any(n in top for n in full)
        assert {kc.classify_name(n) for n in full} == {cls}, prefix
