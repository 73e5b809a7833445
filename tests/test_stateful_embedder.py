import json

import h5py
import numpy as np
import pytest

from elmo.embedder import Embedder
from elmo.stateful_embedder import StatefulEmbedder


def test_carried_state_reproduces_bilm_tf(fixture_bilm, fixture_dir):
    batches = json.loads((fixture_dir / "sentences.json").read_text())
    interleaved = [batches[k][i].split() for i in range(10) for k in range(3)]  # bilm-tf's batches of 3
    embedder = StatefulEmbedder(fixture_bilm)
    results = embedder.embed(interleaved, "top", batch_size=3)
    for index, result in enumerate(results):
        i, k = divmod(index, 3)
        with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as reference:
            expected = np.concatenate(list(reference[str(i)][...]), axis=-1)
        np.testing.assert_allclose(result, expected, atol=1e-5, rtol=0)


def test_warm_up_primes_the_state_and_reset_forgets_it(fixture_bilm, fixture_sentences):
    embedder = StatefulEmbedder(fixture_bilm)
    cold = embedder.embed(fixture_sentences[:2], batch_size=2)
    embedder.reset_state()
    embedder.warm_up(fixture_sentences[2:10], batch_size=2)
    warm = embedder.embed(fixture_sentences[:2], batch_size=2)
    assert np.abs(warm[0][1:] - cold[0][1:]).max() > 1e-3
    embedder.reset_state()
    for a, b in zip(cold, embedder.embed(fixture_sentences[:2], batch_size=2), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_encode_continues_the_carried_state_as_embed_does(fixture_bilm, fixture_sentences):
    primed, fresh = StatefulEmbedder(fixture_bilm), StatefulEmbedder(fixture_bilm)
    primed.warm_up(fixture_sentences[2:6], batch_size=2)
    warm = primed.encode(fixture_sentences[:2], layers="all", batch_size=2)
    fresh.warm_up(fixture_sentences[2:6], batch_size=2)
    for a, b in zip(warm, fresh.embed(fixture_sentences[:2], "all", batch_size=2), strict=True):
        np.testing.assert_array_equal(a, b)


def _interrupted_after(sentences, count):
    """The first ``count`` sentences, then a KeyboardInterrupt, as a user's Ctrl-C in the middle of a call."""
    yield from sentences[:count]
    raise KeyboardInterrupt


@pytest.mark.parametrize("call", ["encode", "embed", "embed_tfhub", "warm_up"])
@pytest.mark.parametrize("failure", ["bad token", "interrupt"])
def test_a_call_failing_after_its_first_batch_leaves_the_carried_state_as_before(fixture_bilm, call, failure):
    sentences = [["the", "bank", "of", "the", "river"], ["a", "b", "c"], ["x", "y"], ["one", "two", "three"]]
    failing = [*sentences[:2], ["x", 3], *sentences[3:]] if failure == "bad token" else _interrupted_after(sentences, 3)
    clean = StatefulEmbedder(fixture_bilm).encode(sentences, batch_size=2, pooling="mean")
    embedder = StatefulEmbedder(fixture_bilm)
    with pytest.raises(TypeError if failure == "bad token" else KeyboardInterrupt):
        if call == "encode":
            embedder.encode(failing, batch_size=2, pooling="mean")
        else:
            getattr(embedder, call)(failing, batch_size=2)
    retry = embedder.encode(sentences, batch_size=2, pooling="mean")
    np.testing.assert_array_equal(retry, clean)


def test_iter_embed_carries_the_state_over_the_batches_it_gave_before_failing(fixture_bilm):
    sentences = [["the", "bank", "of", "the", "river"], ["a", "b", "c"], ["x", "y"], ["one", "two", "three"]]
    streamed, failed = [], StatefulEmbedder(fixture_bilm)
    with pytest.raises(KeyboardInterrupt):
        for vectors in failed.iter_embed(_interrupted_after(sentences, 3), "top", batch_size=2):
            streamed.append(vectors)
    assert len(streamed) == 2
    after_first_batch = StatefulEmbedder(fixture_bilm)
    after_first_batch.embed(sentences[:2], "top", batch_size=2)
    for a, b in zip(
        failed.embed(sentences[2:], "top", batch_size=2),
        after_first_batch.embed(sentences[2:], "top", batch_size=2),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)


def test_a_failing_call_in_batches_smaller_than_the_carried_state_restores_every_row(fixture_bilm):
    """A smaller batch updates only its rows of the carried state: that update must not reach the saved state."""
    sentences = [["a", "b", "c"], ["d", "e"]]
    clean = StatefulEmbedder(fixture_bilm)
    clean.embed(sentences, "top", batch_size=2)
    embedder = StatefulEmbedder(fixture_bilm)
    embedder.embed(sentences, "top", batch_size=2)
    with pytest.raises(TypeError):
        embedder.embed([["f", "g"], ["x", 3]], "top", batch_size=1)
    for a, b in zip(
        embedder.embed(sentences, "top", batch_size=2), clean.embed(sentences, "top", batch_size=2), strict=True
    ):
        np.testing.assert_array_equal(a, b)


def test_a_long_sentence_is_read_whole_and_the_reading_names_no_windows(fixture_bilm, fixture_sentences):
    """It cuts no windows, so a sentence longer than the base class's window is one pass from a zero state: the
    vectors of an ``Embedder`` whose window holds the whole sentence, and not those of one that cuts it."""
    sentence = [word for words in fixture_sentences for word in words][:300]
    stateful = StatefulEmbedder(fixture_bilm).embed([sentence], "all")[0]
    whole = Embedder(fixture_bilm, max_window_tokens=400).embed([sentence], "all")[0]
    windowed = Embedder(fixture_bilm, max_window_tokens=100, window_context=20).embed([sentence], "all")[0]
    np.testing.assert_allclose(stateful, whole, atol=1e-5, rtol=0)
    assert np.abs(windowed - whole).max() > 1e-3
    assert StatefulEmbedder(fixture_bilm).reading == {"embedder": "StatefulEmbedder"}
