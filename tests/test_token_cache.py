import copy
import sys
import threading

import numpy as np
import pytest
import torch

from elmo import BiLM, batch_to_char_ids
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


def _held_bytes(cache) -> int:
    """Bytes of every tensor storage the cache reaches (not the encoder's), each storage once."""
    storages, seen = {}, set()
    stack = [value for name, value in vars(cache).items() if name != "encoder"]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            storages[item.untyped_storage().data_ptr()] = item.untyped_storage().nbytes()
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set):
            stack.extend(item)
    return sum(storages.values())


def test_memory_held_is_what_the_entries_need_not_the_batches_they_came_from(fixture_bilm, fixture_sentences):
    capacity, dim = 100, fixture_bilm.token_encoder.output_dim
    cache = TokenVectorCache(fixture_bilm.token_encoder, 50, capacity=capacity)
    with torch.no_grad():
        for start in range(0, 30, 3):  # batches of some 40 distinct tokens, 290 in all: evictions
            cache.token_vectors(fixture_sentences[start : start + 3], torch.device("cpu"))
    assert len(cache) == capacity
    held = _held_bytes(cache)
    assert held == capacity * dim * 4  # views of the batches' outputs pinned the evicted rows too
    assert cache.nbytes == held == cache.max_nbytes


def test_a_partly_filled_cache_holds_at_most_twice_what_its_entries_need(fixture_bilm, fixture_sentences):
    dim = fixture_bilm.token_encoder.output_dim
    cache = TokenVectorCache(fixture_bilm.token_encoder, 50, capacity=10_000)
    with torch.no_grad():
        for start in range(0, 30, 3):
            cache.token_vectors(fixture_sentences[start : start + 3], torch.device("cpu"))
            assert len(cache) * dim * 4 <= _held_bytes(cache) < 2 * len(cache) * dim * 4
    assert cache.max_nbytes == 10_000 * dim * 4


def test_tokens_with_the_same_characters_seen_share_one_entry(fixture_bilm):
    cache = TokenVectorCache(fixture_bilm.token_encoder, 50, capacity=10)
    long_a, long_b = "x" * 48 + "a" * 10_000, "x" * 48 + "b" * 10_000  # the encoder sees 48 bytes of each
    with torch.no_grad():
        vectors = cache.token_vectors([[long_a, long_b, "x" * 48]], torch.device("cpu"))
    assert len(cache) == 2  # one 48-byte key for both long tokens, one for the 48-character string
    assert max(sys.getsizeof(key) for key in cache._rows) < 300  # a key never grows with the token
    torch.testing.assert_close(vectors[0], vectors[1], rtol=0, atol=0)
    torch.testing.assert_close(vectors[0], vectors[2], rtol=0, atol=0)


def test_vectors_follow_the_weights_when_they_change_in_place_or_by_an_optimizer_step(fixture_bilm, fixture_sentences):
    bilm = copy.deepcopy(fixture_bilm)
    embedder = Embedder(bilm)  # shares bilm: its weights are the caller's
    embedder.embed(fixture_sentences)  # fills the cache with the old weights' token vectors
    with torch.no_grad():
        for parameter in bilm.parameters():
            parameter.mul_(0.5)
    fresh = Embedder(copy.deepcopy(bilm), token_cache_size=0).embed(fixture_sentences)
    for changed, expected in zip(embedder.embed(fixture_sentences), fresh, strict=True):
        np.testing.assert_allclose(changed, expected, rtol=1e-5, atol=1e-6)

    # A fused Adam step does not count in the weights' _version; the cache must see it anyway.
    optimizer = torch.optim.Adam(bilm.parameters(), lr=0.1, fused=True)
    for parameter in bilm.parameters():
        parameter.grad = torch.ones_like(parameter)
    optimizer.step()
    fresh = Embedder(copy.deepcopy(bilm), token_cache_size=0).embed(fixture_sentences)
    for changed, expected in zip(embedder.embed(fixture_sentences), fresh, strict=True):
        np.testing.assert_allclose(changed, expected, rtol=1e-5, atol=1e-6)


