"""`demo.cpu_trades`: each trade is one change against the served settings."""

from __future__ import annotations

from demo.config import CONFIG
from demo.cpu_trades import TRADES


def test_every_trade_is_a_valid_variant_of_the_served_config_with_its_own_name() -> None:
    names = [t.name for t in TRADES]
    assert len(names) == len(set(names)) and names[0] == "served" and TRADES[0].overrides == {}
    for trade in TRADES:
        variant = CONFIG.with_overrides(name=f"demo+{trade.name}", **trade.overrides)
        assert variant.name == f"demo+{trade.name}"


def test_the_guided_trades_give_back_the_sampling_the_weights_were_distilled_from() -> None:
    by_name = {t.name: t for t in TRADES}
    assert (CONFIG.action_guidance, CONFIG.action_guidance_steps) == (1.0, 0)  # served: no guidance pass
    for name in ("guided", "bf16_matmul_attention_guided"):
        guided = CONFIG.with_overrides(name=f"demo+{name}", **by_name[name].overrides)
        assert (guided.action_guidance, guided.action_guidance_steps) == (3.0, 1)
        assert guided.denoise_timesteps == CONFIG.denoise_timesteps
    # the daemon's settings on a CPU with bf16 instructions, with and without the guidance pass
    assert (by_name["bf16_matmul_attention_guided"].dtype, by_name["bf16_matmul_attention_guided"].attention) == (
        by_name["bf16_matmul_attention"].dtype, by_name["bf16_matmul_attention"].attention) == ("bfloat16", "matmul")
