"""The GPU-time breakdown of a profiler trace: busy is the union of kernels inside a phase's window."""

from __future__ import annotations

from enginetools.profile_trace import kernel_kind, phase_times, table


def _window(name: str, ts: float, dur: float) -> dict[str, object]:
    return {"ph": "X", "cat": "user_annotation", "name": name, "ts": ts, "dur": dur}


def _kernel(name: str, ts: float, dur: float, cat: str = "kernel") -> dict[str, object]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}


TRACE = {
    "traceEvents": [
        _window("bench.denoise", 0.0, 10_000.0),  # 10 ms
        _window("bench.denoise", 20_000.0, 5_000.0),  # 5 ms
        _window("bench.decode", 30_000.0, 4_000.0),
        _window("unrelated", 0.0, 50_000.0),
        # first denoise window: 2 ms attention overlapping 1 ms of a 3 ms GEMM, 1 ms elementwise
        _kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma", 1_000.0, 2_000.0),
        _kernel("nvjet_sm90_tst_192x144_64x5_2x1_v_bz_coopB_bias_TNT", 2_000.0, 3_000.0),
        _kernel("void at::native::vectorized_elementwise_kernel<4>", 8_000.0, 1_000.0),
        # second: a kernel that starts before the window counts only from the window's start
        _kernel("triton_red_fused_add_mean_mul", 19_000.0, 2_000.0),
        # decode: a conv and a host-to-device copy
        _kernel("sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", 30_500.0, 2_500.0),
        _kernel("Memcpy HtoD (Pageable -> Device)", 33_000.0, 200.0, cat="gpu_memcpy"),
        # outside every window
        _kernel("void at::native::vectorized_elementwise_kernel<4>", 45_000.0, 1_000.0),
        {"ph": "i", "cat": "kernel", "name": "instant without a duration", "ts": 1.0},
    ]
}


def test_busy_is_the_union_of_kernels_clipped_to_each_window() -> None:
    phases = phase_times(TRACE)
    assert sorted(phases) == ["decode", "denoise"]
    denoise = phases["denoise"]
    assert denoise.calls == 2
    assert denoise.wall_ms == 15.0
    # window 1: [1, 5) ms busy from attention + GEMM (4 ms) + [8, 9) ms = 5 ms; window 2: [20, 21) = 1 ms
    assert denoise.busy_ms == 6.0
    assert denoise.idle_ms == 9.0
    assert denoise.by_kind_ms == {"attention": 2.0, "gemm": 3.0, "elementwise": 1.0, "triton": 1.0}
    # idle: window 1 lead 1 ms, gap [5, 8) before the elementwise kernel, tail 1 ms; window 2 lead 0, tail 4
    assert (denoise.lead_ms, denoise.tail_ms) == (1.0, 5.0)
    assert denoise.gaps_before_ms == {"void at::native::vectorized_elementwise_kernel<4>": 3.0}
    decode = phases["decode"]
    assert (decode.calls, decode.wall_ms, decode.busy_ms) == (1, 4.0, 2.7)
    assert decode.by_kind_ms == {"conv": 2.5, "copy": 0.2}


def test_kernel_kinds_follow_the_names_the_h200_profile_shows() -> None:
    assert kernel_kind("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7") == "attention"
    assert kernel_kind("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc") == "conv"
    assert kernel_kind("nvjet_sm90_tst_256x144_64x4_2x1_v_bz_coopA_bias_TNT") == "gemm"
    assert kernel_kind("triton_poi_fused_gelu_view_3") == "triton"
    assert kernel_kind("void at::native::(anonymous namespace)::CatArrayBatchedCopy<...>") == "copy"
    assert kernel_kind("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<...>>") == "reduce"
    assert kernel_kind("something_else") == "other"


def test_table_lists_every_phase_with_its_idle_share() -> None:
    text = table(phase_times(TRACE))
    rows = text.splitlines()
    assert rows[1].split() == ["decode", "1", "4.0", "2.7", "1.3", "32.5", "0.5", "0.8"]
    assert rows[2].split() == ["denoise", "2", "15.0", "6.0", "9.0", "60.0", "1.0", "5.0"]
    assert "  attention" in text and "nvjet_sm90_tst_192x144" in text
