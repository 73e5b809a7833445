"""`elmo perplexity` and `elmo export` on model directories: shipped names, missing softmax, tokenizer."""

import shutil
from pathlib import Path

import pytest
from run_helpers import train_micro_run

from elmo.cli import main
from elmo.training import Corpus, evaluate, load_language_model
from elmo.training.export import SOFTMAX_FILE


@pytest.fixture
def shipped_root(tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path,
                 monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the package's models/ folder: ``mini`` exported with its softmax, ``bare`` without
    one (as the published weights come), both with tokenizer.json as the shipped models have."""
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=3)
    root = tmp_path / "models"
    assert main(["export", str(run), "--out", str(root / "mini")]) == 0
    shutil.copytree(root / "mini", root / "bare")
    (root / "bare" / SOFTMAX_FILE).unlink()
    for name in ("mini", "bare"):
        (root / name / "tokenizer.json").write_text('{"name": "english"}\n')
    monkeypatch.setattr("elmo.training.export.shipped_models_root", lambda: root, raising=False)
    monkeypatch.chdir(tmp_path)  # where no directory is called mini or bare
    return root


def test_perplexity_of_a_shipped_model_without_a_softmax_says_so_and_what_works_instead(
    shipped_root: Path, synthetic_corpus: Path, capsys: pytest.CaptureFixture
):
    assert main(["perplexity", "--model", "bare", "--corpus", str(synthetic_corpus)]) == 2
    error = capsys.readouterr().err
    assert "shipped model 'bare' holds no softmax (softmax.safetensors)" in error
    assert "`elmo embed --model bare`" in error and "`elmo export`" in error
    assert "no such run" not in error


def test_perplexity_of_a_shipped_model_with_a_softmax_works_by_name_with_the_models_tokenizer(
    shipped_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture
):
    text = tmp_path / "text.txt"
    text.write_text("the dog sees the cat.\nthe fish.\n")  # targets with </S>: whitespace 6 + 3, english 7 + 4
    assert main(["perplexity", "--model", "mini", "--corpus", str(text)]) == 0
    output = capsys.readouterr().out
    assert output.splitlines()[0] == "tokens: 11"
    model, vocab = load_language_model(shipped_root / "mini")
    expected = evaluate(model, Corpus([str(text)], "english"), vocab)
    assert f"perplexity: {expected.average:.4f}" in output.splitlines()[-1]

    assert main(["perplexity", "--model", "mini", "--corpus", str(text), "--tokenizer", "whitespace"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "tokens: 9"


def test_export_writes_the_runs_tokenizer_for_the_embedder_and_perplexity(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path
):
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=2, tokenizer="english")
    assert main(["export", str(run), "--out", str(tmp_path / "model")]) == 0
    assert (tmp_path / "model" / "tokenizer.json").read_text() == '{"name": "english"}\n'

    from elmo.model_dir import ModelDir

    assert ModelDir.find(tmp_path / "model").tokenizer == "english"
