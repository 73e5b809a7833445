"""Embedder.encode against embed's arrays, pooled and mixed by hand."""

import numpy as np
import pytest
import torch

from elmo.embedder import Embedder, cast_vectors


@pytest.fixture
def embedder(fixture_bilm) -> Embedder:
    return Embedder(fixture_bilm)


@pytest.fixture
def sentences(fixture_sentences) -> list[list[str]]:
    return [*fixture_sentences[:6], []]  # an empty sentence among them


def _pooled_by_hand(array: np.ndarray, pooling: str) -> np.ndarray:
    """``array`` (..., T, D) pooled over T with plain sums and indexing; zeros when T is 0."""
    n_tokens = array.shape[-2]
    if n_tokens == 0:
        return np.zeros(array.shape[:-2] + array.shape[-1:], np.float32)
    rows = [array[..., t, :] for t in range(n_tokens)]
    if pooling == "mean":
        return sum(rows) / n_tokens
    if pooling == "max":
        return np.maximum.reduce(rows)
    return rows[0] if pooling == "first" else rows[-1]


@pytest.mark.parametrize("pooling", ["mean", "max", "first", "last"])
@pytest.mark.parametrize("layers", ["top", "all", [0.2, -1.0, 3.5]])
def test_pooled_encode_is_embeds_arrays_pooled_by_hand(embedder, sentences, pooling, layers):
    arrays = embedder.embed(sentences, layers)
    matrix = embedder.encode(sentences, layers=layers, pooling=pooling)
    expected_shape = (len(sentences), 3, 32) if layers == "all" else (len(sentences), 32)
    assert matrix.shape == expected_shape and matrix.dtype == np.float32
    for array, row in zip(arrays, matrix, strict=True):
        np.testing.assert_allclose(row, _pooled_by_hand(array, pooling), rtol=1e-6, atol=1e-6)
    assert not matrix[-1].any()  # the empty sentence


def test_unpooled_encode_is_embeds_list_and_the_default_is_the_even_mix(embedder, sentences):
    for got, expected in zip(embedder.encode(sentences), embedder.embed(sentences, "all"), strict=True):
        np.testing.assert_allclose(got, expected.mean(axis=0), rtol=1e-6, atol=1e-6)


def test_layer_index_equals_its_one_hot_weights_and_negative_counts_from_the_top(embedder, sentences):
    all_layers = embedder.embed(sentences[:3], "all")
    for index in range(-3, 3):
        one_hot = np.eye(3)[index].tolist()
        by_index = embedder.encode(sentences[:3], layers=index)
        for got, weighted, full in zip(by_index, embedder.embed(sentences[:3], one_hot), all_layers, strict=True):
            np.testing.assert_array_equal(got, weighted)
            np.testing.assert_array_equal(got, full[index % 3])


def test_a_bare_string_is_one_sentence_equal_to_the_one_element_list(embedder):
    text = "the bank of the river"
    for pooling in (None, "mean"):
        one = embedder.encode(text, pooling=pooling)
        listed = embedder.encode([text], pooling=pooling)[0]
        assert one.shape == ((5, 32) if pooling is None else (32,))
        np.testing.assert_array_equal(one, listed)
    vectors, tokens = embedder.encode(text, return_tokens=True)
    assert tokens == ["the", "bank", "of", "the", "river"] and vectors.shape == (5, 32)


def test_a_sentence_given_as_an_iterator_of_tokens_is_read_once_and_whole(embedder):
    tokens = ["the", "bank", "of", "the", "river"]
    from_iterator = embedder.encode([iter(tokens), map(str.lower, ["THE", "RIVER"])])
    assert [vectors.shape for vectors in from_iterator] == [(5, 32), (2, 32)]
    np.testing.assert_array_equal(from_iterator[0], embedder.encode([tokens])[0])


def test_float16_is_float32_rounded(embedder, sentences):
    for pooling in (None, "mean"):
        full = embedder.encode(sentences, pooling=pooling)
        for dtype in (np.float16, "float16", torch.float16):
            half = embedder.encode(sentences, pooling=pooling, dtype=dtype)
            for a, b in zip(half if pooling is None else [half], full if pooling is None else [full], strict=True):
                assert a.dtype == np.float16
                # float16 keeps 11 significant bits (relative error <= 2**-11); below 2**-14 its steps are 2**-24
                np.testing.assert_allclose(a.astype(np.float32), b, rtol=1e-3, atol=2**-24)


