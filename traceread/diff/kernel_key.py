"""Matching one kernel across tools: a spelling-neutral key that keeps what makes a kernel itself.

Kineto (cxxabi demangling) and Nsight Systems spell the same kernel differently::

    void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
        std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)
    void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>,
        std::array<char *, (unsigned long)3>>(int, T2, T3)

and lambdas as ``{lambda(float)#1}`` against ``[lambda(float) (instance 1)]``, anonymous namespaces
as ``(anonymous namespace)`` against ``<unnamed>``. :func:`kernel_key` drops the return type
``void``, every parameter list, casts of template values, integer-literal suffixes and whitespace,
and writes lambdas and anonymous namespaces one way. Template arguments stay:
``CUDAFunctor_add<int>`` and ``CUDAFunctor_add<float>`` are different kernels with different keys.
A diff matches by full name first and falls back to the key only for names left unmatched.
"""

from __future__ import annotations

import re

_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool|unsigned|__int128)\)\s*(?=[-\d])")
_INT_SUFFIX = re.compile(r"(?<![\w.])(-?\d+)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)
_NSYS_LAMBDA = re.compile(r"\[lambda\(([^()]*)\)\s*\(instance (\d+)\)\]")
_KINETO_LAMBDA = re.compile(r"\{lambda\(([^()]*)\)#(\d+)\}")
_VOID = re.compile(r"\bvoid\s+")
_ANON = re.compile(r"\(anonymous namespace\)|<unnamed>")


def _drop_parens(text: str) -> str:
    """Remove every parenthesized group (parameter lists, operator() calls), nested ones included."""
    out: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def kernel_key(name: str) -> str:
    """The spelling-neutral key of a kernel name (module doc); equal keys mean the same kernel."""
    s = _VOID.sub("", name.strip())  # nsys also writes it inside template arguments (function types)
    s = _ANON.sub("anon", s)
    # Lambdas keep their parameter types (in brackets, so that dropping parameter lists spares them).
    s = _NSYS_LAMBDA.sub(lambda m: "{lambda[" + m.group(1) + "]#" + m.group(2) + "}", s)
    s = _KINETO_LAMBDA.sub(lambda m: "{lambda[" + m.group(1) + "]#" + m.group(2) + "}", s)
    s = _CAST.sub("", s)
    s = _INT_SUFFIX.sub(r"\1", s)
    s = _drop_parens(s)
    s = re.sub(r"\s+", "", s)
    # "operator()() const" and "operator ()() const" both end as "operatorconst".
    return s
