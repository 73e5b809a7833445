import copy
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo import batch_to_char_ids, load_bilm
from elmo.embedder import Embedder


@pytest.fixture
def bilm(fixture_bilm):
    return fixture_bilm


@pytest.fixture
def sentences(fixture_sentences):
    return fixture_sentences


def _direct(bilm, tokens) -> np.ndarray:
    """Independent path: the biLM on one sentence, no batching, bucketing or windows."""
    with torch.no_grad():
        output, _ = bilm(batch_to_char_ids([tokens]))
    return output.layers[:, 0].numpy()


def test_all_layers_equal_the_bilm_on_each_sentence_alone(bilm, sentences):
    results = Embedder(bilm).embed(sentences, "all", batch_size=4)
    assert len(results) == len(sentences)
    for tokens, result in zip(sentences, results, strict=True):
        assert result.shape == (3, len(tokens), 32)
        np.testing.assert_allclose(result, _direct(bilm, tokens), atol=1e-5, rtol=0)


@pytest.mark.parametrize("batch_size", [1, 3, 7, 64])
@pytest.mark.parametrize("bucket_batches", [1, 4])
def test_any_batch_size_and_bucketing_give_the_same_vectors_in_input_order(bilm, sentences, batch_size, bucket_batches):
    reference = [_direct(bilm, tokens) for tokens in sentences]
    results = Embedder(bilm, bucket_batches=bucket_batches).embed(sentences, batch_size=batch_size)
    for expected, got in zip(reference, results, strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


def test_top_average_and_given_weights_are_the_right_combinations(bilm, sentences):
    embedder = Embedder(bilm)
    all_layers = embedder.embed(sentences[:5], "all")
    weights = [0.2, -1.0, 3.5]
    for layers, combine in [
        ("top", lambda a: a[2]),
        ("average", lambda a: (a[0] + a[1] + a[2]) / 3),
        (weights, lambda a: 0.2 * a[0] - 1.0 * a[1] + 3.5 * a[2]),
    ]:
        for full, got in zip(all_layers, embedder.embed(sentences[:5], layers), strict=True):
            assert got.shape == full.shape[1:]
            np.testing.assert_allclose(got, combine(full), atol=1e-5, rtol=1e-6)


def test_raw_strings_go_through_the_tokenizer(bilm):
    embedder = Embedder(bilm, tokenizer="english")
    raw, _tokens = embedder.embed(["Don't stop, Mr. Smith.", ["Do", "n't", "stop", ",", "Mr.", "Smith", "."]])
    assert raw.shape[1] == len(embedder.tokenize("Don't stop, Mr. Smith."))
    assert embedder.tokenize("Don't stop.") == ["Don", "'t", "stop", "."]
    np.testing.assert_allclose(Embedder(bilm).embed([["a", "b"]])[0], Embedder(bilm).embed(["a b"])[0])


def test_empty_sentences_and_an_all_empty_batch_give_zero_length_arrays(bilm):
    embedder = Embedder(bilm)
    mixed = embedder.embed([[], ["word"], "", []], batch_size=2)
    assert [m.shape for m in mixed] == [(3, 0, 32), (3, 1, 32), (3, 0, 32), (3, 0, 32)]
    assert [m.shape for m in embedder.embed([[], []], "top")] == [(0, 32), (0, 32)]
    assert embedder.embed([]) == []


@pytest.mark.parametrize("token_cache_size", [0, 50])
def test_a_float64_model_gives_zero_length_arrays_for_an_all_empty_batch(bilm, token_cache_size):
    """Empty sentences' token vectors are made in the model's dtype, not float32 (which its LSTM would refuse)."""
    embedder = Embedder(copy.deepcopy(bilm).double(), token_cache_size=token_cache_size)
    assert [m.shape for m in embedder.embed([[], ""], batch_size=2)] == [(3, 0, 32), (3, 0, 32)]
    pooled = embedder.encode(["", "word"], pooling="mean")
    assert pooled.shape == (2, 32) and not pooled[0].any() and pooled[1].any()


def test_a_model_loaded_or_built_under_inference_mode_gives_the_ordinary_models_vectors(fixture_dir, sentences):
    """``torch.inference_mode`` makes inference tensors, which keep no version count: a model loaded there is an
    ordinary one (oneDNN's reordered weights kept), and one built there by hand runs without any kept copy."""
    expected = Embedder(load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")).embed(sentences)
    with torch.inference_mode():
        loaded = load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")
        built = type(loaded)(loaded.config)
        built.load_state_dict(loaded.state_dict())
        built.eval()
        from_loaded, from_built = Embedder(loaded).embed(sentences), Embedder(built).embed(sentences)
    assert not any(parameter.is_inference() for parameter in loaded.parameters())
    assert all(parameter.is_inference() for parameter in built.parameters())
    for got_loaded, got_built, want in zip(from_loaded, from_built, expected, strict=True):
        np.testing.assert_array_equal(got_loaded, want)
        np.testing.assert_allclose(got_built, want, rtol=0, atol=32 * np.finfo(np.float32).eps * np.abs(want).max())


def test_long_sentence_windows_each_token_comes_from_the_window_where_it_is_core(bilm, sentences):
    long = [token for s in sentences for token in s][:230]
    embedder = Embedder(bilm, max_window_tokens=60, window_context=15)  # cores of 30 tokens
    stitched = embedder.embed([long])[0]
    assert stitched.shape == (3, 230, 32)
    for core_start in range(0, 230, 30):
        start, end = max(0, core_start - 15), min(230, core_start + 45)
        window = _direct(bilm, long[start:end])
        core = slice(core_start, min(core_start + 30, 230))
        np.testing.assert_allclose(stitched[:, core], window[:, core_start - start : core.stop - start], atol=1e-5)


def test_windows_leave_short_sentences_untouched_and_more_context_brings_vectors_closer(bilm, sentences):
    long = [token for s in sentences for token in s][:400]
    unsplit = _direct(bilm, long)
    errors = []
    for context in (2, 10, 40):
        embedder = Embedder(bilm, max_window_tokens=2 * context + 50, window_context=context)  # cores of 50
        stitched = embedder.embed([long])[0]
        errors.append(np.abs(stitched[1:] - unsplit[1:]).max())
        np.testing.assert_allclose(stitched[0], unsplit[0], atol=1e-5)  # layer 0 is context-free
        # longer than a core, no longer than a window: one piece, every layer as the biLM gives it unwindowed
        for length in (51, 2 * context + 50):
            short = long[:length]
            np.testing.assert_allclose(embedder.embed([short])[0], _direct(bilm, short), atol=1e-5, rtol=0)
    assert errors[0] > errors[1] > errors[2]


def test_tfhub_outputs_have_the_module_names_and_meanings(bilm, sentences):
    embedder = Embedder(bilm)
    full = embedder.embed([*sentences[:3], []])
    outputs = embedder.embed_tfhub([*sentences[:3], []])
    for layers, out in zip(full, outputs, strict=True):
        assert set(out) == {"word_emb", "lstm_outputs1", "lstm_outputs2", "elmo", "default"}
        np.testing.assert_array_equal(out["word_emb"], layers[0, :, :16])
        np.testing.assert_array_equal(out["lstm_outputs1"], layers[1])
        np.testing.assert_array_equal(out["lstm_outputs2"], layers[2])
        np.testing.assert_allclose(out["elmo"], layers.mean(axis=0), atol=1e-6)
        assert out["default"].shape == (32,)
    np.testing.assert_allclose(outputs[0]["default"], full[0].mean(axis=0).mean(axis=0), atol=1e-6)
    assert not outputs[3]["default"].any()


def test_stateless_by_default_so_repeats_give_identical_vectors(bilm, sentences):
    embedder = Embedder(bilm)
    first = embedder.embed(sentences[:4])
    embedder.embed(sentences[4:20])
    again = embedder.embed(sentences[:4])
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)


def test_bad_arguments_are_named(bilm):
    embedder = Embedder(bilm)
    with pytest.raises(ValueError, match="layers is 'bottom'"):
        embedder.embed([["a"]], "bottom")
    with pytest.raises(ValueError, match="2 mixing weights; the model has 3 layers"):
        embedder.embed([["a"]], [0.5, 0.5])
    with pytest.raises(TypeError, match="must hold strings"):
        embedder.embed([["a", 3]])
    with pytest.raises(ValueError, match="batch_size is 0"):
        embedder.embed([["a"]], batch_size=0)
    with pytest.raises(ValueError, match="must exceed 2 x window_context"):
        Embedder(bilm, max_window_tokens=10, window_context=5)
    with pytest.raises(ValueError, match="window_context be 0 or more"):  # a window would start after its core
        Embedder(bilm, max_window_tokens=10, window_context=-1)
    with pytest.raises(ValueError, match="bucket_batches is 0"):  # it read the whole input before a first answer
        Embedder(bilm, bucket_batches=0)
    # Numbers that are not whole failed only at a long sentence (or a full cache), or were taken (True as 1)
    for name, value in (("max_window_tokens", 2.5), ("window_context", 1.5), ("bucket_batches", 1.5),
                        ("token_cache_size", 1.5), ("max_window_tokens", "256"), ("max_window_tokens", True)):
        with pytest.raises(TypeError, match=f"{name} is {value!r}; expected a whole number"):
            Embedder(bilm, **{name: value})
    with pytest.raises(ValueError, match="token_cache_size is -1; expected 0 \\(no cache\\) or more"):
        Embedder(bilm, token_cache_size=-1)
    numpy_numbers = Embedder(bilm, max_window_tokens=np.int64(20), window_context=np.int32(5))
    assert json.loads(json.dumps(numpy_numbers.reading))["max_window_tokens"] == 20  # kept as int: JSON records it
    with pytest.raises(TypeError, match="device is None; name one"):  # PyTorch read it as the CPU
        Embedder(bilm).to(None)
    with pytest.raises(FileNotFoundError, match="neither a directory nor a shipped model"):
        Embedder.load("no-such-model")


@pytest.mark.parametrize("weights", [[1.0, 1.0, -1.0], [0.5, 1.0, -0.5], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
def test_weights_summing_to_one_with_a_one_are_mixed_not_taken_as_one_layer(bilm, sentences, weights):
    embedder = Embedder(bilm)
    full = embedder.embed(sentences[:2], "all")
    for layers, got in zip(full, embedder.embed(sentences[:2], weights), strict=True):
        expected = weights[0] * layers[0] + weights[1] * layers[1] + weights[2] * layers[2]
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-6)


@pytest.mark.parametrize("weights", [[float("nan"), 0.0, 1.0], [0.0, float("inf"), 1.0], [0.0, 1.0, -1e400],
                                     [1e39, 0.0, 0.0]])
def test_nan_and_infinite_mixing_weights_are_refused(bilm, weights):
    with pytest.raises(ValueError, match=r"layers is \[.*\]; mixing weights must be finite float32 numbers"):
        Embedder(bilm).embed([["a"]], weights)


@pytest.mark.filterwarnings("ignore:.*to a meta parameter")  # the copy on "meta" holds no weights, as it should
def test_to_returns_the_embedder_and_copies_a_passed_bilm_rather_than_moving_it(bilm):
    embedder = Embedder(bilm)
    assert embedder.bilm is bilm  # on its own device the passed biLM is used as it is
    assert embedder.to("cpu") is embedder and embedder.bilm is bilm and embedder.device == torch.device("cpu")
    embedder.to("meta")  # a device with no data, so the move can be seen without a GPU
    assert embedder.bilm is not bilm and embedder.device == torch.device("meta")
    assert all(p.device.type == "meta" for p in embedder.bilm.parameters())
    assert all(p.device.type == "cpu" for p in bilm.parameters())
    copied = Embedder(bilm, device="meta")
    assert copied.bilm is not bilm and all(p.device.type == "cpu" for p in bilm.parameters())
    double = copy.deepcopy(bilm).double()
    assert all(p.dtype == torch.float64 for p in Embedder(double, device="meta").bilm.parameters())  # dtype kept


def test_a_loaded_bilm_is_the_embedders_own_and_moves_in_place(fixture_dir):
    embedder = Embedder.load(str(fixture_dir))
    own = embedder.bilm
    assert embedder.to("meta").bilm is own and all(p.device.type == "meta" for p in own.parameters())


def test_a_passed_bilm_keeps_its_weights_and_training_mode_and_gives_the_eval_vectors(bilm, sentences, fixture_dir):
    training = load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5").train()
    before = {name: tensor.clone() for name, tensor in training.state_dict().items()}
    got = Embedder(training).embed(sentences[:4])
    assert training.training
    for name, tensor in training.state_dict().items():
        assert torch.equal(tensor, before[name]), name
    for a, b in zip(got, Embedder(bilm).embed(sentences[:4]), strict=True):
        np.testing.assert_array_equal(a, b)


def test_an_unknown_device_is_refused_by_name(bilm):
    with pytest.raises(ValueError, match="device 'gpu' is not available here"):
        Embedder(bilm, device="gpu")
    with pytest.raises(ValueError, match="device 'gpu' is not available here"):
        Embedder(bilm).to("gpu")


@pytest.mark.parametrize("batch_size", [2.5, 2.0, "8", True, np.True_, None])
def test_a_batch_size_that_is_not_a_whole_number_is_refused_by_name_at_the_call(bilm, batch_size):
    """A float or a str failed deep inside with an unrelated TypeError (iter_embed's only at its first next, once a
    chunk was read); True ran as 1."""
    embedder = Embedder(bilm)
    for call in (embedder.encode, embedder.embed, embedder.iter_embed, embedder.embed_tfhub):
        with pytest.raises(TypeError, match=f"batch_size is {batch_size!r}; expected a whole number"):
            call([["a"]], batch_size=batch_size)  # iter_embed's generator is never started: refused at the call


def test_a_numpy_integer_batch_size_is_taken_as_its_value(bilm, sentences):
    embedder = Embedder(bilm)
    for got, expected in zip(embedder.embed(sentences[:6], batch_size=np.int64(3)),
                             embedder.embed(sentences[:6], batch_size=3), strict=True):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("model", ["en", Path("models/en")])
def test_a_model_name_or_directory_given_to_the_constructor_points_to_load(model):
    """sentence-transformers' ``SentenceTransformer("name")``: here it failed on 'str' object has no attribute
    'parameters'."""
    with pytest.raises(TypeError, match=rf"Embedder takes a BiLM; .* use Embedder\.load\('{model}'\)"):
        Embedder(model)
    with pytest.raises(TypeError, match="Embedder takes a BiLM; got a dict"):
        Embedder({})


def test_bytes_and_none_are_refused_by_name_at_the_call(bilm):
    """Bytes iterate as numbers (b'hello' was refused as a sentence of tokens 104, 101, ...), and None failed inside
    the loop with 'NoneType' object is not iterable."""
    embedder = Embedder(bilm)
    for call in (embedder.encode, embedder.embed, embedder.iter_embed, embedder.embed_tfhub):
        with pytest.raises(TypeError, match=r"sentences is bytes \(b'hello'\); decode it to a str first"):
            call(b"hello")
        with pytest.raises(TypeError, match="sentences is None; expected"):
            call(None)
    with pytest.raises(TypeError, match=r"a sentence is bytearray \(b'hello'\); decode it"):
        embedder.encode(["fine", bytearray(b"hello")])
    with pytest.raises(TypeError, match="a sentence is None; expected a str or a list of tokens"):
        embedder.embed([["fine"], None])


def test_the_layers_held_for_long_documents_do_not_grow_with_their_number(bilm, sentences):
    """Every layer of a chunk's sentences is allocated at its start and held until it is done, and a chunk was
    4 x 2 = 8 sentences however long: 8 documents of 60 tokens held 480 tokens' layers, 4 held 240 (512 documents
    of 10,000 tokens of en: 15 GiB). Now a chunk closes at the end of a batch once it holds 8 x 24 = 192 tokens:
    here one batch of 4 documents, whatever their number. The results do not depend on where chunks close."""
    words = [token for sentence in sentences for token in sentence]
    documents = [(words[start:] + words[:start])[:60] for start in range(0, 80, 10)]
    embedder = Embedder(bilm, max_window_tokens=24, window_context=4, bucket_batches=2)
    chunk_tokens: list[int] = []
    embed_chunk = embedder._embed_chunk

    def counting_embed_chunk(chunk: list[list[str]], batch_size: int) -> list[np.ndarray]:
        layers = embed_chunk(chunk, batch_size)
        chunk_tokens.append(sum(array.shape[1] for array in layers))  # the layers allocated for the chunk
        return layers

    embedder._embed_chunk = counting_embed_chunk
    held = {}
    for n_documents in (4, 8):
        chunk_tokens.clear()
        pooled = embedder.encode(documents[:n_documents], layers="all", pooling="mean", batch_size=4)
        held[n_documents] = max(chunk_tokens)
    assert held == {4: 240, 8: 240}
    for document, row in zip(documents, pooled, strict=True):  # each alone: a chunk of one document
        alone = embedder.encode([document], layers="all", pooling="mean", batch_size=4)[0]
        np.testing.assert_allclose(row, alone, rtol=1e-6, atol=1e-6)


def test_threads_sharing_an_embedder_run_its_memory_trimmer_one_at_a_time(bilm, sentences):
    """The trimmer keeps the RSS it last saw: read by one thread while another reset it to None, it failed with a
    TypeError (None + int). A trimmer that takes 10 ms a call shows whether two threads are ever inside at once."""
    embedder = Embedder(bilm)
    inside, most_inside, counting = 0, 0, threading.Lock()

    class SlowTrimmer:
        def after_batch(self) -> None:
            nonlocal inside, most_inside
            with counting:
                inside += 1
                most_inside = max(most_inside, inside)
            time.sleep(0.01)
            with counting:
                inside -= 1

    embedder._memory = SlowTrimmer()
    threads = [threading.Thread(target=embedder.embed, args=(sentences,), kwargs={"batch_size": 2}) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most_inside == 1