def test_normalizing_vectors_whose_float32_squares_overflow_still_gives_unit_vectors(embedder, sentences):
    unit = embedder.encode(sentences[:2], layers=[1e20, 0.0, 0.0], pooling="mean", normalize=True)
    np.testing.assert_allclose(np.linalg.norm(unit.astype(np.float64), axis=-1), 1.0, rtol=1e-6)


def test_flags_that_are_not_booleans_are_refused_not_read_as_true(embedder):
    for flag in ("normalize", "return_tokens", "show_progress_bar"):
        with pytest.raises(TypeError, match=f"{flag} is 'no'; expected True or False"):
            embedder.encode(["a b"], **{flag: "no"})
    for call in (embedder.embed, embedder.iter_embed):  # refused at the call, before a sentence is read
        with pytest.raises(TypeError, match=r"progress is \[0\]; expected True or False"):
            call(["a b"], progress=[0])


@pytest.mark.parametrize(("sentences", "message"), [
    ([["a", ""]], r"token 1 \(''\) of the sentence \['a', ''\] is empty or only white space"),
    ([["a", "b"], [" \t", "b"]], r"token 0 \(' \\t'\) of the sentence .* is empty or only white space"),
    ([["a", "x\ud800"]], r"token 1 \('x\\ud800'\) .* holds the lone surrogate U\+D800"),
    ([["a", "\u200b \u2060"]], r"token 1 .* holds only invisible formatting \(U\+200B U\+2060\), which raw text "
                                r"loses"),  # search and /v1/similarity read it as no word
    ("a \ud800 b", r"token 1 \('\\ud800'\) .* holds the lone surrogate U\+D800"),
    ([["bell\x07", "ok"]], r"token 0 \('bell\\x07'\) .* holds the control character U\+0007; a token must be "
                            r"printable text"),  # refused as elmo embed --text-field refuses it
])
def test_a_token_without_text_is_refused_not_embedded_as_the_empty_word(embedder, sentences, message):
    """A blank token, or one whose lone surrogate UTF-8 cannot hold (it was dropped), got the vector of the
    empty word (the character CNN's start and end marks alone), silently."""
    for call in (embedder.encode, embedder.embed, lambda given: list(embedder.iter_embed(given))):
        with pytest.raises(ValueError, match=message):
            call(sentences if not isinstance(sentences, str) else [sentences])
    assert len(embedder.encode([["New York", "b"]])[0]) == 2  # a token may hold spaces inside its text


def test_iter_embed_checks_its_arguments_when_called_not_at_the_first_vector(embedder):
    for arguments, error in ((("the bank",), TypeError), (([["a"]], 7), ValueError), (([["a"]], "all", 0), ValueError)):
        with pytest.raises(error):
            embedder.iter_embed(*arguments)  # no next(): the generator of before raised nothing here


def test_float16_overflow_is_named_by_sentence_each_time(embedder, sentences):
    for _ in range(2):  # NumPy's own warning about the cast is shown once a process
        with pytest.warns(RuntimeWarning, match=r"the vectors of sentence\(s\) 0, 1 \(counting from 0\) are beyond "
                                                r"float16.s range, written as inf"):
            pooled = embedder.encode(sentences[:2], layers=[1e6, 0.0, 0.0], pooling="mean", dtype="float16")
        assert np.isinf(pooled).any()


def test_a_float16_overflow_names_its_largest_magnitude_per_line_and_groups_by_reason():
    cast, problem = cast_vectors(np.array([1.0, -7e4], dtype=np.float32), np.dtype(np.float16))
    assert np.isinf(cast[1]) and problem is not None
    assert str(problem) == ("beyond float16's range (largest magnitude 7e+04), written as inf; float32 holds them")
    _, other = cast_vectors(np.array([9e5], dtype=np.float32), np.dtype(np.float16))
    assert other is not None and other.reason == problem.reason and other.largest == 9e5
    assert cast_vectors(np.array([1.0], dtype=np.float32), np.dtype(np.float16))[1] is None