def test_after_the_weights_change_dtype_the_vectors_are_the_new_dtypes_not_rounded_to_the_old(fixture_bilm,
                                                                                               fixture_sentences):
    """``.double()`` replaces the weights: the rows are forgotten and so is the float32 table, whose rounding
    would otherwise carry into the float64 vectors (then every hit would come back float32)."""
    encoder = copy.deepcopy(fixture_bilm.token_encoder)
    cache = TokenVectorCache(encoder, 50, capacity=10_000)
    batch = fixture_sentences[:4]
    with torch.no_grad():
        cache.token_vectors(batch, torch.device("cpu"))
        encoder.double()
        first, second = (cache.token_vectors(batch, torch.device("cpu")) for _ in range(2))  # misses, then hits
        direct = encoder(batch_to_char_ids([[token for tokens in batch for token in tokens]])[0])
    assert first.dtype == second.dtype == torch.float64
    torch.testing.assert_close(first, direct, rtol=0, atol=1e-12)
    torch.testing.assert_close(second, direct, rtol=0, atol=1e-12)


@pytest.mark.parametrize("write", ["data", "numpy"])
def test_weights_written_where_nothing_counts_it_are_read_afresh_after_weights_changed(fixture_bilm,
                                                                                        fixture_sentences, write):
    """A write through ``.data`` or a NumPy view changes neither a weight's address nor its update count: the
    embedder kept the old token vectors and oneDNN's reordered copies, and so did a new ``Embedder`` of the same
    BiLM (the remedy the docs named), up to 0.4 off. ``elmo.weights_changed()`` says so, and a new embedder calls it."""
    from elmo import weights_changed

    bilm = copy.deepcopy(fixture_bilm)
    embedder = Embedder(bilm)
    before = embedder.embed(fixture_sentences)
    for parameter in bilm.parameters():
        if write == "data":
            parameter.data.mul_(0.5)
        else:
            parameter.detach().numpy()[:] *= 0.5
    expected = Embedder(copy.deepcopy(bilm), token_cache_size=0).embed(fixture_sentences)
    weights_changed()
    for got, want, old in zip(embedder.embed(fixture_sentences), expected, before, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert np.abs(old - want).max() > 0.01  # the write moved the vectors
    for parameter in bilm.parameters():
        parameter.data.mul_(2.0)
    expected = Embedder(copy.deepcopy(bilm), token_cache_size=0).embed(fixture_sentences)
    for got, want in zip(Embedder(bilm).embed(fixture_sentences), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_call_under_autocast_leaves_the_cache_to_the_float32_calls_after_it(fixture_bilm, fixture_sentences):
    """The table took the type of the first vectors stored: after one call under CPU autocast (bfloat16) the
    float32 calls that followed got bfloat16-rounded token vectors, or failed, until the weights changed."""
    embedder = Embedder(copy.deepcopy(fixture_bilm))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        embedder.embed(fixture_sentences[:3])
    expected = Embedder(copy.deepcopy(fixture_bilm), token_cache_size=0).embed(fixture_sentences)
    for got, want in zip(embedder.embed(fixture_sentences), expected, strict=True):  # hits and misses
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for got, want in zip(embedder.embed(fixture_sentences[:3]), expected[:3], strict=True):  # all hits
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_call_from_another_thread_while_one_encodes_leaves_every_row_its_own_tokens_vector(fixture_bilm):
    """The first call pauses in the encoder until the other thread's call is done (or 1 s passes: with the lock the
    other call waits for the first). Unlocked, both stored "a" and "b", the second copy at rows 2 and 3 while rows 0
    and 1 were counted free; "c" and "d" then overwrote rows 2 and 3, and "a" came back as "c"'s vector."""
    encoder = copy.deepcopy(fixture_bilm.token_encoder)
    cache = TokenVectorCache(encoder, 50, capacity=4)
    encode, entered, other_done = encoder.forward, threading.Event(), threading.Event()

    def forward_pausing_the_first_call(char_ids: torch.Tensor) -> torch.Tensor:
        if not entered.is_set():
            entered.set()
            other_done.wait(timeout=1)
        return encode(char_ids)

    def other_call() -> None:
        entered.wait()
        cache.token_vectors([["a", "b"]], torch.device("cpu"))
        other_done.set()

    encoder.forward = forward_pausing_the_first_call
    other = threading.Thread(target=other_call)
    other.start()
    with torch.no_grad():
        cache.token_vectors([["a", "b"]], torch.device("cpu"))
        other.join()
        cache.token_vectors([["c", "d"]], torch.device("cpu"))
        got = cache.token_vectors([["a", "b", "c", "d"]], torch.device("cpu"))
        direct = encode(batch_to_char_ids([["a", "b", "c", "d"]])[0])
    assert len(cache) == 4
    torch.testing.assert_close(got, direct, atol=1e-6, rtol=1e-6)  # float32 rounding: encoded in other batches


def test_threads_sharing_one_embedder_get_the_vectors_of_an_embedder_without_cache(fixture_bilm):
    """Many distinct tokens through a small cache, so that calls evict what others look up; a short switch interval
    makes the threads interleave inside the calls."""
    vocabulary = [f"w{i}" for i in range(400)]
    generator = np.random.default_rng(0)
    sentences = [[str(token) for token in generator.choice(vocabulary, size=generator.integers(1, 9))]
                 for _ in range(200)]
    without_cache = Embedder(fixture_bilm, token_cache_size=0)
    expected = without_cache.encode(sentences, layers="all", pooling="mean", batch_size=4)
    shared = Embedder(fixture_bilm, token_cache_size=50)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def encode(thread: int) -> None:
        try:
            results[thread] = shared.encode(sentences, layers="all", pooling="mean", batch_size=4)
        except BaseException as error:  # reported below, with the thread's result missing
            errors.append(error)

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=encode, args=(thread,)) for thread in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch_interval)
    assert not errors and len(results) == 4
    for result in results.values():  # float32 rounding: the cache encodes each token among other misses
        np.testing.assert_allclose(result, expected, rtol=1e-6, atol=1e-6)


