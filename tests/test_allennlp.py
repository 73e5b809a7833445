"""AllenNLP 0.9's ELMo API (elmo.allennlp) on AllenNLP's own fixture (tests/fixtures/elmo).

The fixture's expected outputs (lm_embeddings_k.hdf5) are bilm-tf's top layer computed statefully, batch i holding
sentence i of each list with the LSTM state carried from batch to batch (tests/test_fixture_parity.py). Batch 0
starts from a zero state, so it is also the stateless reference this API is checked against.
"""

import io
import json
import logging
import re
import shutil

import h5py
import numpy as np
import pytest
import torch
from float64_reference import Reference

from elmo.allennlp import Elmo, ElmoEmbedder, batch_to_ids
from elmo.bilm import BiLM
from elmo.config import BiLMConfig
from elmo.embedder import Embedder
from elmo.model_dir import ModelDir
from elmo.weights import save_bilm

ORIGINAL = "elmo_2x4096_512_2048cnn_2xhighway"  # AllenNLP's names for the original model's files


@pytest.fixture(scope="module")
def files(fixture_dir):
    return str(fixture_dir / "options.json"), str(fixture_dir / "lm_weights.hdf5")


@pytest.fixture(scope="module")
def embedder(files):
    return ElmoEmbedder(*files)


@pytest.fixture(scope="module")
def first_batch(fixture_dir):
    """Sentence 0 of each of the fixture's three lists: the batch bilm-tf ran from a zero state."""
    lists = json.loads((fixture_dir / "sentences.json").read_text())
    return [sentences[0].split() for sentences in lists]


def _expected_top_layer(fixture_dir, k):
    with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as reference:
        forward_backward = reference["0"][...]
    return np.concatenate([forward_backward[0], forward_backward[1]], axis=-1)


def test_embed_batch_gives_each_sentence_its_layers_and_the_top_one_matches_bilm_tf(embedder, fixture_dir,
                                                                                    first_batch):
    arrays = embedder.embed_batch(first_batch)
    assert [array.shape for array in arrays] == [(3, len(tokens), 32) for tokens in first_batch]
    assert all(array.dtype == np.float32 for array in arrays)
    for k, array in enumerate(arrays):
        np.testing.assert_allclose(array[2], _expected_top_layer(fixture_dir, k), atol=1e-5)


def test_layer_0_is_the_context_free_token_vector_in_both_halves(embedder):
    river = embedder.embed_sentence(["the", "bank", "of", "the", "river"])
    money = embedder.embed_sentence(["money", "in", "the", "bank"])
    np.testing.assert_array_equal(river[0, :, :16], river[0, :, 16:])
    np.testing.assert_allclose(river[0, 1], money[0, 3], atol=1e-6)  # "bank" alone: the same in both
    assert np.abs(river[2, 1] - money[2, 3]).max() > 1e-3  # "bank" in context: not the same


def test_a_sentences_vectors_do_not_depend_on_the_batch_or_on_earlier_calls(embedder, fixture_sentences):
    alone = [embedder.embed_sentence(tokens) for tokens in fixture_sentences[:6]]
    together = embedder.embed_batch(fixture_sentences[:6])
    again = list(embedder.embed_sentences(fixture_sentences[:6], batch_size=4))
    for single, batched, repeated in zip(alone, together, again, strict=True):
        np.testing.assert_allclose(batched, single, atol=1e-5)
        np.testing.assert_allclose(repeated, single, atol=1e-5)


def test_embed_sentences_agrees_with_the_embedders_lanes_and_token_cache(embedder, fixture_sentences):
    expected = Embedder(embedder.bilm).embed(fixture_sentences, "all", batch_size=5)
    got = list(embedder.embed_sentences(iter(fixture_sentences), batch_size=7))
    assert len(got) == len(fixture_sentences)
    for ours, theirs in zip(got, expected, strict=True):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_batch_to_embeddings_stacks_layers_per_sentence_with_a_mask_of_the_lengths(embedder, first_batch):
    activations, mask = embedder.batch_to_embeddings(first_batch)
    lengths = [len(tokens) for tokens in first_batch]
    assert activations.shape == (3, 3, max(lengths), 32)
    assert activations.is_contiguous()  # AllenNLP's torch.cat; a transposed view refused .view(batch, -1)
    assert mask.dtype == torch.int64
    assert mask.sum(dim=1).tolist() == lengths
    assert torch.equal(mask, (torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]).long())
    assert activations[1, :, lengths[1]:].abs().max() == 0  # padding is zero