def test_weights_that_overflow_float32_are_named_by_sentence(embedder, sentences):
    """Any finite float32 weight is a valid layer choice, but 3e38 x 3 overflows float32: the vectors came back inf
    and NaN (mean of inf and -inf) with only NumPy's warning, which names no sentence."""
    with pytest.warns(RuntimeWarning, match=r"the vectors of sentence\(s\) 0, 1 \(counting from 0\) are not finite "
                                            r"\(inf or NaN\): the mixing weights make them overflow float32"):
        pooled = embedder.encode(sentences[:2], layers=[3e38, 3e38, 3e38], pooling="mean")
    assert not np.isfinite(pooled).all()


def test_a_layer_returned_alone_holds_its_own_memory_not_every_layers(embedder, sentences):
    """A view of the sentence's (L + 1, T, D) array kept every layer alive behind each returned one."""
    for vectors in (embedder.encode(sentences[:2], layers="top"), embedder.embed(sentences[:2], 1)):
        assert all(array.base is None or array.base.nbytes == array.nbytes for array in vectors)


def test_normalize_gives_unit_vectors_in_the_same_directions_and_keeps_zeros(embedder, sentences):
    for pooling in ("mean", None):
        raw = embedder.encode(sentences, pooling=pooling)
        unit = embedder.encode(sentences, pooling=pooling, normalize=True)
        for r, u in zip(raw if pooling is None else [raw], unit if pooling is None else [unit], strict=True):
            norms = np.sqrt((r.astype(np.float64) ** 2).sum(axis=-1))
            nonzero = norms > 0
            np.testing.assert_allclose(np.sqrt((u.astype(np.float64) ** 2).sum(axis=-1))[nonzero], 1.0, rtol=1e-6)
            np.testing.assert_allclose(u[nonzero] * norms[nonzero, None], r[nonzero], rtol=1e-5, atol=1e-6)
            assert not u[~nonzero].any()
    assert not unit[-1].shape[0]  # the empty sentence has no token vectors to normalize
    assert not embedder.encode([[]], pooling="max", normalize=True).any()


def test_torch_output_equals_the_numpy_output(embedder, sentences):
    for pooling, dtype in [("mean", np.float32), (None, np.float32), ("last", np.float16)]:
        arrays = embedder.encode(sentences, pooling=pooling, dtype=dtype)
        tensors = embedder.encode(sentences, pooling=pooling, dtype=dtype, output="torch")
        if pooling is None:
            assert isinstance(tensors, list) and len(tensors) == len(arrays)
        else:
            arrays, tensors = [arrays], [tensors]
        for array, tensor in zip(arrays, tensors, strict=True):
            assert isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu"
            np.testing.assert_array_equal(tensor.numpy(), array)


def test_returned_tokens_are_the_rows_of_the_vectors(fixture_bilm):
    embedder = Embedder(fixture_bilm, tokenizer="english")
    given = ["Chico", "Ruiz", "made", "a", "play"]
    vectors, tokens = embedder.encode(["Alusik 's grounder", "Don't stop.", given, ""], return_tokens=True)
    assert tokens == [["Alusik", "'s", "grounder"], ["Don", "'t", "stop", "."], given, []]
    assert [v.shape[0] for v in vectors] == [3, 4, 5, 0]
    pooled, pooled_tokens = embedder.encode(iter(["a b", "c"]), pooling="first", return_tokens=True)
    assert pooled_tokens == [["a", "b"], ["c"]] and pooled.shape == (2, 32)


def test_no_sentences_give_an_empty_matrix_or_list(embedder):
    assert embedder.encode([], pooling="mean").shape == (0, 32)
    assert embedder.encode([], pooling="mean", layers="all", output="torch").shape == (0, 3, 32)
    assert embedder.encode([]) == []


def test_the_progress_bar_counts_sentences_out_of_their_number_and_is_off_without_a_terminal(embedder, capsys):
    sentences = [["word"]] * 9
    embedder.encode(sentences, batch_size=2)  # long enough, but stderr is no terminal here
    assert capsys.readouterr().err == ""
    embedder.encode(sentences, batch_size=2, show_progress_bar=True)
    assert "9/9" in capsys.readouterr().err
    embedder.embed(iter(sentences), progress=True)  # no length: a count without a total
    err = capsys.readouterr().err
    assert "9 sentences" in err and "/9" not in err