def test_a_store_interrupted_after_evicting_leaves_no_key_reading_another_tokens_row(fixture_bilm, monkeypatch):
    cache = TokenVectorCache(fixture_bilm.token_encoder, 50, capacity=4)
    cpu = torch.device("cpu")
    with torch.no_grad():
        cache.token_vectors([["a", "b", "c", "d"]], cpu)  # full: the next new token evicts "a"
        reserve = cache._reserve

        def interrupted(*args):
            monkeypatch.setattr(cache, "_reserve", reserve)
            raise KeyboardInterrupt

        monkeypatch.setattr(cache, "_reserve", interrupted)
        with pytest.raises(KeyboardInterrupt):
            cache.token_vectors([["e"]], cpu)
        cache.token_vectors([["f"]], cpu)
        got = cache.token_vectors([["b", "c", "d", "f"]], cpu)
        direct = fixture_bilm.token_encoder(batch_to_char_ids([["b", "c", "d", "f"]])[0])
    torch.testing.assert_close(got, direct, atol=1e-6, rtol=1e-6)  # "f" had been written over "d"'s row


@pytest.mark.parametrize("replaced", ["bilm", "token_encoder"])
def test_a_replaced_bilm_or_encoder_gets_its_own_token_vectors_not_the_old_ones(fixture_bilm, fixture_sentences,
                                                                                replaced):
    """``embedder.bilm`` is a plain attribute: a model put there (or an encoder put into it) must be the one whose
    token vectors come back, as its fingerprint says, not the one the cache was filled from."""
    torch.manual_seed(0)
    other = BiLM(fixture_bilm.config).eval()
    own = BiLM(fixture_bilm.config).eval()  # changed below: the fixture's must stay as it is
    own.load_state_dict(fixture_bilm.state_dict())
    embedder = Embedder(own, token_cache_size=1000)
    embedder.embed(fixture_sentences[:5])  # fills the cache from the fixture's encoder
    if replaced == "bilm":
        embedder.bilm = other
    else:
        embedder.bilm.token_encoder = other.token_encoder
        embedder.bilm.forward_lstm, embedder.bilm.backward_lstm = other.forward_lstm, other.backward_lstm
    expected = Embedder(other, token_cache_size=0).embed(fixture_sentences[:5])
    for got, want in zip(embedder.embed(fixture_sentences[:5]), expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
