"""What ``export_model`` refuses before it writes a file: a vocabulary that is not the softmax's and a tokenizer
name no reader knows. Each used to publish a directory that does not load, replacing the good model there."""

from pathlib import Path

import pytest
import torch
from training_helpers import MICRO_CONFIG

from elmo.training import load_language_model
from elmo.training.export import export_model
from elmo.training.language_model import LanguageModel
from elmo.training.vocab import Vocabulary

VOCAB = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b"])


def _files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in directory.iterdir()}


@pytest.fixture
def exported(tmp_path: Path) -> tuple[LanguageModel, Path]:
    torch.manual_seed(0)
    model = LanguageModel(MICRO_CONFIG, len(VOCAB))
    return model, export_model(model, VOCAB, tmp_path / "model", "whitespace")


@pytest.mark.parametrize(("vocab", "tokenizer", "expected"), [
    (Vocabulary([*VOCAB.tokens, "c"]), "whitespace",
     "the vocabulary has 6 tokens but the model's softmax has 5 rows, one per token"),
    (Vocabulary(VOCAB.tokens[:4]), "whitespace",
     "the vocabulary has 4 tokens but the model's softmax has 5 rows, one per token"),
    (VOCAB, "English", "unknown tokenizer 'English'; expected one of "),
], ids=["vocab-larger", "vocab-smaller", "tokenizer-unknown"])
def test_an_export_that_would_not_load_is_refused_before_writing_and_the_old_model_stays(
        exported: tuple[LanguageModel, Path], vocab: Vocabulary, tokenizer: str, expected: str):
    model, out_dir = exported
    before = _files(out_dir)
    with pytest.raises(ValueError, match=expected):
        export_model(model, vocab, out_dir, tokenizer)
    assert _files(out_dir) == before
    assert sorted(path.name for path in out_dir.parent.iterdir()) == ["model"]  # no partial directory either
    loaded, loaded_vocab = load_language_model(out_dir)
    assert loaded_vocab == VOCAB and torch.equal(loaded.softmax_weight, model.softmax_weight)
