"""The tagger and the classifier learn small synthetic tasks whose right answers are known, and a learned
scalar mix moves its weight to the one layer that carries the signal."""

import numpy as np
import pytest

from elmo.static_vectors import StaticVectors
from elmo.tasks import pipeline
from elmo.tasks.data import Example
from elmo.tasks.options import TrainOptions
from elmo.tasks.spec import TaskSpec
from elmo.tasks.train import (
    accuracy,
    entity_f1,
    fit,
    items_for,
    labels_of,
    predict,
    seed_everything,
)

NAMES = ["ann", "bob", "cy", "di"]
OTHERS = ["the", "saw", "a", "cat", "ran", "to", "park", "and", "was", "here"]
VOCAB = ["mr", "good", "bad", "not", *NAMES, *OTHERS]


def _static(dim: int = 16) -> StaticVectors:
    rng = np.random.default_rng(0)
    return StaticVectors(VOCAB, rng.normal(size=(len(VOCAB), dim)).astype(np.float32), name="random")


def _ner_sentence(rng: np.random.Generator) -> Example:
    """A name is a person (B-PER, I-PER for a second name) only right after "mr"; bare names are O, so the
    tag depends on the context, not on the word alone. Every group of names ends with another word, so the
    answer is never ambiguous."""
    words, tags = [], []
    while len(words) < 8:
        roll = rng.random()
        if roll < 0.3:
            names = list(rng.choice(NAMES, size=rng.integers(1, 3)))
            words += ["mr", *names]
            tags += ["O", "B-PER", *["I-PER"] * (len(names) - 1)]
        elif roll < 0.5:
            words.append(str(rng.choice(NAMES)))
            tags.append("O")
        words.append(str(rng.choice(OTHERS)))
        tags.append("O")
    return Example.of_words(words, tags)


def _sentiment_sentence(rng: np.random.Generator) -> Example:
    """Positive iff "good" appears without a "not" right before it, or "bad" does with one."""
    words = list(rng.choice(OTHERS, size=rng.integers(3, 9)))
    negated = bool(rng.random() < 0.5)
    cue = str(rng.choice(["good", "bad"]))
    at = int(rng.integers(0, len(words) + 1))
    words[at:at] = ["not", cue] if negated else [cue]
    return Example.of_words(words, label="pos" if (cue == "good") != negated else "neg")


def _data(make, sizes=(300, 60, 120)):
    rng = np.random.default_rng(1)
    return [[make(rng) for _ in range(size)] for size in sizes]


def test_labels_of_a_tagger_are_O_then_B_and_I_of_each_entity_type_in_sorted_order():
    """Both B- and I- whichever train holds: a model whose train entities of a type are all one token long can
    still tag a longer one, which a dev or test file holding one was refused for."""
    train = [Example.of_words(["ann", "in", "new", "york"], ["B-PER", "O", "B-LOC", "I-LOC"]),
             Example.of_words(["acme"], ["B-ORG"])]
    assert labels_of("tagger", train) == ("O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER")


def test_tagger_learns_context_dependent_entities():
    seed_everything(0)
    train, dev, test = _data(_ner_sentence)
    static = _static()
    spec = TaskSpec("tagger", labels_of("tagger", train, dev, test), None, None, static="random",
                    static_dim=static.dim, hidden=32, dropout=0.1)
    model = spec.build()
    items = [items_for(spec, split, None, static) for split in (train, dev, test)]
    result = fit(model, items[0], items[1], lambda m, i: entity_f1(m, i, spec.labels),
                 TrainOptions(max_epochs=15, patience=4, learning_rate=1e-2))
    assert result.best_dev == 1.0
    assert entity_f1(model, items[2], spec.labels) == 1.0


def test_classifier_learns_negated_sentiment():
    seed_everything(0)
    train, dev, test = _data(_sentiment_sentence, (400, 80, 200))
    static = _static()
    spec = TaskSpec("classifier", labels_of("classifier", train), None, None, static="random",
                    static_dim=static.dim, hidden=32, dropout=0.1)
    model = spec.build()
    items = [items_for(spec, split, None, static) for split in (train, dev, test)]
    fit(model, items[0], items[1], accuracy, TrainOptions(max_epochs=20, patience=5, learning_rate=1e-2))
    assert accuracy(model, items[2]) >= 0.95


def test_learned_mix_finds_the_informative_layer():
    """Layer 2 holds each word's vector, layers 0 and 1 noise: the mix must learn to read layer 2."""
    seed_everything(0)
    static = _static(dim=12)
    rng = np.random.default_rng(2)
    splits = _data(_ner_sentence, (300, 60, 120))

    def layers_of(example: Example) -> np.ndarray:
        signal = static.lookup(example.words)
        noise = rng.normal(scale=1.0, size=(2, len(example.words), static.dim))
        return np.concatenate([noise, signal[None]]).astype(np.float16)

    layers = [[layers_of(example) for example in split] for split in splits]
    spec = TaskSpec("tagger", labels_of("tagger", *splits), "mix", "synthetic", n_layers=3, elmo_dim=static.dim,
                    hidden=32, dropout=0.1, mix_l2=1e-3)
    model = spec.build()
    items = [items_for(spec, split, split_layers, None) for split, split_layers in zip(splits, layers, strict=True)]
    fit(model, items[0], items[1], lambda m, i: entity_f1(m, i, spec.labels),
        TrainOptions(max_epochs=15, patience=4, learning_rate=1e-2))
    weights = model.features.mix_weights()
    assert weights[2] > 0.5 and weights[2] > max(weights[:2])
    assert entity_f1(model, items[2], spec.labels) == 1.0


def test_a_saved_model_predicts_as_the_trained_one(tmp_path):
    seed_everything(0)
    train, dev, test = _data(_sentiment_sentence, (60, 20, 30))
    static = _static()
    spec = TaskSpec("classifier", labels_of("classifier", train), None, None, static="random",
                    static_dim=static.dim, hidden=8)
    model = spec.build()
    items = [items_for(spec, split, None, static) for split in (train, dev, test)]
    fit(model, items[0], items[1], accuracy, TrainOptions(max_epochs=1))
    spec.save(model, tmp_path / "model")
    loaded_spec, loaded = TaskSpec.load(tmp_path / "model")
    assert loaded_spec == spec
    assert predict(loaded, items[2]) == predict(model, items[2])


def test_train_and_test_refuses_an_empty_split_before_training(monkeypatch):
    """An empty test split was found when scored, after the whole run (ZeroDivisionError), and nothing saved."""
    def no_training(*args, **kwargs):
        raise AssertionError("trained although a split is empty")

    monkeypatch.setattr(pipeline, "fit", no_training)
    train, dev = _data(_sentiment_sentence, (20, 10))
    static = _static()
    spec = TaskSpec("classifier", labels_of("classifier", train), None, None, static="random",
                    static_dim=static.dim, hidden=8)
    with pytest.raises(ValueError, match="the test split holds no examples"):
        pipeline.train_and_test(spec, {"train": train, "dev": dev, "test": []}, None, static, TrainOptions())
    with pytest.raises(ValueError, match="the dev split holds no examples; the test split holds no examples"):
        pipeline.train_and_test(spec, {"train": train, "dev": [], "test": []}, None, static, TrainOptions())
