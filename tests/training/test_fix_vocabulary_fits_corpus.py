"""A new run checks its vocabulary against the start of its corpus (trainer._check_vocabulary_fits): one made from
text split by another tokenizer trained silently on <UNK> targets (a chars vocabulary read with the default
whitespace tokenizer: every target <UNK>, exit 0). The share is judged among frequent words: a vocabulary of the
same corpus and tokenizer leaves out rare words by design, which on a small corpus are most of its words."""

import logging
from pathlib import Path

import numpy as np
import pytest
from run_helpers import train_micro_run

import elmo.training.trainer as trainer
from elmo.cli import main
from elmo.training import Corpus, TrainingOptions, Vocabulary, train
from elmo.training.checkpoints import list_checkpoints
from elmo.training.vocab import UnknownCounts, VocabularyError

# Lines without spaces: the chars tokenizer splits them into characters, whitespace keeps each line one word.
CHINESE_SENTENCES = ["我们今天去公园散步", "他喜欢读书和写字", "天气很好我们出去玩", "小猫在椅子上睡觉"]
CHINESE_LINES = CHINESE_SENTENCES * 20  # each line seen 20 times: a frequent whitespace word
# Raw text as it mostly is: no line twice, so no whitespace word is frequent and the share of all words is judged.
DISTINCT_CHINESE_LINES = [f"{sentence}{number}" for number in range(20) for sentence in CHINESE_SENTENCES]


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _micro_flags(config: Path) -> list[str]:
    return ["--config", str(config), "--batch-size", "4", "--unroll-steps", "6", "--negatives", "12",
            "--max-steps", "1", "--quiet"]


def test_count_unknown_reads_the_first_words_and_counts_the_unknown_among_all_and_among_frequent_types():
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b", "c"])
    sentences = [["a", "x"], ["<UNK>", "b", "y"], ["z", "z", "a"]]
    # a x <UNK> b: x and <UNK> unknown; every type once, so none seen twice.
    assert vocab.count_unknown(sentences, 4, 2) == UnknownCounts(words=4, unknown=2, frequent=0, frequent_unknown=0)
    # Fewer words than asked for: all 8. Unknown x <UNK> y z z; seen twice: a a z z, of which z z unknown.
    assert vocab.count_unknown(sentences, 100, 2) == UnknownCounts(words=8, unknown=5, frequent=4,
                                                                   frequent_unknown=2)
    assert vocab.count_unknown(sentences, 100, 3) == UnknownCounts(words=8, unknown=5, frequent=0,
                                                                   frequent_unknown=0)


@pytest.mark.parametrize(("lines", "frequent"), [
    (CHINESE_LINES, "100.0% of the 80 whose type occurs there at least 5 times."),
    (DISTINCT_CHINESE_LINES, "none of them of a type that occurs there at least 5 times (too few frequent words "
                             "to judge by: the share of all is judged)."),
], ids=["repeated-lines", "distinct-lines"])
def test_a_chars_vocabulary_read_with_the_default_whitespace_tokenizer_is_refused_before_any_step(
    tmp_path: Path, micro_options_file: Path, capsys: pytest.CaptureFixture, lines: list[str], frequent: str
):
    corpus = _write_lines(tmp_path / "zh.txt", lines)
    Vocabulary.from_counts(Corpus([str(corpus)], "chars").count_tokens()).save(tmp_path / "vocab.txt")
    run = tmp_path / "run"
    status = main(["train", "--corpus", str(corpus), "--vocab", str(tmp_path / "vocab.txt"), "--out", str(run),
                   *_micro_flags(micro_options_file)])
    error = " ".join(capsys.readouterr().err.split())
    assert status == 2
    # Each whitespace token is a whole line, which the character vocabulary lacks: all 80 words are <UNK>.
    vocab = tmp_path / "vocab.txt"
    assert f"--vocab {vocab} maps 100.0% of the first 80 words of the corpus to <UNK>, {frequent}" in error
    assert "another tokenizer than --tokenizer whitespace, or from other text?" in error
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


