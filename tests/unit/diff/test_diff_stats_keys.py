"""The diff's statistics (Mann-Whitney U, block bootstrap) and its cross-tool kernel key."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SHARED_TRACES, needs_shared

from traceread.diff.kernel_key import kernel_key
from traceread.diff.stats import block_bootstrap_ratio, block_length, mann_whitney_u


def _u_by_pairs(x: np.ndarray, y: np.ndarray) -> float:
    """U of x counted pair by pair: x above y counts 1, a tie 1/2 (the definition, not the rank formula)."""
    return float((x[:, None] > y[None, :]).sum() + 0.5 * (x[:, None] == y[None, :]).sum())


def test_u_statistic_matches_pair_count_with_ties() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(0, 8, 15).astype(float)  # many ties
    y = rng.integers(2, 10, 11).astype(float)
    assert mann_whitney_u(x, y).u == pytest.approx(_u_by_pairs(x, y))


def test_p_value_agrees_with_a_permutation_test() -> None:
    rng = np.random.default_rng(5)
    x = rng.lognormal(0.0, 0.2, 12)
    y = rng.lognormal(0.15, 0.2, 12)
    res = mann_whitney_u(x, y)
    both = np.concatenate([x, y])
    u0 = _u_by_pairs(x, y)
    mu = len(x) * len(y) / 2
    perms = 4000
    hits = 0
    prng = np.random.default_rng(7)
    for _ in range(perms):
        p = prng.permutation(both)
        hits += abs(_u_by_pairs(p[:12], p[12:]) - mu) >= abs(u0 - mu)
    assert abs(res.p_value - hits / perms) < 0.03, (res.p_value, hits / perms)


def test_identical_and_all_tied_samples_are_not_significant() -> None:
    x = np.array([5.0, 6.0, 7.0, 8.0, 9.0])
    assert mann_whitney_u(x, x).p_value == 1.0
    assert mann_whitney_u(np.full(6, 3.0), np.full(7, 3.0)).p_value == 1.0


def test_clearly_separated_samples_are_significant() -> None:
    res = mann_whitney_u(np.arange(10.0), np.arange(10.0) + 100)
    assert res.u == 0 and res.p_value < 0.001


def test_block_bootstrap_is_seeded_and_covers_the_true_ratio() -> None:
    rng = np.random.default_rng(11)
    before = 100 + rng.normal(0, 3, 30)
    after = 150 + rng.normal(0, 3, 30)
    a = block_bootstrap_ratio(before, after, samples=1000, seed=0)
    assert a == block_bootstrap_ratio(before, after, samples=1000, seed=0)
    assert a[0] < 1.5 < a[1] and a[0] > 1.0
    same = block_bootstrap_ratio(before, before.copy(), samples=1000)
    assert same[0] <= 1.0 <= same[1]
    assert block_length(30) == 3 and block_length(2) == 1


# Each tool's real spelling of the same kernel, copied from ../shared/traces: Kineto from
# tracelens_qwen_0p5b_h100.json.gz, nsys from nsysai_h100_2gpu_window_2026.sqlite.
SAME_KERNEL = [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, "
     "2ul> >(int, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul>)",
     "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctorOnSelf_add<float>, "
     "std::array<char *, (unsigned long)2>>(int, T2, T3)"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::rsqrt_kernel_cuda(at::TensorIteratorBase&)::"
     "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >"
     "(int, at::native::rsqrt_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::"
     "operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)",
     "void at::native::vectorized_elementwise_kernel<(int)4, at::native::rsqrt_kernel_cuda(at::TensorIteratorBase &)::"
     "[lambda() (instance 2)]::operator ()() const::[lambda() (instance 2)]::operator ()() const::[lambda(float) "
     "(instance 1)], std::array<char *, (unsigned long)2>>(int, T2, T3)"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
     "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, 4, "
     "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
     "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::"
     "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() "
     "const::{lambda(float)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, "
     "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::"
     "StoreWithCast<1>)",
     "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::"
     "[lambda() (instance 3)]::operator ()() const::[lambda() (instance 7)]::operator ()() const::[lambda(float) "
     "(instance 1)], std::array<char *, (unsigned long)2>, (int)4, TrivialOffsetCalculator<(int)1, unsigned int>, "
     "TrivialOffsetCalculator<(int)1, unsigned int>, at::native::memory::LoadWithCast<(int)1>, "
     "at::native::memory::StoreWithCast<(int)1>>(int, T1, T2, T4, T5, T6, T7)"),
]
# Different kernels that must keep different keys (template arguments differ).
NSYS_LONG_COPY = SAME_KERNEL[2][1].replace("(instance 7)", "(instance 4)").replace("lambda(float)", "lambda(long)")
DIFFERENT = [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<int>, at::detail::Array<char*, 3> >"
     "(int, at::native::CUDAFunctor_add<int>, at::detail::Array<char*, 3>)",
     "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> "
     ">(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"),
    (SAME_KERNEL[2][0], NSYS_LONG_COPY),
]


@pytest.mark.parametrize("kineto,nsys", SAME_KERNEL)
def test_kineto_and_nsys_spellings_meet(kineto: str, nsys: str) -> None:
    assert kineto != nsys
    assert kernel_key(kineto) == kernel_key(nsys)


@pytest.mark.parametrize("a,b", DIFFERENT)
def test_template_arguments_keep_kernels_apart(a: str, b: str) -> None:
    assert kernel_key(a) != kernel_key(b)


@needs_shared
def test_spellings_are_the_real_ones() -> None:
    from traceread.loaders import load

    def names(rel: str) -> set[str]:
        path = SHARED_TRACES / rel
        if not path.exists():
            pytest.skip(f"{path} not present")
        ev = load(str(path)).events
        return {str(n) for n in ev.loc[ev["category"] == "kernel", "name"].unique()}

    kin = names("kineto/tracelens_qwen_0p5b_h100.json.gz")
    nsys = names("nsys/nsysai_h100_2gpu_window_2026.sqlite")
    for k, n in SAME_KERNEL:
        assert k in kin and n in nsys
    assert NSYS_LONG_COPY in nsys
    base = names("kineto/hta_compare_base.json.gz")
    assert all(a in base and b in base for a, b in DIFFERENT[:1])
    # Across the two real traces, the key matches more kernels than the full name does, never fewer.
    assert len({kernel_key(x) for x in kin} & {kernel_key(x) for x in nsys}) > len(kin & nsys)
