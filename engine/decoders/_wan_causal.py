"""Causal 3-D convolution with an explicit, functional temporal history (Wan2.1 VAE lineage).

A causal conv with temporal kernel ``kt`` sees, for each output frame, that frame and the
``kt - 1`` input frames before it. Streaming decode keeps those frames per conv between chunks
(Wan's ``feat_cache``). Here the history is never stored on the module: a :class:`HistoryCursor`
hands each conv, in call order, the batched history of its slot and collects the new one, so a
decode call reads its input caches and returns fresh ones without mutating anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from engine.decoders._triton_norm_silu import norm_silu_into, norm_silu_usable
from engine.errors import EngineError

__all__ = ["HISTORY_FRAMES", "CausalConv3d", "ChannelRMSNorm", "HistoryCursor", "conv3d_as_taps", "fused_path", "layout_of"]

# frames of input history a kernel-3 causal conv needs (Wan's CACHE_T)
HISTORY_FRAMES = 2


def layout_of(x: torch.Tensor) -> torch.memory_format:
    """channels_last_3d when a 5-D activation is laid out channels-last, else the default layout."""
    if not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last_3d):
        return torch.channels_last_3d
    return torch.contiguous_format


class ChannelRMSNorm(nn.Module):
    """Channel RMS norm: x / ||x||_channels * sqrt(C) * gamma (Wan's RMS_norm, no bias).

    ``spatial_dims`` is how many trailing dims gamma broadcasts over: 3 for (B, C, T, h, w)
    ("images=False" in Wan, gamma (C, 1, 1, 1)), 2 for the attention block's gamma (C, 1, 1).
    """

    def __init__(self, channels: int, spatial_dims: int) -> None:
        super().__init__()
        self.scale = channels**0.5
        self.gamma = nn.Parameter(torch.ones((channels,) + (1,) * spatial_dims))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, C, T, h, w) -> same shape."""
        gamma = self.gamma.reshape(-1, 1, 1, 1)
        return F.normalize(x, dim=1).mul_(gamma * self.scale)  # in place: one full-size tensor less

    def silu(self, x: torch.Tensor) -> torch.Tensor:
        """SiLU(norm(x)) in eager PyTorch (~7 passes over x)."""
        return F.silu(self(x), inplace=True)

    def scaled_gamma(self) -> torch.Tensor:
        """(C,): gamma times sqrt(C), what the one-pass kernel multiplies by."""
        return self.gamma.reshape(-1) * self.scale


class CausalConv3d(nn.Conv3d):
    """A Conv3d padded symmetrically in space and only into the past in time.

    The temporal past comes from the caller's history (zeros at the start of a stream), so
    running a sequence chunk by chunk equals running it whole.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel: tuple[int, int, int]) -> None:
        kt, kh, kw = kernel
        super().__init__(in_channels, out_channels, kernel, padding=(0, kh // 2, kw // 2))
        self.context = kt - 1
        # run as kt 2-D convs summed over the time taps (channels-last input only): chosen per conv
        # shape by measurement (engine.decoders._wan_layout.choose_conv_forms)
        self.taps2d = False
        self.last_input_shape: tuple[int, ...] | None = None  # what choose_conv_forms times

    @property
    def spatial_padding(self) -> tuple[int, int]:
        kh, kw = self.kernel_size[1:]
        return kh // 2, kw // 2

    def conv(self, padded: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """The convolution proper over an input already padded in time (no padding in time)."""
        self.last_input_shape = tuple(padded.shape)
        if self.taps2d and self.context > 0 and padded.is_contiguous(memory_format=torch.channels_last_3d):
            return conv3d_as_taps(padded, self.weight, bias, self.spatial_padding)
        return F.conv3d(padded, self.weight, bias, padding=self.padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x, self.bias)

    def forward_cached(self, x: torch.Tensor, cursor: HistoryCursor | None) -> torch.Tensor:
        """x: (B, Cin, T, h, w) -> (B, Cout, T, h, w), reading/writing this conv's history slot."""
        if self.context == 0:
            return self.conv(x, self.bias)
        # without a cursor: the start of a stream, no streaming state kept
        padded = F.pad(x, (0, 0, 0, 0, self.context, 0)) if cursor is None else cursor.extend(x, self.context)
        return self.conv(padded, self.bias)

    def forward_normed(self, x: torch.Tensor, norm: ChannelRMSNorm, cursor: HistoryCursor | None) -> torch.Tensor:
        """conv(SiLU(norm(x))) in eager PyTorch (~7 passes over x for the norm, one more to copy it
        behind the history frames)."""
        return self.forward_cached(norm.silu(x), cursor)

    def forward_fused(self, x: torch.Tensor, norm: ChannelRMSNorm, cursor: HistoryCursor,
                      x_bias: torch.Tensor | None = None) -> torch.Tensor:
        """conv(SiLU(norm(x + x_bias))) WITHOUT this conv's own bias (the caller adds it where it
        costs nothing: see ResidualBlock). The one-pass kernel writes the normed x straight behind
        the history frames of this conv's input buffer. Needs `fused_path(x, cursor)`."""
        gamma = norm.scaled_gamma()
        padded = cursor.extend_into(x, self.context, lambda view: norm_silu_into(x, gamma, view, x_bias))
        return self.conv(padded, None)


def conv3d_as_taps(padded: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                   padding: tuple[int, int]) -> torch.Tensor:
    """conv3d(padded, weight, bias, padding=(0, *padding)) for a channels-last (B, C, T+kt-1, h, w)
    input, as kt 2-D convs (one per time tap, over the frames as a batch) summed. cuDNN runs the
    Wan VAE's 96-channel 3x3x3 conv at 480x832 with an sm80 kernel at ~280 TFLOP/s on the H200; the
    same work as three 2-D convs measured ~400 (with the sums). Returns channels-last_3d."""
    batch, _, padded_frames, height, width = padded.shape
    kt = weight.shape[2]
    frames = padded_frames - kt + 1
    taps = [weight[:, :, dt].contiguous(memory_format=torch.channels_last) for dt in range(kt)]
    out_h = height + 2 * padding[0] - weight.shape[3] + 1
    out_w = width + 2 * padding[1] - weight.shape[4] + 1
    out = torch.empty((batch, weight.shape[0], frames, out_h, out_w), dtype=padded.dtype, device=padded.device,
                      memory_format=torch.channels_last_3d)
    for b in range(batch):
        images = padded[b].permute(1, 0, 2, 3)  # (T+kt-1, C, h, w): a channels-last 2-D batch, a view
        target = out[b].permute(1, 0, 2, 3)
        acc = F.conv2d(images[:frames], taps[0], bias, padding=padding)
        for dt in range(1, kt - 1):
            acc += F.conv2d(images[dt : dt + frames], taps[dt], None, padding=padding)
        torch.add(acc, F.conv2d(images[kt - 1 : kt - 1 + frames], taps[kt - 1], None, padding=padding), out=target)
    return out


def fused_path(x: torch.Tensor, cursor: HistoryCursor | None) -> bool:
    """Whether the one-pass Triton kernels apply to activation x in this decode call."""
    return cursor is not None and cursor.fused and norm_silu_usable(x)


class HistoryCursor:
    """Walks the cached convs of one decode call in order, slot by slot.

    ``sessions[b]`` is session b's tuple of histories (one (C, kt-1, h, w) tensor per slot) or
    None for a session at the start of its stream (zero history). New histories are the last
    ``kt - 1`` frames of each slot's padded input, copied out per session.
    """

    def __init__(
        self,
        sessions: Sequence[tuple[torch.Tensor, ...] | None],
        memory_format: torch.memory_format = torch.contiguous_format,
        fused: bool = False,
    ) -> None:
        self.memory_format = memory_format  # layout of every conv input this cursor builds
        self.fused = fused  # norm + SiLU through the one-pass kernel where it applies (else eager)
        self._sessions = list(sessions)
        self._slot = 0
        self._new: list[list[torch.Tensor]] = [[] for _ in self._sessions]

    def extend(self, x: torch.Tensor, context: int) -> torch.Tensor:
        """x: (B, C, T, h, w) -> (B, C, context + T, h, w): history then x; records the new history."""
        return self.extend_into(x, context, lambda view: view.copy_(x))

    def extend_into(self, x: torch.Tensor, context: int, fill: Callable[[torch.Tensor], object]) -> torch.Tensor:
        """Like `extend`, but `fill(view)` writes the frames after the history (shape and dtype of x)."""
        batch, channels, frames, height, width = x.shape
        shape = (batch, channels, context + frames, height, width)
        padded = torch.empty(shape, dtype=x.dtype, device=x.device, memory_format=self.memory_format)
        for b, history in enumerate(self._sessions):
            if history is None:
                padded[b, :, :context].zero_()
            else:
                padded[b, :, :context].copy_(self._history(history, x, context))
        fill(padded[:, :, context:])
        for b in range(batch):
            self._new[b].append(padded[b, :, -context:].clone())
        self._slot += 1
        return padded

    def _history(self, history: tuple[torch.Tensor, ...], x: torch.Tensor, context: int) -> torch.Tensor:
        if self._slot >= len(history):
            raise EngineError(
                "bad_decoder_cache",
                f"decoder cache holds {len(history)} conv histories but the decoder needs more; "
                "pass the cache this decoder returned (or None for a new stream)",
            )
        frames = history[self._slot]
        expected = (x.shape[1], context, x.shape[3], x.shape[4])
        if tuple(frames.shape) != expected:
            raise EngineError(
                "bad_decoder_cache",
                f"decoder cache slot {self._slot} has shape {tuple(frames.shape)}, expected {expected}: "
                "latents must keep the height/width of the stream this cache came from",
            )
        return frames

    def results(self) -> list[tuple[torch.Tensor, ...]]:
        """Per session, the new history of every slot, in slot order."""
        return [tuple(slots) for slots in self._new]

    @property
    def slots_used(self) -> int:
        return self._slot