def _warnings_of_a_run(tmp_path: Path, corpus: Path, vocab: Path, config: Path, caplog: pytest.LogCaptureFixture,
                       tokenizer: str = "whitespace") -> list[str]:
    """The warnings the trainer logs while a one-step run of ``corpus`` with ``vocab`` trains."""
    with caplog.at_level(logging.WARNING, logger="elmo.training.trainer"):
        steps = train(TrainingOptions(corpus=[str(corpus)], vocab=str(vocab), tokenizer=tokenizer, config=str(config),
                                      batch_size=4, unroll_steps=6, n_negatives=6, max_steps=1),
                      tmp_path / "run", progress=False)
    assert steps == 1
    return [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]


@pytest.mark.parametrize(("unknown_per_line", "warned"), [(1, False), (2, True)])
def test_a_share_of_unknown_frequent_words_above_two_percent_is_warned_of_and_trains(
    tmp_path: Path, micro_options_file: Path, caplog: pytest.LogCaptureFixture, unknown_per_line: int, warned: bool
):
    """Lines of fifty words, ``unknown_per_line`` of them a word seen on every line that the vocabulary lacks:
    2 % is not warned of, 4 % is."""
    known = [f"w{number}" for number in range(50)]
    line = " ".join(known[unknown_per_line:] + ["new"] * unknown_per_line)
    corpus = _write_lines(tmp_path / "corpus.txt", [line] * 40)
    Vocabulary(["<S>", "</S>", "<UNK>", *known]).save(tmp_path / "vocab.txt")
    warnings = _warnings_of_a_run(tmp_path, corpus, tmp_path / "vocab.txt", micro_options_file, caplog)
    if warned:
        assert len(warnings) == 1
        assert ("maps 4.0% of the first 2,000 words of the corpus to <UNK>, 4.0% of the 2,000 whose type occurs "
                "there at least 5 times.") in warnings[0]
    else:
        assert warnings == []


def test_an_english_vocabulary_read_with_the_default_whitespace_tokenizer_is_warned_of(
    tmp_path: Path, micro_options_file: Path, caplog: pytest.LogCaptureFixture
):
    """Moses splits the full stop off 'end.'; whitespace keeps 'end.', a word seen on every line that the
    vocabulary lacks: one word in twenty, 5 % (below the former 10 % warning)."""
    line = " ".join([f"w{number}" for number in range(19)]) + " end."
    corpus = _write_lines(tmp_path / "corpus.txt", [line] * 40)
    Vocabulary.from_counts(Corpus([str(corpus)], "english").count_tokens()).save(tmp_path / "vocab.txt")
    warnings = _warnings_of_a_run(tmp_path, corpus, tmp_path / "vocab.txt", micro_options_file, caplog)
    assert len(warnings) == 1
    assert ("maps 5.0% of the first 800 words of the corpus to <UNK>, 5.0% of the 800 whose type occurs there at "
            "least 5 times. A vocabulary leaves out rare words, not frequent ones: was it made from text split by "
            "another tokenizer than --tokenizer whitespace, or from other text?") in warnings[0]


def test_a_vocabulary_of_the_same_small_corpus_and_tokenizer_that_drops_rare_words_trains_unwarned(
    tmp_path: Path, micro_options_file: Path, caplog: pytest.LogCaptureFixture
):
    """`elmo vocab --min-count 3 --tokenizer english` of a small corpus whose words are mostly seen once: five
    words in nine are <UNK> (55.6 %, refused by the former check of all words), none of the frequent ones."""
    lines = [f"The a{n} b{n} was c{n} d{n} and e{n}." for n in range(40)]
    corpus = _write_lines(tmp_path / "corpus.txt", lines)
    assert main(["vocab", str(corpus), "--out", str(tmp_path / "vocab.txt"), "--min-count", "3",
                 "--tokenizer", "english"]) == 0
    # Moses: The a0 b0 was c0 d0 and e0 . -- the words seen on every line are kept, the rest left out.
    assert Vocabulary.load(tmp_path / "vocab.txt").tokens == ["<S>", "</S>", "<UNK>", "The", "was", "and", "."]
    warnings = _warnings_of_a_run(tmp_path, corpus, tmp_path / "vocab.txt", micro_options_file, caplog,
                                  tokenizer="english")
    assert warnings == []


