import numpy as np
import torch

from elmo import batch_to_char_ids
from elmo.embedder import Embedder
from elmo.token_cache import TokenVectorCache


def test_cached_vectors_equal_the_encoder_on_each_token(fixture_bilm, fixture_sentences):
    cache = TokenVectorCache(fixture_bilm.token_encoder, 50, capacity=10_000)
    batch = fixture_sentences[:6]
    with torch.no_grad():
        cache.token_vectors(fixture_sentences[6:12], torch.device("cpu"))  # warm with other sentences
        got = cache.token_vectors(batch, torch.device("cpu"))
        direct = fixture_bilm.token_encoder(batch_to_char_ids([[token for tokens in batch for token in tokens]])[0])
        torch.testing.assert_close(got, direct, atol=1e-6, rtol=1e-6)  # float32 rounding
        assert cache.token_vectors([[], []], torch.device("cpu")).shape == (0, got.shape[1])


def test_capacity_bounds_the_cache_and_hits_are_counted(fixture_bilm):
    cache = TokenVectorCache(fixture_bilm.token_encoder, 50, capacity=3)
    with torch.no_grad():
        cache.token_vectors([["a", "b"], ["c", "d"]], torch.device("cpu"))
        assert len(cache) == 3 and (cache.hits, cache.misses) == (0, 4)
        cache.token_vectors([["d", "c", "a"]], torch.device("cpu"))  # "a" was evicted first
    assert (cache.hits, cache.misses) == (2, 5)


def test_embedder_with_and_without_cache_gives_the_same_vectors(fixture_bilm, fixture_sentences):
    cached = Embedder(fixture_bilm, token_cache_size=50).embed(fixture_sentences * 2, batch_size=5)
    plain = Embedder(fixture_bilm, token_cache_size=0).embed(fixture_sentences * 2, batch_size=5)
    for a, b in zip(cached, plain, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
