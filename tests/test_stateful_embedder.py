import json

import h5py
import numpy as np

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