def test_only_the_first_words_of_the_corpus_are_checked(
    tmp_path: Path, micro_options_file: Path, monkeypatch: pytest.MonkeyPatch
):
    """A corpus whose first ten words are known and the next twenty not: checking ten passes, thirty (two thirds
    unknown; no type seen five times, so all words are judged) is refused; the share is of the words read, not of
    the whole text."""
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


def test_frequency_order_is_spearmans_correlation_of_ids_and_counts_ties_ranked_alike():
    """Against scipy's Spearman correlation (mean ranks for ties) on a sample with tied counts; None where the
    counts say nothing (all equal) or too few words are frequent."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    words = [f"w{k}" for k in range(60)]
    counts = {word: int(count) for word, count in zip(words, rng.integers(5, 15, size=60), strict=True)}
    sentences = [[word] * count for word, count in counts.items()]
    order = rng.permutation(60)
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", *(words[k] for k in order)])
    expected = spearmanr([vocab.ids[word] for word in words], [-counts[word] for word in words]).statistic
    assert vocab.frequency_order(sentences, 10_000, 5) == pytest.approx(expected, abs=1e-12)
    by_frequency = Vocabulary(["<S>", "</S>", "<UNK>", *sorted(words, key=lambda word: -counts[word])])
    assert by_frequency.frequency_order(sentences, 10_000, 5) > 0.97  # ties only keep it from 1
    assert vocab.frequency_order([[word] * 5 for word in words], 10_000, 5) is None  # every count equal
    assert vocab.frequency_order(sentences[:19], 10_000, 5) is None


@pytest.mark.parametrize("order", ["frequency", "bilm-tf", "shuffled", "specials-last"])
def test_a_vocabulary_not_in_frequency_order_is_warned_of(
    tmp_path: Path, micro_options_file: Path, caplog: pytest.LogCaptureFixture, order: str
):
    """The sampler draws id k as the k-th most frequent word; a sorted vocabulary (or one with the specials last)
    trained about 20 % worse after 100 steps with no sign. Word k of 40 is seen 45 - k times; shuffled, the ids
    and counts correlate by 0.14."""
    words = [f"w{k}" for k in range(40)]
    lines = [" ".join(words[k] for k in range(40) if repeat < 45 - k) for repeat in range(45)]
    corpus = _write_lines(tmp_path / "corpus.txt", lines)
    shuffled = [words[k] for k in np.random.default_rng(0).permutation(40)]
    tokens = {"frequency": ["<S>", "</S>", "<UNK>", *words], "bilm-tf": ["</S>", "<S>", "<UNK>", *words],
              "shuffled": ["<S>", "</S>", "<UNK>", *shuffled],
              "specials-last": [*words, "<S>", "</S>", "<UNK>"]}[order]
    Vocabulary(tokens).save(tmp_path / "vocab.txt")
    warnings = _warnings_of_a_run(tmp_path, corpus, tmp_path / "vocab.txt", micro_options_file, caplog)
    if order in ("frequency", "bilm-tf"):  # bilm-tf's published vocabulary starts </S>, <S>, <UNK>
        assert warnings == []
    elif order == "shuffled":
        assert len(warnings) == 1
        assert "is not in frequency order: the ranks of its ids and of its words' counts" in warnings[0]
    else:
        assert len(warnings) == 1
        assert "does not begin with <S>, </S> and <UNK>" in warnings[0]