def test_each_sentences_array_owns_its_memory_and_does_not_keep_the_padded_batch(embedder):
    long, short = ["w"] * 40, ["a", "b"]
    for arrays in (embedder.embed_batch([long, short]), list(embedder.embed_sentences([long, short], batch_size=2))):
        assert [array.shape for array in arrays] == [(3, 40, 32), (3, 2, 32)]
        for array in arrays:
            assert array.base is None and array.flags.c_contiguous  # a view would hold the (2, 3, 40, 32) batch
    np.testing.assert_array_equal(arrays[1], embedder.embed_sentence(short))


def test_a_model_with_another_token_width_embeds_as_the_embedder_does(fixture_dir, tmp_path):
    """``max_characters_per_token`` is the model's: 30 here, where AllenNLP's models all had 50."""
    options = json.loads((fixture_dir / "options.json").read_text())
    options["char_cnn"]["max_characters_per_token"] = 30
    (tmp_path / "given.json").write_text(json.dumps(options))
    bilm = BiLM(BiLMConfig.load(tmp_path / "given.json"))
    save_bilm(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    sentences = [["hello", "world"], ["a", "token-longer-than-thirty-characters-is-cut"]]
    got = ElmoEmbedder(tmp_path / "options.json", tmp_path / "weights.hdf5").embed_batch(sentences)
    for ours, theirs in zip(got, Embedder(bilm).embed(sentences, "all"), strict=True):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_an_empty_sentence_gives_an_array_of_no_tokens(embedder):
    arrays = embedder.embed_batch([["a", "b"], []])
    assert [array.shape for array in arrays] == [(3, 2, 32), (3, 0, 32)]


def test_batch_to_ids_writes_each_tokens_bytes_between_word_markers_shifted_by_one(embedder):
    ids = batch_to_ids([["ab", "é"], ["c"]])
    assert ids.shape == (2, 2, 50) and ids.dtype == torch.int64
    # AllenNLP's ELMoCharacterMapper: begin-of-word 258, UTF-8 bytes, end-of-word 259, padding 260; all ids + 1.
    assert ids[0, 0].tolist() == [259, ord("a") + 1, ord("b") + 1, 260] + [261] * 46
    assert ids[0, 1].tolist()[:4] == [259, 0xC3 + 1, 0xA9 + 1, 260]
    assert ids[1, 1].abs().sum() == 0  # a padding token is all zeros
    with pytest.raises(TypeError, match=r"sentence 0, token 1 is 5; expected a string"):
        batch_to_ids([["a", 5]])


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_elmo_with_a_one_hot_mix_gives_that_layer_of_the_embedder(files, embedder, first_batch, layer):
    scalars = [-9e10] * 3
    scalars[layer] = 1.0
    elmo = Elmo(*files, num_output_representations=1, dropout=0.0, scalar_mix_parameters=scalars)
    output = elmo(batch_to_ids(first_batch))
    expected = embedder.embed_batch(first_batch)
    assert output["mask"].sum(dim=1).tolist() == [len(tokens) for tokens in first_batch]
    for row, array in enumerate(expected):
        np.testing.assert_allclose(output["elmo_representations"][0][row, : array.shape[1]].detach().numpy(),
                                   array[layer], atol=1e-6)


def test_elmo_representations_are_gamma_times_softmax_weighted_layers(files, embedder, first_batch):
    elmo = Elmo(*files, num_output_representations=2, dropout=0.0)
    assert elmo.get_output_dim() == 32
    with torch.no_grad():
        elmo.elmo.mixes[1].scalars.copy_(torch.tensor([0.5, -1.0, 2.0]))
        elmo.elmo.mixes[1].gamma.fill_(1.5)
        output = elmo(batch_to_ids(first_batch))
    representations = output["elmo_representations"]
    assert len(representations) == 2 and all(r.shape == (3, 53, 32) for r in representations)
    weights = np.exp([0.5, -1.0, 2.0]) / np.exp([0.5, -1.0, 2.0]).sum()
    for row, layers in enumerate(embedder.embed_batch(first_batch)):
        length = layers.shape[1]
        np.testing.assert_allclose(representations[0][row, :length].numpy(), layers.mean(axis=0), atol=1e-5)
        np.testing.assert_allclose(representations[1][row, :length].numpy(),
                                   1.5 * np.tensordot(weights, layers, axes=1), atol=1e-5)
        assert representations[1][row, length:].abs().sum() == 0


def _allennlp_elmo(fixture_dir, sentences, scalars, gamma, layer_norm):
    """AllenNLP 0.9's ``Elmo`` mix of the batch ``(batch, T + 2, D)`` and its mask, from the float64 reference's
    layers with ``<S>``/``</S>``: each layer normalized by the mean and variance of every unmasked value of the
    batch, boundaries included (its ``ScalarMix._do_layer_norm``), then ``gamma * sum_j softmax(s)_j h_j``."""
    reference = Reference.from_files(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")
    bounded = [reference.embed(tokens, keep_boundaries=True)[0] for tokens in sentences]  # (L + 1, n + 2, D)
    positions = max(len(tokens) for tokens in sentences) + 2
    layers = np.zeros((bounded[0].shape[0], len(sentences), positions, bounded[0].shape[2]))
    mask = np.zeros((len(sentences), positions), dtype=bool)
    for row, sentence_layers in enumerate(bounded):
        layers[:, row, : sentence_layers.shape[1]] = sentence_layers
        mask[row, : sentence_layers.shape[1]] = True
    if layer_norm:
        kept = mask[None, :, :, None]
        count = mask.sum() * layers.shape[-1]
        mean = (layers * kept).sum(axis=(1, 2, 3), keepdims=True) / count
        variance = (((layers * kept - mean) * kept) ** 2).sum(axis=(1, 2, 3), keepdims=True) / count
        layers = (layers - mean) / np.sqrt(variance + 1e-12)
    weights = np.exp(scalars) / np.exp(scalars).sum()
    return gamma * np.tensordot(weights, layers, axes=1), mask


@pytest.mark.parametrize("layer_norm", [False, True])
@pytest.mark.parametrize("keep_boundaries", [False, True])
def test_elmo_equals_allennlps_mix_over_tokens_and_boundaries_computed_in_float64(files, fixture_dir, first_batch,
                                                                                  layer_norm, keep_boundaries):
    scalars, gamma = np.array([0.5, -1.0, 2.0]), 1.5
    elmo = Elmo(*files, num_output_representations=1, do_layer_norm=layer_norm, dropout=0.0,
                keep_sentence_boundaries=keep_boundaries).double()
    with torch.no_grad():
        elmo.elmo.mixes[0].scalars.copy_(torch.from_numpy(scalars))
        elmo.elmo.mixes[0].gamma.fill_(gamma)
        output = elmo(batch_to_ids(first_batch))
    got, mask = output["elmo_representations"][0].numpy(), output["mask"].numpy()
    expected, bounded_mask = _allennlp_elmo(fixture_dir, first_batch, scalars, gamma, layer_norm)
    lengths = [len(tokens) for tokens in first_batch]
    if keep_boundaries:  # <S>, the tokens, </S>, padding; AllenNLP left normalized zeros at padding, here zeros
        assert got.shape == (3, max(lengths) + 2, 32) and np.array_equal(mask, bounded_mask)
        np.testing.assert_allclose(got[bounded_mask], expected[bounded_mask], rtol=0, atol=1e-10)
    else:
        assert got.shape == (3, max(lengths), 32) and mask.sum(axis=1).tolist() == lengths
        for row, length in enumerate(lengths):
            np.testing.assert_allclose(got[row, :length], expected[row, 1 : length + 1], rtol=0, atol=1e-10)
    assert not got[~mask.astype(bool)].any()


def test_elmo_mask_marks_each_rows_tokens(files):
    elmo = Elmo(*files, num_output_representations=1)
    mask = elmo(batch_to_ids([["a"], ["a", "b", "c"], []]))["mask"]
    assert mask.dtype == torch.int64
    assert mask.tolist() == [[1, 0, 0], [1, 1, 1], [0, 0, 0]]


def test_elmo_takes_any_whole_number_of_outputs_as_allennlp_did(files):
    """AllenNLP only ran range(n): a NumPy integer from a config was refused with 'expected at least 1'."""
    output = Elmo(*files, np.int64(2), dropout=0.0).eval()(batch_to_ids([["a", "b"]]))
    assert len(output["elmo_representations"]) == 2
    for wrong in (True, 2.0, 0, "2"):
        with pytest.raises(ValueError, match=f"num_output_representations is {wrong!r}; expected a whole number"):
            Elmo(*files, wrong)


@pytest.mark.parametrize("sentences", [[], [[]], [[], []]], ids=["no sentence", "one empty", "two empty"])
def test_elmo_on_a_batch_of_no_tokens_gives_empty_representations_and_mask(files, sentences):
    """reshape(-1, 0, 50) cannot size the batch, so a batch without tokens raised a RuntimeError."""
    output = Elmo(*files, 2, dropout=0.0).eval()(batch_to_ids(sentences))
    assert [tuple(mix.shape) for mix in output["elmo_representations"]] == [(len(sentences), 0, 32)] * 2
    assert tuple(output["mask"].shape) == (len(sentences), 0)


def test_elmo_keeps_extra_leading_dimensions(files, first_batch):
    elmo = Elmo(*files, num_output_representations=1, dropout=0.0)
    ids = batch_to_ids(first_batch + first_batch[::-1])
    with torch.no_grad():
        flat = elmo(ids)
        nested = elmo(ids.reshape(2, 3, *ids.shape[1:]))
    assert nested["elmo_representations"][0].shape == (2, 3, 53, 32)
    assert torch.equal(nested["mask"], flat["mask"].reshape(2, 3, 53))
    torch.testing.assert_close(nested["elmo_representations"][0].reshape(6, 53, 32),
                               flat["elmo_representations"][0], atol=1e-6, rtol=0)


def test_dropout_zeroes_some_entries_and_scales_the_rest_in_training_mode(files, first_batch):
    elmo = Elmo(*files, num_output_representations=1, dropout=0.5)
    ids = batch_to_ids(first_batch)
    with torch.no_grad():
        clean = elmo.eval()(ids)["elmo_representations"][0]
        torch.manual_seed(0)
        dropped = elmo.train()(ids)["elmo_representations"][0]
    kept = dropped != 0
    real = clean != 0
    assert 0.3 < (kept & real).sum() / real.sum() < 0.7
    torch.testing.assert_close(dropped[kept], 2 * clean[kept])


def test_frozen_bilm_gets_no_gradient_but_the_scalar_mix_does(files, first_batch):
    elmo = Elmo(*files, num_output_representations=1, dropout=0.0).train()
    elmo(batch_to_ids(first_batch))["elmo_representations"][0].sum().backward()
    assert all(not p.requires_grad and p.grad is None for p in elmo.elmo.bilm.parameters())
    mix = elmo.elmo.mixes[0]
    assert mix.scalars.grad.abs().sum() > 0 and mix.gamma.grad.abs() > 0


def test_requires_grad_lets_gradients_reach_the_bilm(files, first_batch):
    elmo = Elmo(*files, num_output_representations=1, requires_grad=True, dropout=0.0).train()
    elmo(batch_to_ids(first_batch))["elmo_representations"][0].sum().backward()
    assert elmo.elmo.bilm.token_encoder.char_embeddings.grad.abs().sum() > 0


def test_elmo_refuses_bad_arguments_by_name(files):
    with pytest.raises(ValueError, match=r"scalar_mix_parameters must be 3 finite numbers"):
        Elmo(*files, num_output_representations=1, scalar_mix_parameters=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"num_output_representations is 0"):
        Elmo(*files, num_output_representations=0)
    with pytest.raises(ValueError, match=r"expected \(batch, timesteps, 50\)"):
        Elmo(*files, num_output_representations=1)(torch.zeros((4, 50), dtype=torch.long))


def test_elmo_takes_allennlps_arguments_in_allennlps_places(files, first_batch):
    """AllenNLP 0.9: (options_file, weight_file, num_output_representations, requires_grad, do_layer_norm, dropout,
    vocab_to_cache, keep_sentence_boundaries, scalar_mix_parameters, module). A vocabulary passed 7th by position
    landed in keep_sentence_boundaries, which it switched on: every row came out with <S> and </S>, T + 2 long."""
    ids = batch_to_ids(first_batch)
    by_position = Elmo(*files, 1, False, False, 0.0, None, False, [0.0, 1.0, 0.0])(ids)
    by_name = Elmo(*files, num_output_representations=1, dropout=0.0, scalar_mix_parameters=[0.0, 1.0, 0.0])(ids)
    torch.testing.assert_close(by_position["elmo_representations"][0], by_name["elmo_representations"][0])
    assert by_position["mask"].shape == ids.shape[:2]
    with pytest.raises(ValueError, match="vocab_to_cache is not supported"):
        Elmo(*files, 1, False, False, 0.0, ["I", "ate"])
    Elmo(*files, 1, False, False, 0.0, [])  # an empty list meant no cache to AllenNLP too
    with pytest.raises(ValueError, match="module is not supported"):
        Elmo(*files, 1, module=torch.nn.Linear(1, 1))
    for flag in ("requires_grad", "do_layer_norm", "keep_sentence_boundaries"):
        with pytest.raises(TypeError, match=rf"{flag} is \['I'\]; expected True or False"):
            Elmo(*files, 1, **{flag: ["I"]})


def test_urls_and_missing_devices_are_refused_before_loading(files):
    url = f"https://allennlp.s3.amazonaws.com/models/elmo/{ORIGINAL}/{ORIGINAL}_options.json"
    with pytest.raises(ValueError, match=r"options_file is the URL .*download it"):
        ElmoEmbedder(url, files[1])
    with pytest.raises(ValueError, match=r"cuda_device is -2; expected -1"):
        ElmoEmbedder(*files, cuda_device=-2)
    for not_an_index in (True, np.True_, 0.0, "0"):
        with pytest.raises(ValueError, match=rf"cuda_device is {not_an_index!r}; expected -1"):
            ElmoEmbedder(*files, cuda_device=not_an_index)
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(ValueError, match=rf"cuda_device is {count} but this machine has {count} CUDA GPUs"):
        ElmoEmbedder(*files, cuda_device=count)


def test_a_numpy_integer_names_the_cpu_or_a_gpu(files):
    assert ElmoEmbedder(*files, cuda_device=np.int64(-1)).device == torch.device("cpu")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(ValueError, match=rf"cuda_device is {count} but this machine has {count} CUDA GPUs"):
        ElmoEmbedder(*files, cuda_device=np.int64(count))


def _write_lines(path, sentences):
    path.write_text("".join(" ".join(tokens) + "\n" for tokens in sentences), encoding="utf-8")
    return path


def test_embed_file_writes_a_dataset_per_line_and_the_sentence_index(embedder, fixture_dir, first_batch, tmp_path):
    input_path = _write_lines(tmp_path / "in.txt", first_batch)
    expected = embedder.embed_batch(first_batch)
    for output_format, select in (("all", lambda a: a), ("top", lambda a: a[-1]), ("average", lambda a: a.mean(0))):
        output_path = tmp_path / f"{output_format}.hdf5"
        embedder.embed_file(str(input_path), str(output_path), output_format, batch_size=2)
        with h5py.File(output_path, "r") as written:
            assert set(written) == {"0", "1", "2", "sentence_to_index"}
            for number, array in enumerate(expected):
                assert written[str(number)].dtype == np.float32
                np.testing.assert_allclose(written[str(number)][...], select(array), atol=1e-6)
            index = json.loads(written["sentence_to_index"][0])
        assert index == {" ".join(tokens): str(number) for number, tokens in enumerate(first_batch)}
    with h5py.File(tmp_path / "top.hdf5", "r") as written:
        np.testing.assert_allclose(written["0"][...], _expected_top_layer(fixture_dir, 0), atol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.hdf5", "average.hdf5", "in.txt", "top.hdf5"]


def test_embed_file_keys_by_sentence_or_forgets_sentences_and_reads_an_open_file(embedder, first_batch, tmp_path):
    text = "".join("  " + " ".join(tokens) + " \n" for tokens in first_batch)  # lines are stripped
    by_sentence = tmp_path / "keys.hdf5"
    embedder.embed_file(io.StringIO(text), by_sentence, "top", use_sentence_keys=True)
    forgotten = tmp_path / "forget.hdf5"
    embedder.embed_file(io.StringIO(text), forgotten, "top", forget_sentences=True)
    expected = embedder.embed_batch(first_batch)
    with h5py.File(by_sentence, "r") as written:
        assert set(written) == {" ".join(tokens) for tokens in first_batch}
        for tokens, array in zip(first_batch, expected, strict=True):
            np.testing.assert_allclose(written[" ".join(tokens)][...], array[-1], atol=1e-6)
    with h5py.File(forgotten, "r") as written:
        assert set(written) == {"0", "1", "2"}
    for flag in ("use_sentence_keys", "forget_sentences"):  # "no" is true: it was read as asked for
        with pytest.raises(TypeError, match=f"{flag} is 'no'; expected True or False"):
            embedder.embed_file(io.StringIO(text), tmp_path / "flag.hdf5", "top", **{flag: "no"})
    assert not (tmp_path / "flag.hdf5").exists()


# A byte-order mark, a lone \r ending a line, \r\n, and the control characters U+0092 (cp1252's apostrophe read as
# Latin-1) and DEL inside a word.
MIXED_BYTES = b"\xef\xbb\xbfthe bank\rdon\xc2\x92t stop\r\nI ate\x7fan apple .\n"
MIXED_SENTENCES = ["the bank", "don t stop", "I ate an apple ."]


@pytest.mark.parametrize("opened", ["path", "open file", "string"])
def test_embed_file_reads_a_path_and_an_open_file_alike_with_universal_newlines_and_cleaned_text(
        embedder, tmp_path, caplog, opened):
    input_path = tmp_path / "in.txt"
    input_path.write_bytes(MIXED_BYTES)
    output = tmp_path / "out.hdf5"
    with caplog.at_level(logging.WARNING, logger="elmo.allennlp"):
        if opened == "path":
            embedder.embed_file(input_path, output)
        elif opened == "open file":
            with input_path.open(encoding="utf-8") as handle:
                embedder.embed_file(handle, output)
        else:
            embedder.embed_file(io.StringIO(MIXED_BYTES.decode("utf-8")), output)  # no newline translation
    assert "control characters replaced by spaces in 2 lines (counting from 0: 1, 2)" in caplog.text
    expected = embedder.embed_batch([sentence.split() for sentence in MIXED_SENTENCES])
    with h5py.File(output, "r") as written:
        assert json.loads(written["sentence_to_index"][0]) == {s: str(n) for n, s in enumerate(MIXED_SENTENCES)}
        for number, array in enumerate(expected):
            np.testing.assert_allclose(written[str(number)][...], array, atol=1e-6)


def test_elmo_embed_reads_the_lines_embed_file_reads_a_lone_carriage_return_ending_one(embedder, fixture_dir,
                                                                                       tmp_path):
    """`elmo embed` split only at \n, so a lone \r (classic Mac OS files) joined two lines into one sentence, each
    the other's context, and every later line's name moved up by one; AllenNLP's command and embed_file split there."""
    from elmo.cli import main

    input_path = tmp_path / "in.txt"
    input_path.write_bytes(MIXED_BYTES)
    embedder.embed_file(input_path, tmp_path / "drop-in.hdf5")
    assert main(["embed", str(input_path), str(tmp_path / "cli.hdf5"), "--model", str(fixture_dir), "--quiet"]) == 0
    assert main(["embed", str(input_path), str(tmp_path / "shard.hdf5"), "--model", str(fixture_dir),
                 "--shard", "1/3", "--quiet"]) == 0
    with h5py.File(tmp_path / "drop-in.hdf5", "r") as drop_in, h5py.File(tmp_path / "cli.hdf5", "r") as cli:
        assert set(cli) == set(drop_in) == {"0", "1", "2", "sentence_to_index"}
        assert json.loads(cli["sentence_to_index"][0]) == json.loads(drop_in["sentence_to_index"][0])
        for number in ("0", "1", "2"):
            np.testing.assert_allclose(cli[number][...], drop_in[number][...], atol=1e-6)
        with h5py.File(tmp_path / "shard.hdf5", "r") as shard:
            assert set(shard) - {"sentence_to_index"} == {"1"}
            np.testing.assert_allclose(shard["1"][...], drop_in["1"][...], atol=1e-6)


# Lines that clean_text changes beyond control characters: a combining accent (composed), a soft hyphen and a
# right-to-left mark (deleted), an emoji family joined by zero-width joiners (deleted).
INVISIBLY_CLEANED = ["cafe\u0301 au lait", "co\u00adop shop", "abc\u200f def",
                     "we \U0001f468\u200d\U0001f469\u200d\U0001f467"]


@pytest.mark.parametrize("use_sentence_keys", [False, True])
def test_embed_file_keys_by_the_input_line_and_embeds_its_cleaned_words_as_the_embedder_does(
        embedder, tmp_path, use_sentence_keys):
    """Keys are the lines as the file holds them (stripped), where a caller looks them up; the vectors are those
    of the words the embedder makes of the same raw text (clean_text, then whitespace)."""
    output = tmp_path / "out.hdf5"
    text = "".join(f" {line}\n" for line in INVISIBLY_CLEANED)
    embedder.embed_file(io.StringIO(text), output, use_sentence_keys=use_sentence_keys)
    expected = Embedder(embedder.bilm).embed(INVISIBLY_CLEANED, "all")
    with h5py.File(output, "r") as written:
        if use_sentence_keys:
            assert set(written) == set(INVISIBLY_CLEANED)
            vectors = [written[line][...] for line in INVISIBLY_CLEANED]
        else:
            index = json.loads(written["sentence_to_index"][0])
            assert index == {line: str(number) for number, line in enumerate(INVISIBLY_CLEANED)}
            vectors = [written[str(number)][...] for number in range(len(INVISIBLY_CLEANED))]
    assert [array.shape[1] for array in expected] == [3, 2, 2, 2]  # cafe+U+0301 one word, the joined emoji one
    for got, want in zip(vectors, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("use_sentence_keys", [False, True])
@pytest.mark.parametrize(("text", "message"), [
    ("tab\x00x y\n", r"line 0 \(counting from 0\) holds a NUL character"),
    ("ok line\nbad \ud800 x\n", r"line 1 \(counting from 0\) holds the lone surrogate U\+D800"),
])
def test_embed_file_refuses_a_nul_or_lone_surrogate_naming_the_line_before_any_work(
        embedder, tmp_path, monkeypatch, text, message, use_sentence_keys):
    def no_work(batch):
        raise AssertionError("embedded before refusing the input")

    monkeypatch.setattr(embedder, "embed_batch", no_work)
    with pytest.raises(ValueError, match=message):
        embedder.embed_file(io.StringIO(text), tmp_path / "out.hdf5", use_sentence_keys=use_sentence_keys)
    assert list(tmp_path.iterdir()) == []


def test_embed_file_refuses_a_file_open_in_binary_mode(embedder, tmp_path):
    with pytest.raises(TypeError, match=r"open in binary mode; open it as text"):
        embedder.embed_file(io.BytesIO(b"a b\n"), tmp_path / "out.hdf5")


@pytest.mark.parametrize(("text", "options", "message"), [
    ("a b\n\nc\n  \n", {}, r"2 empty lines \(counting from 0: 1, 3\)"),
    ("a b\n\x01 \x7f\n", {}, r"1 empty lines \(counting from 0: 1\), holding no more than white space, control"),
    ("a b\n\u00ad \u200b\n", {}, r"1 empty lines \(counting from 0: 1\), holding no more than white space, control "
                                  r"characters and invisible formatting"),
    ("a b\nc\na b\n", {"use_sentence_keys": True}, r"lines 0 and 2 hold the same sentence"),
    ("a/b\n", {"use_sentence_keys": True}, r"line 0 \('a/b'\) cannot name an HDF5 dataset"),
    ("a b\n", {"output_format": "mean"}, r"output_format is 'mean'; expected one of all, top, average"),
    ("a b\n", {"batch_size": 0}, r"batch_size is 0"),
])
def test_embed_file_refuses_bad_input_before_writing_anything(embedder, tmp_path, text, options, message):
    input_path = tmp_path / "in.txt"
    input_path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        embedder.embed_file(input_path, tmp_path / "out.hdf5", **options)
    assert [p.name for p in tmp_path.iterdir()] == ["in.txt"]


@pytest.mark.parametrize("batch_size", [2.5, "8", True, None])
def test_a_batch_size_that_is_not_a_whole_number_is_refused_as_the_embedder_refuses_it(embedder, tmp_path,
                                                                                         batch_size):
    input_path = tmp_path / "in.txt"
    input_path.write_text("a b\n", encoding="utf-8")
    with pytest.raises(TypeError, match=rf"batch_size is {re.escape(repr(batch_size))}; expected a whole number"):
        embedder.embed_file(input_path, tmp_path / "out.hdf5", batch_size=batch_size)
    with pytest.raises(TypeError, match="expected a whole number"):
        embedder.embed_sentences([["a"]], batch_size=batch_size)
    assert [p.name for p in tmp_path.iterdir()] == ["in.txt"]
    by_numpy_int = embedder.embed_sentences([["a"], ["b", "c"]], batch_size=np.int64(1))  # NumPy's ints are whole
    for got, expected in zip(by_numpy_int, embedder.embed_sentences([["a"], ["b", "c"]], batch_size=1), strict=True):
        np.testing.assert_array_equal(got, expected)


def _allennlp_named_copy(fixture_dir, directory, weights_name=f"{ORIGINAL}_weights.hdf5"):
    """The fixture's files under the names AllenNLP gives the original model's (the size is not the original's)."""
    directory.mkdir()
    shutil.copy(fixture_dir / "options.json", directory / f"{ORIGINAL}_options.json")
    shutil.copy(fixture_dir / "lm_weights.hdf5", directory / weights_name)
    return directory


@pytest.mark.parametrize("weights_name", [f"{ORIGINAL}_weights.hdf5", f"{ORIGINAL}_weights_PubMed_only.hdf5"])
def test_a_directory_of_allennlp_named_files_loads(fixture_dir, embedder, first_batch, tmp_path, weights_name):
    directory = _allennlp_named_copy(fixture_dir, tmp_path / "model", weights_name)
    model_dir = ModelDir.find(directory)
    assert model_dir.options_file.name == f"{ORIGINAL}_options.json"
    assert model_dir.weight_file.name == weights_name
    vectors = Embedder.load(str(directory)).embed(first_batch[:1], "all")[0]
    np.testing.assert_allclose(vectors, embedder.embed_sentence(first_batch[0]), atol=1e-5)


def test_an_unrecognised_directory_names_the_files_it_expects(tmp_path):
    (tmp_path / "model.bin").write_bytes(b"\0")
    with pytest.raises(FileNotFoundError) as error:
        ModelDir.find(tmp_path)
    for name in ("options.json", "weights.hdf5", f"{ORIGINAL}_options.json", f"{ORIGINAL}_weights.hdf5"):
        assert name in str(error.value)


def test_allennlp_options_without_their_weights_name_the_missing_file(fixture_dir, tmp_path):
    directory = _allennlp_named_copy(fixture_dir, tmp_path / "model")
    (directory / f"{ORIGINAL}_weights.hdf5").unlink()
    with pytest.raises(FileNotFoundError, match=rf"holds {ORIGINAL}_options.json but no {ORIGINAL}_weights.hdf5"):
        ModelDir.find(directory)


def test_two_allennlp_models_in_one_directory_are_refused_naming_both(fixture_dir, tmp_path):
    directory = _allennlp_named_copy(fixture_dir, tmp_path / "model")
    shutil.copy(fixture_dir / "options.json", directory / f"{ORIGINAL}_5.5B_options.json")
    shutil.copy(fixture_dir / "lm_weights.hdf5", directory / f"{ORIGINAL}_5.5B_weights.hdf5")
    with pytest.raises(ValueError, match=r"holds 2 models .*_5.5B_options.json.*give each its own directory"):
        ModelDir.find(directory)
