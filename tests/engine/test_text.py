"""The built-in text encoder and the embedding cache."""

from __future__ import annotations

import torch

from engine.config import tiny_config
from engine.text import EmbeddingCache, HashTextEncoder, tokenize


def test_tokenizer_lowercases_words_and_drops_punctuation() -> None:
    assert tokenize("Snowy HILLS, at night!") == ["snowy", "hills", "at", "night"]


def test_hash_encoder_is_deterministic_and_zero_padded() -> None:
    config = tiny_config()
    one, two = HashTextEncoder(config), HashTextEncoder(config)
    one.init_random()
    two.init_random()
    a, b = one.encode(["red desert"]), two.encode(["red desert"])
    assert torch.equal(a, b)
    assert a.shape == (1, config.text_len, config.text_dim)
    assert torch.count_nonzero(a[0, 2:]) == 0
    assert not torch.equal(a, one.encode(["desert red"]))


def test_hash_encoder_caps_tokens_at_text_len() -> None:
    encoder = HashTextEncoder(tiny_config())
    assert len(encoder.token_ids(" ".join(["w"] * 50))) == tiny_config().text_len


def test_embedding_cache_hits_by_content_and_evicts_least_recent() -> None:
    encoder = HashTextEncoder(tiny_config())
    cache = EmbeddingCache(encoder, capacity=2)
    cache.get("a")
    cache.get("b")
    cache.get("a")
    cache.get("c")  # evicts "b"
    assert (cache.hits, cache.misses, len(cache)) == (1, 3, 2)
    cache.get("b")
    assert cache.misses == 4
