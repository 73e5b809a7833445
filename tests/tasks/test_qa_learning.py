"""A toy set only attention can solve: the passage is 8 distinct words, the question is one of them, and the
answer is the passage word right after it. A passage-only model cannot know which word is meant, so it
stays near the best it can do from position alone (1 in 7)."""

import random

import numpy as np
import pytest

from elmo.static_vectors import StaticVectors
from elmo.tasks import qa_pipeline
from elmo.tasks.options import EncoderKind, TrainOptions
from elmo.tasks.qa_data import qa_example
from elmo.tasks.qa_pipeline import fit_qa, qa_items, score_spans
from elmo.tasks.spec import TaskSpec
from elmo.tasks.train import seed_everything

VOCABULARY = [f"w{i}" for i in range(24)]


def toy_rows(count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        words = rng.sample(VOCABULARY, 8)
        named = rng.randrange(7)
        passage = " ".join(words)
        answer_start = len(" ".join(words[:named + 1])) + 1
        rows.append({"id": f"{seed}-{i}", "question": words[named], "passage": passage,
                     "answers": [{"text": words[named + 1], "start": answer_start}]})
    return rows


def train_toy(passage_only: bool, encoder: EncoderKind = "bilstm", learning_rate: float = 1e-2,
              epochs: int = 6) -> dict[str, float]:
    seed_everything(0)
    vectors = StaticVectors(VOCABULARY, np.random.default_rng(0).standard_normal((len(VOCABULARY), 16)))
    spec = TaskSpec("qa", (), None, None, static="toy", static_dim=16, hidden=32, dropout=0.0, max_answer_tokens=1,
                    passage_only=passage_only, encoder=encoder)
    splits = {name: [qa_example(row, str.split) for row in toy_rows(size, seed)]
              for name, size, seed in (("train", 800, 1), ("dev", 200, 2))}
    items = {name: qa_items(spec, examples, None, vectors) for name, examples in splits.items()}
    model = spec.build_qa()
    fit_qa(model, items["train"], items["dev"], splits["dev"],
           TrainOptions(max_epochs=epochs, patience=epochs, batch_size=32, learning_rate=learning_rate, seed=0))
    return score_spans(model, items["dev"], splits["dev"])


def test_toy_rows_put_the_answer_right_after_the_named_word():
    for row in toy_rows(50, 0):
        example = qa_example(row, str.split)
        named = example.passage_words.index(example.question_words[0])
        assert example.span == (named + 1, named + 1)
        assert example.answer_text(*example.span) == example.answers[0]


def test_attention_flow_learns_the_word_after_the_named_one_and_passage_only_cannot():
    with_attention = train_toy(passage_only=False)
    without = train_toy(passage_only=True)
    assert with_attention["exact_match"] > 90
    assert without["exact_match"] < 30  # chance from position alone is 1/7 (14 %)


def test_attention_flow_over_transformer_encoders_learns_the_word_after_the_named_one():
    """The same toy with ``--encoder transformer``: the word after the named one is found through the
    positions the Transformer adds (at 1e-2 it does not train; at 1e-3 it reaches 100 % by epoch 7)."""
    assert train_toy(passage_only=False, encoder="transformer", learning_rate=1e-3, epochs=8)["exact_match"] > 90


def test_train_and_test_qa_refuses_an_empty_test_split_before_training(monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("trained although the test split is empty")

    monkeypatch.setattr(qa_pipeline, "fit_qa", no_training)
    vectors = StaticVectors(VOCABULARY, np.random.default_rng(0).standard_normal((len(VOCABULARY), 16)))
    spec = TaskSpec("qa", (), None, None, static="toy", static_dim=16, hidden=8, max_answer_tokens=1)
    splits = {name: [qa_example(row, str.split) for row in toy_rows(4, seed)] for name, seed in (("train", 1),
                                                                                                 ("dev", 2))}
    with pytest.raises(ValueError, match="the test split holds no examples"):
        qa_pipeline.train_and_test_qa(spec, {**splits, "test": []}, None, vectors, TrainOptions())
