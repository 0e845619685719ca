"""The demo model runs in bfloat16 on CPUs with bf16 matrix instructions and in float32 elsewhere."""

from __future__ import annotations

from sessiond.runtime.engine_factory import demo_dtype

AMX = "processor\t: 0\nflags\t\t: fpu vme sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile\nbogomips\t: 4000\n"
AVX512_BF16 = "flags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n"
AVX2 = "flags\t\t: fpu sse2 avx2 fma\nmodel name\t: amx_bf16 in a name is not a flag\n"


def test_bf16_on_a_cpu_with_amx_or_avx512_bf16() -> None:
    assert demo_dtype("cpu", AMX) == "bfloat16"
    assert demo_dtype("cpu", AVX512_BF16) == "bfloat16"


def test_the_engines_default_on_a_cpu_without_them() -> None:
    assert demo_dtype("cpu", AVX2) is None
    assert demo_dtype("cpu", "") is None


def test_the_engines_default_on_an_accelerator() -> None:
    assert demo_dtype("cuda", AMX) is None
