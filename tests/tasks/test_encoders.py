"""The Transformer encoder (``--encoder transformer``): the BiLSTM's interface (shape, zeros at padding, a
sentence's output independent of what it is batched with), a toy task that needs word order, which it learns,
and a saved model that predicts exactly as the trained one."""

import json

import numpy as np
import pytest
import torch

from elmo.cli import build_parser, main
from elmo.static_vectors import StaticVectors
from elmo.tasks.data import Example, read_labelled, write_labelled
from elmo.tasks.encoders import BiLSTMEncoder, EncoderChoice, TransformerEncoder, sinusoidal_positions
from elmo.tasks.options import ENCODER_KINDS, TrainOptions
from elmo.tasks.spec import TaskSpec
from elmo.tasks.train import entity_f1, fit, items_for, labels_of, predict, seed_everything

WORDS = ["ann", "bob", "cy", "di", "eve"]


def _static(dim: int = 16) -> StaticVectors:
    return StaticVectors(WORDS, np.random.default_rng(0).normal(size=(len(WORDS), dim)).astype(np.float32))


def _previous_word_sentence(rng: np.random.Generator) -> Example:
    """Each token is tagged with the word before it (``B-ann`` after "ann"), the first token ``O``: a
    permutation-invariant encoder (no positions) sees the same bag of words at every token and cannot tell
    which word came just before."""
    words = [str(word) for word in rng.choice(WORDS, size=int(rng.integers(4, 10)))]
    return Example.of_words(words, ["O", *[f"B-{word}" for word in words[:-1]]])


def _splits(sizes=(400, 80, 160)) -> list[list[Example]]:
    rng = np.random.default_rng(1)
    return [[_previous_word_sentence(rng) for _ in range(size)] for size in sizes]


def _tagger_spec(splits, static: StaticVectors, **encoder) -> TaskSpec:
    return TaskSpec("tagger", labels_of("tagger", *splits), None, None, static="random", static_dim=static.dim,
                    hidden=32, dropout=0.0, **encoder)


@pytest.mark.parametrize("kind", ENCODER_KINDS)
def test_each_encoder_maps_features_to_twice_hidden_with_zeros_at_padding(kind):
    torch.manual_seed(0)
    encoder = EncoderChoice(kind).build(6, 8).eval()
    inputs = torch.randn(3, 5, 6)
    lengths = torch.tensor([5, 2, 3])
    with torch.no_grad():
        output = encoder(inputs, lengths)
        alone = encoder(inputs[1:2, :2], lengths[1:2])
    assert output.shape == (3, 5, 16) and encoder.dim == 16
    assert torch.all(output[1, 2:] == 0) and torch.all(output[2, 3:] == 0)
    assert torch.any(output[1, :2] != 0)
    # What a sentence is batched with (padding, longer neighbours) does not change its vectors.
    torch.testing.assert_close(output[1:2, :2], alone, atol=1e-5, rtol=1e-5)


def test_sinusoidal_positions_follow_the_formula_for_any_length():
    table = sinusoidal_positions(300, 6)
    assert table.shape == (300, 6)
    position, pair = 257, 1
    angle = position / 10000 ** (2 * pair / 6)
    assert table[position, 2 * pair].item() == pytest.approx(np.sin(angle), abs=1e-5)
    assert table[position, 2 * pair + 1].item() == pytest.approx(np.cos(angle), abs=1e-5)


def test_transformer_width_must_split_into_heads():
    with pytest.raises(ValueError, match="not divisible by 5 heads"):
        TransformerEncoder(4, 8, heads=5)


def test_unknown_encoder_is_named():
    with pytest.raises(ValueError, match="'gru'"):
        TaskSpec("tagger", ("O",), None, None, static="x", static_dim=2, encoder="gru")  # type: ignore[arg-type]


def test_transformer_tagger_learns_the_previous_word():
    seed_everything(0)
    splits = _splits()
    static = _static()
    spec = _tagger_spec(splits, static, encoder="transformer")
    model = spec.build()
    assert isinstance(model.encoder, TransformerEncoder)
    items = [items_for(spec, split, None, static) for split in splits]
    fit(model, items[0], items[1], lambda m, i: entity_f1(m, i, spec.labels),
        TrainOptions(max_epochs=15, patience=4, learning_rate=3e-3))
    assert entity_f1(model, items[2], spec.labels) >= 0.98