def _untouched(sentences):
    """Yields ``sentences``, failing the test if anything reads it."""
    pytest.fail("the input was read before the bad argument was refused")
    yield from sentences


@pytest.mark.parametrize(("options", "message"), [
    ({"pooling": "median"}, "pooling is 'median'; expected one of mean, max, first, last or None"),
    ({"output": "jax"}, "output is 'jax'; expected 'numpy' or 'torch'"),
    ({"dtype": np.float64}, "dtype is <class 'numpy.float64'>; expected float32 or float16"),
    ({"dtype": "half-ish"}, "dtype is 'half-ish'; expected float32 or float16"),
    ({"layers": 3}, r"layers is 3; a layer index must be in -3..2 \(the model has 3 layers\)"),
    ({"layers": -4}, r"layers is -4; a layer index must be in -3..2"),
    ({"layers": True}, "layers is True; expected 'all', 'top', 'average', a layer index or mixing weights"),
    ({"layers": [1.0, 0.0]}, "2 mixing weights; the model has 3 layers"),
    ({"batch_size": 0}, "batch_size is 0; expected at least 1"),
])
def test_bad_arguments_are_refused_by_name_before_the_input_is_read(embedder, options, message):
    with pytest.raises(ValueError, match=message):
        embedder.encode(_untouched([["a"]]), **options)


def test_embed_refuses_a_bare_string_rather_than_embedding_its_characters(embedder):
    with pytest.raises(TypeError, match=r"sentences is a str \('The bank'\); embed takes a list of sentences"):
        embedder.embed("The bank")
    with pytest.raises(TypeError, match="embed takes a list of sentences"):
        next(embedder.iter_embed("The bank"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_on_cuda_encode_gives_the_cpu_vectors_and_the_passed_bilm_stays_on_the_cpu(fixture_bilm, sentences):
    embedder = Embedder(fixture_bilm)
    on_cpu = embedder.encode(sentences, layers="all", pooling="mean")
    assert embedder.to("cuda") is embedder and embedder.device == torch.device("cuda", 0)
    np.testing.assert_allclose(embedder.encode(sentences, layers="all", pooling="mean"), on_cpu, atol=1e-4)
    assert all(parameter.device.type == "cpu" for parameter in fixture_bilm.parameters())
    np.testing.assert_allclose(embedder.to("cpu").encode(sentences, layers="all", pooling="mean"), on_cpu, atol=1e-6)


def test_raw_text_is_cleaned_as_elmo_embed_and_the_trainer_read_it(embedder, tmp_path):
    """A byte-order mark became a token of its own and a control character joined or made tokens, so the API
    gave other tokens and vectors than `elmo embed` and the trainer for the same line."""
    from elmo.embed_job.source import EmbedReport, read_lines
    from elmo.training.corpus import Corpus

    raw = "\ufeffThe bank closed\x7fearly\x01today ."
    path = tmp_path / "line.txt"
    path.write_text(raw + "\n", encoding="utf-8")
    [line] = read_lines(path, EmbedReport())
    expected = ["The", "bank", "closed", "early", "today", "."]
    assert embedder.tokenize(raw) == embedder.tokenize(line) == expected
    assert list(Corpus([str(path)]).sentences()) == [expected]
    vectors, tokens = embedder.encode(raw, return_tokens=True)
    assert tokens == expected
    np.testing.assert_array_equal(vectors, embedder.encode([expected])[0])


def test_given_tokens_are_cleaned_as_raw_text_is_and_stay_one_token_each(embedder):
    """Tokens from another tool may hold a decomposed accent or an emoji's variation selector: the model learnt the
    cleaned form (its training text went through ``clean_text``), so a given token reaches it cleaned too."""
    given = ["cafe\u0301", "I", "\u2764\ufe0f", "co\u00adoperate"]
    cleaned = ["caf\u00e9", "I", "\u2764", "cooperate"]
    vectors, tokens = embedder.encode([given], layers="all", return_tokens=True)
    assert tokens == [cleaned]
    np.testing.assert_array_equal(vectors[0], embedder.encode([cleaned], layers="all")[0])
    assert embedder.encode([given], layers="all")[0].shape[1] == len(given)
