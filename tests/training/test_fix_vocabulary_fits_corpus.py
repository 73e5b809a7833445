"""A new run checks its vocabulary against the start of its corpus (trainer._check_vocabulary_fits): one made from
text split by another tokenizer trained silently on <UNK> targets (a chars vocabulary read with the default
whitespace tokenizer: every target <UNK>, exit 0)."""

import logging
from pathlib import Path

import pytest
from run_helpers import train_micro_run

import elmo.training.trainer as trainer
from elmo.cli import main
from elmo.training import Corpus, TrainingOptions, Vocabulary, train
from elmo.training.checkpoints import list_checkpoints
from elmo.training.vocab import VocabularyError

# Lines without spaces: the chars tokenizer splits them into characters, whitespace keeps each line one word.
CHINESE_LINES = ["我们今天去公园散步", "他喜欢读书和写字", "天气很好我们出去玩", "小猫在椅子上睡觉"] * 20


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _micro_flags(config: Path) -> list[str]:
    return ["--config", str(config), "--batch-size", "4", "--unroll-steps", "6", "--negatives", "12",
            "--max-steps", "1", "--quiet"]


def test_count_unknown_reads_the_first_words_and_counts_those_outside_the_vocabulary_and_unk_itself():
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b", "c"])
    sentences = [["a", "x"], ["<UNK>", "b", "y"], ["z", "z"]]
    assert vocab.count_unknown(sentences, 4) == (2, 4)  # a x <UNK> b: x and <UNK>
    assert vocab.count_unknown(sentences, 100) == (5, 7)  # fewer words than asked for: all of them


def test_a_chars_vocabulary_read_with_the_default_whitespace_tokenizer_is_refused_before_any_step(
    tmp_path: Path, micro_options_file: Path, capsys: pytest.CaptureFixture
):
    corpus = _write_lines(tmp_path / "zh.txt", CHINESE_LINES)
    Vocabulary.from_counts(Corpus([str(corpus)], "chars").count_tokens()).save(tmp_path / "vocab.txt")
    run = tmp_path / "run"
    status = main(["train", "--corpus", str(corpus), "--vocab", str(tmp_path / "vocab.txt"), "--out", str(run),
                   *_micro_flags(micro_options_file)])
    error = capsys.readouterr().err
    assert status == 2
    # Each whitespace token is a whole line, which the character vocabulary lacks: all 80 words are <UNK>.
    assert f"--vocab {tmp_path / 'vocab.txt'} maps 100.0% of the first 80 words of the corpus to <UNK>" in error
    assert "was it made from text split as --tokenizer whitespace splits it?" in error
    assert list_checkpoints(run) == []
    # The same files with the tokenizer that made the vocabulary train.
    assert main(["train", "--corpus", str(corpus), "--vocab", str(tmp_path / "vocab.txt"), "--out", str(run),
                 "--tokenizer", "chars", *_micro_flags(micro_options_file)]) == 0
    assert len(list_checkpoints(run)) == 1


def test_a_run_from_a_model_with_a_vocabulary_of_another_tokenizer_is_refused(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path
):
    start = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "start", max_steps=1)
    corpus = _write_lines(tmp_path / "zh.txt", CHINESE_LINES)
    Vocabulary.from_counts(Corpus([str(corpus)], "chars").count_tokens()).save(tmp_path / "zh_vocab.txt")
    options = TrainingOptions(corpus=[str(corpus)], vocab=str(tmp_path / "zh_vocab.txt"), init_from=str(start),
                              batch_size=4, unroll_steps=6, n_negatives=12, max_steps=1)
    with pytest.raises(VocabularyError, match=r"the vocabulary of --init-from .* maps 100\.0% of the first 80 words"):
        train(options, tmp_path / "run", progress=False)
    assert list_checkpoints(tmp_path / "run") == []


@pytest.mark.parametrize(("unknown_per_line", "warned"), [(1, False), (2, True)])
def test_a_share_of_unknown_words_above_a_tenth_is_warned_of_and_trains(
    tmp_path: Path, micro_options_file: Path, caplog: pytest.LogCaptureFixture, unknown_per_line: int, warned: bool
):
    """Lines of ten words, ``unknown_per_line`` of them outside the vocabulary: 10 % is not warned of, 20 % is."""
    known = ["w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8", "w9"]
    line = " ".join(known[unknown_per_line:] + ["new"] * unknown_per_line)
    corpus = _write_lines(tmp_path / "corpus.txt", [line] * 40)
    Vocabulary(["<S>", "</S>", "<UNK>", *known]).save(tmp_path / "vocab.txt")
    with caplog.at_level(logging.WARNING, logger="elmo.training.trainer"):
        steps = train(TrainingOptions(corpus=[str(corpus)], vocab=str(tmp_path / "vocab.txt"),
                                      config=str(micro_options_file), batch_size=4, unroll_steps=6, n_negatives=6,
                                      max_steps=1), tmp_path / "run", progress=False)
    assert steps == 1
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    if warned:
        assert len(warnings) == 1 and "maps 20.0% of the first 400 words of the corpus to <UNK>" in warnings[0]
    else:
        assert warnings == []


def test_only_the_first_words_of_the_corpus_are_checked(
    tmp_path: Path, micro_options_file: Path, monkeypatch: pytest.MonkeyPatch
):
    """A corpus whose first ten words are known and the next twenty not: checking ten passes, thirty (two thirds
    unknown) is refused; the share is of the words read, not of the whole text."""
    corpus = _write_lines(tmp_path / "corpus.txt", ["a b c d e f g h i j", *["x y z w v"] * 4] * 10)
    Vocabulary(["<S>", "</S>", "<UNK>", *"abcdefghij"]).save(tmp_path / "vocab.txt")

    def options() -> TrainingOptions:
        return TrainingOptions(corpus=[str(corpus)], vocab=str(tmp_path / "vocab.txt"),
                               config=str(micro_options_file), batch_size=4, unroll_steps=6, n_negatives=6,
                               max_steps=1)

    monkeypatch.setattr(trainer, "CHECKED_WORDS", 30)
    with pytest.raises(VocabularyError, match=r"maps 66\.7% of the first 30 words"):
        train(options(), tmp_path / "refused", progress=False)
    monkeypatch.setattr(trainer, "CHECKED_WORDS", 10)
    assert train(options(), tmp_path / "run", progress=False) == 1
