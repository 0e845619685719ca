"""Prompt text -> embeddings (text_len, text_dim) through a pluggable encoder, cached by content hash.

The built-in `HashTextEncoder` is small and deterministic: lower-cased word tokens are hashed
into a table of embeddings (random-init from a fixed seed, trainable: the demo model learns it),
plus a position table; at most `text_len` tokens, zero padding after them (as Wan pads T5 output).
A T5-class encoder is used only when configured with a local path (`T5TextEncoder`).
"""

from __future__ import annotations

import hashlib
import importlib
import re
from collections import OrderedDict
from typing import Protocol

import torch
from torch import nn

from engine.config import ModelConfig
from engine.errors import ConfigError

__all__ = ["TEXT_PREFIX", "EmbeddingCache", "HashTextEncoder", "T5TextEncoder", "TextEncoder", "tokenize"]

TEXT_PREFIX = "text_encoder."  # keys of the built-in encoder inside a combined checkpoint
_TOKEN = re.compile(r"[a-z0-9]+")
_INIT_SEED = 4321


class TextEncoder(Protocol):
    def encode(self, prompts: list[str]) -> torch.Tensor:
        """(B, text_len, text_dim) embeddings, zero-padded after the prompt's tokens."""
        ...


def tokenize(prompt: str) -> list[str]:
    return _TOKEN.findall(prompt.lower())


def _bucket(token: str, buckets: int) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little") % buckets


class HashTextEncoder(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.text_len = config.text_len
        self.buckets = config.text_vocab_buckets
        self.tokens = nn.Embedding(config.text_vocab_buckets, config.text_dim)
        self.positions = nn.Parameter(torch.zeros(config.text_len, config.text_dim))

    @torch.no_grad()
    def init_random(self, seed: int = _INIT_SEED) -> None:
        gen = torch.Generator(device="cpu").manual_seed(seed)
        self.tokens.weight.copy_(torch.randn(self.tokens.weight.shape, generator=gen).to(self.tokens.weight))
        self.positions.copy_(0.1 * torch.randn(self.positions.shape, generator=gen).to(self.positions))

    def token_ids(self, prompt: str) -> list[int]:
        return [_bucket(tok, self.buckets) for tok in tokenize(prompt)[: self.text_len]]

    def encode(self, prompts: list[str]) -> torch.Tensor:
        weight = self.tokens.weight
        out = torch.zeros(len(prompts), self.text_len, weight.shape[1], dtype=weight.dtype, device=weight.device)
        for row, prompt in enumerate(prompts):
            ids = self.token_ids(prompt)
            if ids:
                index = torch.tensor(ids, device=weight.device)
                out[row, : len(ids)] = self.tokens(index) + self.positions[: len(ids)]
        return out


class T5TextEncoder:
    """A T5-class encoder loaded from a local directory (needs the `transformers` package)."""

    def __init__(self, path: str, config: ModelConfig, device: torch.device) -> None:
        try:
            transformers = importlib.import_module("transformers")
        except ImportError as exc:
            raise ConfigError(
                "text_encoder_unavailable", "a T5 text encoder needs the 'transformers' package; "
                "install it or leave text_encoder_path unset to use the built-in encoder"
            ) from exc
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = transformers.T5EncoderModel.from_pretrained(path, local_files_only=True).to(device).eval()
        self.text_len = config.text_len
        self.device = device

    @torch.no_grad()
    def encode(self, prompts: list[str]) -> torch.Tensor:
        batch = self.tokenizer(
            prompts, padding="max_length", truncation=True, max_length=self.text_len, return_tensors="pt"
        ).to(self.device)
        hidden = self.model(**batch).last_hidden_state
        return hidden * batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # type: ignore[no-any-return]


class EmbeddingCache:
    """Bounded LRU of prompt embeddings keyed by the SHA-256 of the prompt text."""

    def __init__(self, encoder: TextEncoder, capacity: int) -> None:
        self.encoder = encoder
        self.capacity = capacity
        self._entries: OrderedDict[str, torch.Tensor] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(prompt: str) -> str:
        return hashlib.sha256(prompt.encode()).hexdigest()

    @torch.no_grad()
    def get(self, prompt: str) -> torch.Tensor:
        """(text_len, text_dim) for `prompt`."""
        key = self.key(prompt)
        if key in self._entries:
            self.hits += 1
            self._entries.move_to_end(key)
            return self._entries[key]
        self.misses += 1
        value = self.encoder.encode([prompt])[0]
        self._entries[key] = value
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