def test_without_positions_the_previous_word_cannot_be_learned(monkeypatch):
    """The counterpart of the test above: the same model with its positions zeroed stays far below it, so
    that test measures the use of order, not a bag of words."""
    monkeypatch.setattr("elmo.tasks.encoders.sinusoidal_positions", lambda length, dim: torch.zeros(length, dim))
    seed_everything(0)
    splits = _splits()
    static = _static()
    spec = _tagger_spec(splits, static, encoder="transformer")
    model = spec.build()
    items = [items_for(spec, split, None, static) for split in splits]
    fit(model, items[0], items[1], lambda m, i: entity_f1(m, i, spec.labels),
        TrainOptions(max_epochs=15, patience=4, learning_rate=3e-3))
    assert entity_f1(model, items[2], spec.labels) < 0.6


def test_a_saved_transformer_model_is_rebuilt_and_predicts_as_the_trained_one(tmp_path):
    seed_everything(0)
    splits = _splits((60, 20, 40))
    static = _static()
    spec = _tagger_spec(splits, static, encoder="transformer", encoder_layers=3, encoder_heads=2)
    model = spec.build()
    items = [items_for(spec, split, None, static) for split in splits]
    fit(model, items[0], items[1], lambda m, i: entity_f1(m, i, spec.labels), TrainOptions(max_epochs=2))
    spec.save(model, tmp_path / "model")
    loaded_spec, loaded = TaskSpec.load(tmp_path / "model")
    assert loaded_spec == spec
    assert isinstance(loaded.encoder, TransformerEncoder) and len(loaded.encoder.blocks.layers) == 3
    assert predict(loaded, items[2]) == predict(model, items[2])


def test_a_task_json_from_before_the_choice_loads_as_a_bilstm(tmp_path):
    splits = _splits((10, 5, 5))
    static = _static()
    spec = _tagger_spec(splits, static)
    spec.save(spec.build(), tmp_path / "model")
    stored = json.loads((tmp_path / "model" / "task.json").read_text())
    for name in ("encoder", "encoder_layers", "encoder_heads"):
        del stored[name]
    (tmp_path / "model" / "task.json").write_text(json.dumps(stored))
    loaded_spec, loaded = TaskSpec.load(tmp_path / "model")
    assert loaded_spec.encoder == "bilstm" and isinstance(loaded.encoder, BiLSTMEncoder)


@pytest.mark.parametrize("kind", ENCODER_KINDS)
def test_command_line_accepts_every_encoder(kind):
    args = build_parser().parse_args(["task", "train", "tagger", "--train", "a", "--dev", "b", "--test", "c",
                                      "--model", "en", "--out", "o", "--encoder", kind, "--encoder-layers", "3"])
    assert (args.encoder, args.encoder_layers, args.encoder_heads) == (kind, 3, 4)


def test_task_train_with_transformer_encoder_and_predict_rebuilds_it(tmp_path, fixture_dir, capsys):
    """The command line end to end: the choice is written into task.json, and ``elmo task predict`` (which
    reads only the run's directory) gives the labels the trained model gives."""
    rows = [("pos", "ann bob"), ("neg", "bob ann"), ("pos", "cy di"), ("neg", "di cy")] * 3
    paths = []
    for name in ("train", "dev", "test"):
        write_labelled(tmp_path / f"{name}.tsv", rows)
        paths += [f"--{name}", str(tmp_path / f"{name}.tsv")]
    vectors = tmp_path / "static.npz"
    _static(8).save(vectors)
    out = tmp_path / "run"
    assert main(["task", "train", "classifier", *paths, "--model", str(fixture_dir), "--out", str(out),
                 "--elmo", "none", "--static", str(vectors), "--encoder", "transformer", "--encoder-heads", "2",
                 "--hidden", "8", "--epochs", "2", "--quiet"]) == 0
    stored = json.loads((out / "task.json").read_text())
    assert (stored["encoder"], stored["encoder_layers"], stored["encoder_heads"]) == ("transformer", 2, 2)
    texts = tmp_path / "texts.txt"
    texts.write_text("ann bob\nbob ann\ndi cy\n", encoding="utf-8")
    predicted = tmp_path / "predicted.tsv"
    assert main(["task", "predict", str(out), "--input", str(texts), "--output", str(predicted)]) == 0
    spec, model = TaskSpec.load(out)
    assert isinstance(model.encoder, TransformerEncoder)
    examples = [Example.of_words(text.split(), label="pos") for text in ("ann bob", "bob ann", "di cy")]
    expected = [spec.labels[i] for i in predict(model, items_for(spec, examples, None, StaticVectors.load(vectors)))]
    assert [label for label, _ in read_labelled(predicted)] == expected
