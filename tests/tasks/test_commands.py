"""``elmo task train`` and ``elmo task predict`` end to end on the small fixture biLM: files in the standard
formats, the feature cache reused, predictions written in the input's format, bad input named."""

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo.cli import main
from elmo.static_vectors import StaticVectors
from elmo.tasks.data import read_labelled, read_tagged, write_labelled, write_tagged
from elmo.tasks.qa_data import write_qa
from elmo.tasks.spec import TaskSpec
from elmo.weights import load_bilm, save_bilm
from elmo.windows import MAX_WINDOW_TOKENS, WINDOW_CONTEXT

sys.path.insert(0, str(Path(__file__).parent))
from test_qa_learning import toy_rows

SENTENCES = [(["mr", "ann", "saw", "the", "cat"], ["O", "B-PER", "O", "O", "O"]),
             (["the", "cat", "saw", "mr", "bob"], ["O", "O", "O", "O", "B-PER"]),
             (["ann", "ran"], ["O", "O"])] * 4
TEXTS = [("pos", "a good film"), ("neg", "a bad film"), ("pos", "good"), ("neg", "not good at all")] * 3
# Test splits whose last rows the training rows do not teach (bare names tagged as persons, labels turned over):
# a trained model scores neither 0 nor 1 on them, which a predictor that ignores the model cannot match.
TAGGED_TEST = [*SENTENCES[:3], (["mr", "cat", "ran"], ["O", "O", "O"]),
               (["ann", "saw", "bob"], ["B-PER", "O", "B-PER"])]
TEXTS_TEST = [*TEXTS[:4], ("neg", "a good film"), ("pos", "not good at all")]
WORDS = sorted({word for tokens, _ in SENTENCES for word in tokens}
               | {word for _, text in TEXTS for word in text.split()})  # the static vectors' vocabulary


def _files(tmp_path: Path, write, rows, suffix: str) -> list[str]:
    paths = []
    for name in ("train", "dev", "test"):
        path = tmp_path / f"{name}.{suffix}"
        write(path, rows)
        paths += [f"--{name}", str(path)]
    return paths


def test_tagger_trains_caches_layers_and_predicts(tmp_path: Path, fixture_dir: Path, capsys):
    splits = _files(tmp_path, write_tagged, SENTENCES, "bio")
    out = tmp_path / "tagger"
    command = ["task", "train", "tagger", *splits, "--model", str(fixture_dir), "--out", str(out), "--epochs", "2",
               "--quiet"]
    assert main(command) == 0
    assert "entity-f1: dev" in capsys.readouterr().out
    assert {"task.json", "model.safetensors", "metrics.json"} <= {p.name for p in out.iterdir()}
    cached = out / "features" / "train.h5"
    stamp = cached.stat().st_mtime_ns
    assert main(command) == 0
    assert cached.stat().st_mtime_ns == stamp  # same model and words: the cache is reused, not rewritten

    unlabelled = tmp_path / "input.txt"
    unlabelled.write_text("mr\nbob\nran\n\nthe\ncat\n", encoding="utf-8")
    predicted = tmp_path / "predicted.bio"
    assert main(["task", "predict", str(out), "--input", str(unlabelled), "--output", str(predicted)]) == 0
    rows = read_tagged(predicted)
    assert [tokens for tokens, _ in rows] == [["mr", "bob", "ran"], ["the", "cat"]]
    assert all(tag in ("O", "B-PER") for _, tags in rows for tag in tags)

    with_pos = tmp_path / "with-pos.txt"  # a column that is not BIO is ignored, as the help says
    with_pos.write_text("mr\tNNP\nbob NNP\nran\tVBD\n\nthe\tDT\ncat\tNN\n", encoding="utf-8")
    assert main(["task", "predict", str(out), "--input", str(with_pos), "--output", str(tmp_path / "pos.bio")]) == 0
    assert read_tagged(tmp_path / "pos.bio") == rows


def _train_then_predict_test(tmp_path: Path, fixture_dir: Path, kind: str, write, read, rows, test_rows,
                             suffix: str) -> tuple[dict, list]:
    """Trains ``kind`` on ELMo and random static vectors (4 epochs at a high rate: predictions that are not
    constant in seconds), predicts its own test split with ``task predict``; metrics.json and the rows read back."""
    splits = _files(tmp_path, write, rows, suffix)
    write(splits[-1], test_rows)
    vectors = tmp_path / "static.npz"
    StaticVectors(WORDS, np.random.default_rng(0).normal(size=(len(WORDS), 8))).save(vectors)
    out = tmp_path / kind
    assert main(["task", "train", kind, *splits, "--model", str(fixture_dir), "--out", str(out), "--static",
                 str(vectors), "--epochs", "4", "--min-epochs", "4", "--lr", "3e-2", "--quiet"]) == 0
    predicted = tmp_path / f"predicted.{suffix}"
    assert main(["task", "predict", str(out), "--input", splits[-1], "--output", str(predicted)]) == 0
    return json.loads((out / "metrics.json").read_text(encoding="utf-8")), read(predicted)


def test_tagger_predictions_score_the_test_f1_that_training_reported(tmp_path: Path, fixture_dir: Path):
    from seqeval.metrics import f1_score

    metrics, rows = _train_then_predict_test(tmp_path, fixture_dir, "tagger", write_tagged, read_tagged, SENTENCES,
                                             TAGGED_TEST, "bio")
    assert [tokens for tokens, _ in rows] == [tokens for tokens, _ in TAGGED_TEST]
    predicted_tags = [tags for _, tags in rows]
    assert {tag for tags in predicted_tags for tag in tags} == {"O", "B-PER"}
    assert metrics["metric"] == "entity-f1" and 0 < metrics["test"] < 1
    assert f1_score([tags for _, tags in TAGGED_TEST], predicted_tags) == pytest.approx(metrics["test"])


def test_classifier_predictions_score_the_test_accuracy_that_training_reported(tmp_path: Path, fixture_dir: Path):
    metrics, rows = _train_then_predict_test(tmp_path, fixture_dir, "classifier", write_labelled, read_labelled,
                                             TEXTS, TEXTS_TEST, "tsv")
    assert [text for _, text in rows] == [text for _, text in TEXTS_TEST]
    assert {label for label, _ in rows} == {"pos", "neg"}
    right = sum(guess == gold for (guess, _), (gold, _) in zip(rows, TEXTS_TEST, strict=True))
    assert metrics["metric"] == "accuracy" and 0 < metrics["test"] < 1
    assert right / len(TEXTS_TEST) == pytest.approx(metrics["test"])


def test_predict_refuses_a_biLM_whose_weights_changed_since_the_task_model_was_trained(tmp_path: Path,
                                                                                     fixture_dir: Path, capsys):
    """A shipped name can hold other weights after an upgrade; the old task model would read layers it was never
    trained on and predict nonsense without a word."""
    model = tmp_path / "bilm"
    model.mkdir()
    for name in ("options.json", "lm_weights.hdf5"):
        shutil.copy(fixture_dir / name, model / name)
    out = tmp_path / "tagger"
    assert main(["task", "train", "tagger", *_files(tmp_path, write_tagged, SENTENCES, "bio"), "--model", str(model),
                 "--out", str(out), "--epochs", "1", "--quiet"]) == 0
    unlabelled = tmp_path / "input.txt"
    unlabelled.write_text("mr\nbob\nran\n", encoding="utf-8")
    predict = ["task", "predict", str(out), "--input", str(unlabelled), "--output", str(tmp_path / "predicted.bio")]
    assert main(predict) == 0

    bilm = load_bilm(model / "options.json", model / "lm_weights.hdf5")
    with torch.no_grad():
        next(bilm.parameters()).add_(1e-3)
    save_bilm(bilm, model / "options.json", model / "lm_weights.hdf5")
    capsys.readouterr()
    assert main(predict) == 2
    assert "trained on the layers of another biLM" in capsys.readouterr().err


def test_predict_reads_long_texts_with_the_windows_the_features_were_read_with(tmp_path: Path, fixture_dir: Path):
    """The default windows changed (256 / 64 -> 512 / 128) under task models trained on the old ones: prediction
    read their long texts otherwise than training did. task.json now records them, and one written before reads
    as the defaults then."""
    out = tmp_path / "tagger"
    assert main(["task", "train", "tagger", *_files(tmp_path, write_tagged, SENTENCES, "bio"), "--model",
                 str(fixture_dir), "--out", str(out), "--epochs", "1", "--quiet"]) == 0
    spec_file = out / "task.json"
    recorded = json.loads(spec_file.read_text(encoding="utf-8"))
    assert (recorded["max_window_tokens"], recorded["window_context"]) == (MAX_WINDOW_TOKENS, WINDOW_CONTEXT)
    embedder = TaskSpec.read(out).load_embedder()
    assert (embedder.max_window_tokens, embedder.window_context) == (MAX_WINDOW_TOKENS, WINDOW_CONTEXT)
    del recorded["max_window_tokens"], recorded["window_context"]
    spec_file.write_text(json.dumps(recorded), encoding="utf-8")
    embedder = TaskSpec.read(out).load_embedder()
    assert (embedder.max_window_tokens, embedder.window_context) == (256, 64) != (MAX_WINDOW_TOKENS, WINDOW_CONTEXT)


def test_classifier_with_static_vectors_only(tmp_path: Path, fixture_dir: Path):
    vectors = tmp_path / "static.npz"
    words = ["a", "good", "bad", "film", "not", "at", "all"]
    StaticVectors(words, np.random.default_rng(0).normal(size=(len(words), 8))).save(vectors)
    splits = _files(tmp_path, write_labelled, TEXTS, "tsv")
    out = tmp_path / "classifier"
    assert main(["task", "train", "classifier", *splits, "--model", str(fixture_dir), "--out", str(out),
                 "--elmo", "none", "--static", str(vectors), "--epochs", "2", "--quiet"]) == 0
    assert not (out / "features").exists()  # no ELMo read, nothing embedded
    texts = tmp_path / "texts.txt"
    texts.write_text("a good film\nnot good\n", encoding="utf-8")
    predicted = tmp_path / "predicted.tsv"
    assert main(["task", "predict", str(out), "--input", str(texts), "--output", str(predicted)]) == 0
    rows = read_labelled(predicted)
    assert [text for _, text in rows] == ["a good film", "not good"]
    assert {label for label, _ in rows} <= {"pos", "neg"}


@pytest.mark.parametrize(("covered", "warning"), [
    (["film"], "--static {vectors} has a vector for 18 % of the 33 words of the train split"),  # 6 of 33: 2 per TEXTS
    (["a", "good", "bad", "film", "not", "at", "all"], None)])
def test_static_vectors_covering_under_half_the_train_words_are_warned_of_with_their_share(
        tmp_path: Path, fixture_dir: Path, caplog, covered: list[str], warning: str | None):
    """GloVe under the zh model covered ~8 % of the tokens and trained on zeros without a word said."""
    vectors = tmp_path / "static.npz"
    StaticVectors(covered, np.random.default_rng(0).normal(size=(len(covered), 8))).save(vectors)
    splits = _files(tmp_path, write_labelled, TEXTS, "tsv")
    with caplog.at_level("WARNING"):
        assert main(["task", "train", "classifier", *splits, "--model", str(fixture_dir), "--out",
                     str(tmp_path / "classifier"), "--elmo", "none", "--static", str(vectors), "--epochs", "1",
                     "--quiet"]) == 0
    found = [record.getMessage() for record in caplog.records if "--static" in record.getMessage()]
    if warning is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(warning.format(vectors=vectors))


def test_static_vectors_are_recorded_by_absolute_path_and_sha256_and_another_file_is_refused(
        tmp_path: Path, fixture_dir: Path, capsys, monkeypatch):
    """A relative --static failed from another directory, and a file rewritten at the path was read without a
    word (a rewritten vectors file flipped a prediction, exit 0)."""
    words = ["a", "good", "bad", "film", "not", "at", "all"]
    trained_dir, elsewhere = tmp_path / "trained", tmp_path / "elsewhere"
    trained_dir.mkdir()
    elsewhere.mkdir()
    vectors = trained_dir / "vec.npz"
    StaticVectors(words, np.random.default_rng(0).normal(size=(len(words), 8))).save(vectors)
    splits = _files(trained_dir, write_labelled, TEXTS, "tsv")
    monkeypatch.chdir(trained_dir)
    assert main(["task", "train", "classifier", *splits, "--model", str(fixture_dir), "--out", str(tmp_path / "out"),
                 "--elmo", "none", "--static", "vec.npz", "--epochs", "1", "--quiet"]) == 0
    spec = json.loads((tmp_path / "out" / "task.json").read_text(encoding="utf-8"))
    assert spec["static"] == str(vectors.resolve())
    assert spec["static_sha256"] == hashlib.sha256(vectors.read_bytes()).hexdigest()

    monkeypatch.chdir(elsewhere)
    (elsewhere / "texts.txt").write_text("a good film\nnot good\n", encoding="utf-8")
    predict = ["task", "predict", str(tmp_path / "out"), "--input", "texts.txt", "--output", "predicted.tsv"]
    assert main(predict) == 0
    StaticVectors(words, np.random.default_rng(1).normal(size=(len(words), 8))).save(vectors)
    capsys.readouterr()
    assert main(predict) == 2
    error = capsys.readouterr().err
    assert f"{vectors.resolve()}: these are not the static vectors this task model was trained on" in error
    vectors.unlink()
    assert main(predict) == 2
    assert f"{vectors.resolve()}: no such file" in capsys.readouterr().err


def test_a_biLM_given_by_a_relative_path_is_recorded_absolute_and_a_shipped_one_by_name(
        tmp_path: Path, fixture_dir: Path, monkeypatch):
    """task.json kept --model as typed, so predict run from another directory could not find a relative one (or
    found another biLM of that name)."""
    from elmo.tasks.commands import _recorded_model

    splits = _files(tmp_path, write_labelled, TEXTS, "tsv")  # absolute: tmp_path is
    monkeypatch.chdir(fixture_dir.parent)
    assert main(["task", "train", "classifier", "--train", splits[1], "--dev", splits[3], "--test", splits[5],
                 "--model", fixture_dir.name, "--out", str(tmp_path / "out"), "--epochs", "1", "--quiet"]) == 0
    assert json.loads((tmp_path / "out" / "task.json").read_text())["model"] == str(fixture_dir.resolve())
    monkeypatch.chdir(tmp_path)
    (tmp_path / "texts.txt").write_text("a good film\n", encoding="utf-8")
    assert main(["task", "predict", str(tmp_path / "out"), "--input", "texts.txt", "--output", "p.tsv"]) == 0
    assert _recorded_model("en") == "en"  # a shipped model keeps its name


def test_predict_reads_labels_only_where_every_line_starts_with_one_of_the_models(tmp_path: Path,
                                                                                    static_classifier: Path, capsys):
    def predicted_texts(content: str) -> list[str]:
        given = tmp_path / "given.txt"
        given.write_text(content, encoding="utf-8")
        assert main(["task", "predict", str(static_classifier), "--input", str(given), "--output",
                     str(tmp_path / "predicted.tsv")]) == 0
        return [text for _, text in read_labelled(tmp_path / "predicted.tsv")]

    assert predicted_texts("pos\ta good film\nneg\tnot good\n") == ["a good film", "not good"]
    # a tab after a word that is no label of the model: a tagger's CoNLL file, or another model's labels, whose
    # fields were classified as one text
    for content in ("film\ta good one\nscore\tnot good\n", "@playavolta\tO\nwins\tO\n", "1\ta good film\n"):
        given = tmp_path / "tabbed.txt"
        given.write_text(content, encoding="utf-8")
        assert main(["task", "predict", str(static_classifier), "--input", str(given)]) == 2
        first = content.partition("\t")[0]
        assert (f"line 1 holds a tab, but {first!r} before it is no label of the model (neg, pos)"
                in " ".join(capsys.readouterr().err.split()))
    given = tmp_path / "mixed.txt"
    given.write_text("pos\ta good film\nnot good at all\n", encoding="utf-8")
    assert main(["task", "predict", str(static_classifier), "--input", str(given)]) == 2
    assert "line 1 starts with a label of the model and a tab, line 2 does not" in capsys.readouterr().err


def test_predict_gives_one_prediction_per_line_whatever_else_splitlines_breaks_at(tmp_path: Path,
                                                                                  static_classifier: Path):
    """U+0085 (NEL) and U+2028 are no line ends in a text file; read as such, 2 lines gave 3 predictions."""
    given, predicted = tmp_path / "given.txt", tmp_path / "predicted.tsv"
    given.write_text("first review\x85still first\nsecond\u2028review\n", encoding="utf-8")
    assert main(["task", "predict", str(static_classifier), "--input", str(given), "--output", str(predicted)]) == 0
    lines = predicted.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and [line.split("\t")[1] for line in lines[:-1]] == ["first review\x85still first",
                                                                               "second\u2028review"]


@pytest.mark.parametrize(("content", "texts"), [
    ("a good film\n\n   \nnot good\n", ["a good film", "", "", "not good"]),
    ("pos\ta good film\n\nneg\tnot good\n", ["a good film", "", "not good"]),
])
def test_predict_answers_a_classifier_input_line_for_line_a_blank_one_with_an_empty_label(
        tmp_path: Path, static_classifier: Path, content: str, texts: list[str]):
    """Blank lines were dropped, so output line i no longer answered input line i."""
    given, predicted = tmp_path / "given.txt", tmp_path / "predicted.tsv"
    given.write_text(content, encoding="utf-8")
    assert main(["task", "predict", str(static_classifier), "--input", str(given), "--output", str(predicted)]) == 0
    rows = [line.split("\t") for line in predicted.read_text(encoding="utf-8").split("\n")[:-1]]
    assert [text for _, text in rows] == texts
    assert all((label == "") == (text == "") and label in ("", "pos", "neg") for label, text in rows)


def test_predict_reads_a_byte_order_mark_as_no_part_of_the_first_line(tmp_path: Path, static_classifier: Path):
    """It became a token '\\ufeff' written into the output, and a labelled file beginning with one was refused."""
    given, predicted = tmp_path / "given.txt", tmp_path / "predicted.tsv"
    for content in ("\ufeffa good film\nnot good\n", "\ufeffpos\ta good film\nneg\tnot good\n"):
        given.write_text(content, encoding="utf-8")
        assert main(["task", "predict", str(static_classifier), "--input", str(given), "--output",
                     str(predicted)]) == 0
        lines = predicted.read_text(encoding="utf-8").split("\n")
        assert [line.split("\t")[1] for line in lines[:-1]] == ["a good film", "not good"]


def test_a_malformed_line_is_named(tmp_path: Path, fixture_dir: Path, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_text("pos\ta fine line\nno tab here\n", encoding="utf-8")
    assert main(["task", "train", "classifier", "--train", str(bad), "--dev", str(bad), "--test", str(bad),
                 "--model", str(fixture_dir), "--out", str(tmp_path / "out")]) == 2
    assert "bad.tsv:2: expected 'label<TAB>text'" in capsys.readouterr().err


@pytest.mark.parametrize(("kind", "write", "rows", "split", "content", "expected"), [
    ("classifier", write_labelled, TEXTS, "dev", "pos\ta good film\n\nneg\tbad\npostive\ta fine film\n",
     "dev.tsv:4: label 'postive' of the dev split is not in the train split (neg, pos)"),
    ("tagger", write_tagged, SENTENCES, "test", "mr\tO\nann\tB-PER\n\nbob\tO\nran\tB-PRE\n",
     "test.tsv:5: tag 'B-PRE' of the test split is of entity type 'PRE', which the train split lacks (its types: "
     "PER)"),
    # Read as B-LOC: quoted as the file writes it.
    ("tagger", write_tagged, SENTENCES, "dev", "mr\tO\nann\tB-PER\n\nrome\tS-LOC\n",
     "dev.tsv:4: tag 'S-LOC' of the dev split is of entity type 'LOC', which the train split lacks (its types: PER)"),
])
def test_a_label_only_dev_or_test_holds_is_refused_naming_its_line_before_anything_is_embedded(
        tmp_path: Path, fixture_dir: Path, capsys, kind, write, rows, split, content, expected):
    """Labels came from all three splits, so a typo in dev or test became a class the model never trained on."""
    splits = _files(tmp_path, write, rows, "tsv")
    (tmp_path / f"{split}.tsv").write_text(content, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["task", "train", kind, *splits, "--model", str(fixture_dir), "--out", str(out), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert expected in error and len(error.splitlines()) == 1, error
    assert not out.exists()


def test_a_dev_or_test_split_that_is_the_train_file_is_warned_of(tmp_path: Path, caplog):
    """The same file as --train, --dev and --test scored the training data as if it were new, without a word."""
    import logging

    from elmo.tasks.pipeline import require_examples

    splits = {"train": [1], "dev": [1], "test": [1]}
    (tmp_path / "train.tsv").write_text("pos\ta\n")
    (tmp_path / "test.tsv").write_text("pos\tb\n")
    with caplog.at_level(logging.WARNING, logger="elmo.tasks.pipeline"):
        require_examples(splits, {"train": tmp_path / "train.tsv", "dev": tmp_path / "." / "train.tsv",
                                  "test": tmp_path / "test.tsv"})
    assert [record.getMessage().split(" (")[0] for record in caplog.records] == [
        "the dev split is the train file"]


def test_a_test_split_that_is_the_dev_file_is_warned_of_naming_both_flags(tmp_path: Path, caplog):
    """Early stopping chose the epoch on the test data, so the test score it reported was optimistic, without a word."""
    import logging

    from elmo.tasks.pipeline import require_examples

    for name in ("train", "dev"):
        (tmp_path / f"{name}.tsv").write_text(f"pos\t{name}\n")
    with caplog.at_level(logging.WARNING, logger="elmo.tasks.pipeline"):
        require_examples({"train": [1], "dev": [1], "test": [1]},
                         {"train": tmp_path / "train.tsv", "dev": tmp_path / "dev.tsv",
                          "test": tmp_path / "." / "dev.tsv"})
    assert [record.getMessage() for record in caplog.records] == [
        f"the test split is the dev file ({tmp_path / '.' / 'dev.tsv'}, given as --dev and --test): early stopping "
        "picks the epoch that scores best on it, so the test score is optimistic, not a measure on new data"]


def test_a_tagger_learns_B_and_I_of_each_train_type_so_a_longer_dev_entity_of_it_is_read(tmp_path: Path,
                                                                                         fixture_dir: Path):
    """Train's locations are one character each (S-LOC), dev's has two (B-LOC E-LOC): its I-LOC was refused as a
    label train lacks, quoted as 'I-LOC', a tag the file does not hold."""
    write_tagged(tmp_path / "train.bio", [(list("北去"), ["S-LOC", "O"]), (list("去北"), ["O", "S-LOC"])] * 3)
    (tmp_path / "dev.bio").write_text("北\tB-LOC\n京\tE-LOC\n去\tO\n\n", encoding="utf-8")
    out = tmp_path / "zh"
    assert main(["task", "train", "tagger", "--train", str(tmp_path / "train.bio"), "--dev", str(tmp_path / "dev.bio"),
                 "--test", str(tmp_path / "dev.bio"), "--model", str(fixture_dir), "--out", str(out), "--segment",
                 "jieba", "--epochs", "1", "--quiet"]) == 0
    assert json.loads((out / "task.json").read_text(encoding="utf-8"))["labels"] == ["O", "B-LOC", "I-LOC"]


def test_a_tagger_train_split_without_an_entity_tag_is_refused_naming_it_before_anything_is_embedded(
        tmp_path: Path, fixture_dir: Path, capsys, no_model_load):
    """Every train tag O: the model could only tag O, and scored entity F1 0 after the whole run."""
    splits = _files(tmp_path, write_tagged, SENTENCES, "bio")
    write_tagged(tmp_path / "train.bio", [(tokens, ["O"] * len(tokens)) for tokens, _ in SENTENCES])
    out = tmp_path / "out"
    assert main(["task", "train", "tagger", *splits, "--model", str(fixture_dir), "--out", str(out), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert f"{tmp_path / 'train.bio'}: every tag of the train split is O" in error and len(error.splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("kind, write, rows", [("tagger", write_tagged, SENTENCES),
                                              ("classifier", write_labelled, TEXTS),
                                              ("qa", write_qa, toy_rows(4, 0))])
def test_an_empty_split_is_refused_in_one_line_before_anything_is_embedded(tmp_path: Path, fixture_dir: Path,
                                                                           capsys, kind, write, rows):
    """An empty --test was found only when scored, after training (ZeroDivisionError), and no model saved."""
    splits = _files(tmp_path, write, rows, "txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n", encoding="utf-8")
    splits[-1] = str(empty)
    out = tmp_path / "out"
    assert main(["task", "train", kind, *splits, "--model", str(fixture_dir), "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"{empty}: the test split holds no examples (a task model "
                                                   "trains on train, stops on dev and is scored on test)")
    assert not out.exists()


@pytest.mark.parametrize("kind, flag", [("classifier", ["--segment", "jieba"]), ("qa", ["--segment", "jieba"]),
                                        ("tagger", ["--max-words", "5"]), ("qa", ["--max-words", "5"])])
def test_an_option_the_task_kind_does_not_use_is_refused(tmp_path: Path, fixture_dir: Path, capsys, kind, flag):
    missing = str(tmp_path / "none.txt")  # refused before any file is read
    assert main(["task", "train", kind, "--train", missing, "--dev", missing, "--test", missing,
                 "--model", str(fixture_dir), "--out", str(tmp_path / "out"), *flag]) == 2
    assert f"{flag[0]} " in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_character_tagger_reads_jieba_words_and_keeps_characters(tmp_path: Path, fixture_dir: Path):
    sentences = [(list("北京很大"), ["B-LOC", "I-LOC", "O", "O"]), (list("我在上海"), ["O", "O", "B-LOC", "I-LOC"])] * 3
    splits = _files(tmp_path, write_tagged, sentences, "bio")
    out = tmp_path / "zh"
    assert main(["task", "train", "tagger", *splits, "--model", str(fixture_dir), "--out", str(out),
                 "--segment", "jieba", "--epochs", "1", "--quiet"]) == 0
    spec = json.loads((out / "task.json").read_text(encoding="utf-8"))
    assert spec["segment"] == "jieba" and spec["positions"] is True
    predicted = tmp_path / "predicted.bio"
    assert main(["task", "predict", str(out), "--input", str(tmp_path / "test.bio"), "--output", str(predicted)]) == 0
    assert [tokens for tokens, _ in read_tagged(predicted)] == [tokens for tokens, _ in sentences]


def test_fine_tuning_trains_the_bilm_and_saves_it(tmp_path: Path, fixture_dir: Path):
    from safetensors.torch import load_file

    from elmo.model_dir import ModelDir

    splits = _files(tmp_path, write_tagged, SENTENCES, "bio")
    out = tmp_path / "fine-tuned"
    assert main(["task", "train", "tagger", *splits, "--model", str(fixture_dir), "--out", str(out), "--epochs", "1",
                 "--fine-tune", "--lr", "1e-2", "--quiet"]) == 0
    assert not (out / "features").exists()  # nothing cached: the biLM runs inside the model
    saved = load_file(str(out / "model.safetensors"))
    original = ModelDir.find(str(fixture_dir)).load_bilm().state_dict()
    bilm_names = [name for name in saved if name.startswith("features.elmo_layer.bilm.")]
    assert bilm_names
    assert any(not torch.equal(saved[name], original[name.removeprefix("features.elmo_layer.bilm.")])
               for name in bilm_names)
    predicted = tmp_path / "predicted.bio"
    assert main(["task", "predict", str(out), "--input", str(tmp_path / "test.bio"), "--output", str(predicted)]) == 0
    assert len(read_tagged(predicted)) == len(SENTENCES)


@pytest.fixture
def static_classifier(tmp_path: Path, fixture_dir: Path) -> Path:
    """A classifier on random static vectors (no ELMo: quick to train), and ``texts.txt`` beside it to predict."""
    vectors = tmp_path / "static.npz"
    words = ["a", "good", "bad", "film", "not", "at", "all"]
    StaticVectors(words, np.random.default_rng(0).normal(size=(len(words), 8))).save(vectors)
    out = tmp_path / "classifier"
    assert main(["task", "train", "classifier", *_files(tmp_path, write_labelled, TEXTS, "tsv"), "--model",
                 str(fixture_dir), "--out", str(out), "--elmo", "none", "--static", str(vectors), "--epochs", "1",
                 "--quiet"]) == 0
    (tmp_path / "texts.txt").write_text("a good film\nnot good\n", encoding="utf-8")
    return out


def test_predict_without_output_appends_to_a_redirected_stdout_instead_of_truncating_it(tmp_path: Path,
                                                                                        static_classifier: Path):
    log = tmp_path / "log.txt"
    log.write_text("earlier output\n", encoding="utf-8")
    with log.open("a", encoding="utf-8") as stdout:  # as `elmo task predict ... >> log.txt` runs it
        subprocess.run([sys.executable, "-m", "elmo.cli", "task", "predict", str(static_classifier), "--input",
                        str(tmp_path / "texts.txt")], stdout=stdout, check=True)
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "earlier output"
    assert [line.split("\t")[1] for line in lines[1:]] == ["a good film", "not good"]
    assert {line.split("\t")[0] for line in lines[1:]} <= {"pos", "neg"}


def test_predict_to_a_file_that_fails_halfway_keeps_the_previous_file(tmp_path: Path, static_classifier: Path,
                                                                      monkeypatch):
    from elmo.tasks import commands

    predicted = tmp_path / "predicted.tsv"
    predicted.write_text("the previous predictions\n", encoding="utf-8")

    def write_half(path, rows):
        Path(path).write_text(f"{rows[0][0]}\t{rows[0][1]}\n", encoding="utf-8")
        raise ValueError("disk full")

    monkeypatch.setattr(commands, "write_labelled", write_half)
    assert main(["task", "predict", str(static_classifier), "--input", str(tmp_path / "texts.txt"), "--output",
                 str(predicted)]) == 2
    assert predicted.read_text(encoding="utf-8") == "the previous predictions\n"
    assert sorted(path.name for path in tmp_path.glob("*predicted*")) == ["predicted.tsv"]


@pytest.mark.parametrize(("kind", "flags", "expected"), [
    ("tagger", ["--passage-only"], "--passage-only shape a qa model's answers; a tagger has none"),
    ("classifier", ["--max-answer-tokens", "3"], "--max-answer-tokens shape a qa model's answers"),
    ("tagger", ["--max-answer-tokens", "30"], "--max-answer-tokens shape"),  # the default, given on purpose
    ("tagger", ["--max-answer", "3", "--passage-only"], "--max-answer-tokens, --passage-only shape"),
    ("tagger", ["--encoder-layers", "3"], "--encoder-layers shape the transformer encoder; --encoder bilstm"),
    ("qa", ["--encoder", "bilstm", "--encoder-heads", "4"], "--encoder-heads shape the transformer encoder"),
    ("tagger", ["--encoder", "transformer", "--hidden", "3", "--encoder-heads", "4"],
     "the transformer's width 2 * hidden = 6 is not divisible by 4 heads"),
    ("classifier", ["--fine-tune", "--elmo", "none"], "--fine-tune trains the biLM with the task; it needs --elmo"),
    ("tagger", ["--out", "afile"], "--out afile is a file; expected a directory"),
    ("tagger", ["--cache", "afile"], "--cache afile is a file; expected a directory"),
    ("qa", ["--out", "afile/out"], "--out afile/out: afile is a file, not a directory to write in"),
    ("tagger", ["--epochs", "2", "--min-epochs", "10"], "--min-epochs 10 is more than --epochs 2"),
])
def test_an_option_that_would_be_ignored_or_fail_later_is_refused_before_any_file_is_read(
        tmp_path: Path, fixture_dir: Path, capsys, monkeypatch, kind, flags, expected):
    """Each was found only after the splits were read (and embedded, or the whole run trained), or never."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("kept")
    missing = str(tmp_path / "none.txt")  # the first file read would be refused as missing
    assert main(["task", "train", kind, "--train", missing, "--dev", missing, "--test", missing,
                 "--model", str(fixture_dir), "--out", "out", *flags]) == 2
    error = capsys.readouterr().err
    assert expected in error and len(error.splitlines()) == 1, error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile"] and (tmp_path / "afile").read_text() == "kept"


@pytest.mark.parametrize(("flags", "expected"), [
    (["--elmo", "top", "--mix-l2", "5"], "--mix-l2 pulls a learned scalar mix towards even weights; --elmo top "
                                         "learns no mix, so it has no effect"),
    (["--elmo", "none", "--static", "glove", "--cache", "c"], "--elmo none reads no biLM, so nothing is cached"),
    (["--fine-tune", "--cache", "c"], "--fine-tune runs the biLM inside the task model, so nothing is cached"),
])
def test_an_option_the_method_does_without_is_warned_of_before_any_file_is_read(tmp_path: Path, fixture_dir: Path,
                                                                                caplog, flags, expected):
    """They did nothing without a word; refused, they would break scripts that give every method the same flags."""
    missing = str(tmp_path / "none.txt")
    assert main(["task", "train", "classifier", "--train", missing, "--dev", missing, "--test", missing,
                 "--model", str(fixture_dir), "--out", str(tmp_path / "out"), *flags]) == 2  # the missing file
    assert [record.getMessage() for record in caplog.records if expected in record.getMessage()]


def test_predict_refuses_an_output_that_is_its_input_or_a_directory_before_the_model_loads(
        tmp_path: Path, capsys, monkeypatch):
    """--output over --input replaced the gold file with predictions; a directory was a traceback after
    predicting."""
    from elmo.tasks.spec import TaskSpec

    def no_load(*args, **kwargs):
        raise AssertionError("the task model was loaded before --output was checked")

    monkeypatch.setattr(TaskSpec, "load", no_load)
    monkeypatch.chdir(tmp_path)
    gold = tmp_path / "gold.conll"
    gold.write_text("mr\tO\nbob\tB-PER\n")
    (tmp_path / "emptydir").mkdir()
    model = tmp_path / "tagger"
    model.mkdir()
    for output, expected in [("gold.conll", "--output gold.conll is an input of this command"),
                             ("tagger/model.safetensors", "--output tagger/model.safetensors is inside the task model"),
                             ("./gold.conll", "--output ./gold.conll is an input of this command (the same file"),
                             ("emptydir", "--output emptydir is a directory; expected the name of a file")]:
        assert main(["task", "predict", "tagger", "--input", str(gold), "--output", output]) == 2
        error = capsys.readouterr().err
        assert expected in error and len(error.splitlines()) == 1, error
    assert gold.read_text() == "mr\tO\nbob\tB-PER\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["emptydir", "gold.conll", "tagger"]


def test_predict_output_dash_writes_standard_output_not_a_file_named_dash(tmp_path: Path, static_classifier: Path,
                                                                         capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["task", "predict", str(static_classifier), "--input", "texts.txt", "--output", "-"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[1] for line in lines] == ["a good film", "not good"]
    assert not (tmp_path / "-").exists()


def _untrained_task_model(out: Path, kind: str, biLM: Path) -> Path:
    """A task model of ``kind`` on static vectors, saved untrained: these tests need it to be read, not to be right."""
    from elmo.tasks.spec import TaskSpec

    labels = {"tagger": ("O", "B-PER"), "classifier": ("neg", "pos"), "qa": ()}[kind]
    spec = TaskSpec(kind, labels, None, str(biLM), static="random", static_dim=8, hidden=4)
    spec.save(spec.build(), out)
    return out


@pytest.fixture
def weights_never_load(monkeypatch):
    """The task model's weights may not be read: the test's input is refused before they are."""
    from elmo.tasks import spec

    def no_load(*args, **kwargs):
        raise AssertionError("the task model's weights were loaded before its input was checked")

    monkeypatch.setattr(spec, "load_file", no_load)


@pytest.mark.parametrize(("kind", "items"), [("tagger", "sentences to tag"), ("classifier", "texts to classify"),
                                             ("qa", "questions")])
@pytest.mark.parametrize("content", ["", "\n  \n\t\n"])
def test_predict_refuses_an_input_with_nothing_to_predict_before_the_model_loads(
        tmp_path: Path, fixture_dir: Path, capsys, weights_never_load, kind: str, items: str, content: str):
    """It wrote no predictions and exited 0, where `task train` refuses an empty split."""
    out = _untrained_task_model(tmp_path / "model", kind, fixture_dir)
    given, predicted = tmp_path / "empty.txt", tmp_path / "predicted.txt"
    given.write_text(content, encoding="utf-8")
    assert main(["task", "predict", str(out), "--input", str(given), "--output", str(predicted)]) == 2
    error = capsys.readouterr().err
    assert error == f"elmo task: error: --input {given} holds no {items} (it is empty or blank); nothing to predict\n"
    assert not predicted.exists()


@pytest.mark.parametrize(("kind", "what"), [("tagger", "tagging"), ("classifier", "text"), ("qa", "JSON-lines QA")])
def test_predict_names_an_input_that_is_not_utf8_or_is_a_directory_before_the_model_loads(
        tmp_path: Path, fixture_dir: Path, capsys, weights_never_load, kind: str, what: str):
    out = _untrained_task_model(tmp_path / "model", kind, fixture_dir)
    binary = tmp_path / "binary.bin"
    binary.write_bytes(b"ok\n\x00\xff\xfe")  # \xff, after "ok\n\x00", is byte 4, on line 2
    assert main(["task", "predict", str(out), "--input", str(binary)]) == 2
    assert capsys.readouterr().err.startswith(f"elmo task: error: {binary} is not UTF-8 text: byte 4 "
                                              "(line 2, counting from 1) is 0xff")
    (tmp_path / "adir").mkdir()
    assert main(["task", "predict", str(out), "--input", str(tmp_path / "adir")]) == 2
    assert capsys.readouterr().err == f"elmo task: error: {tmp_path / 'adir'} is a directory; expected a {what} file\n"


def test_predict_refuses_weights_beside_another_models_task_json_in_one_line(tmp_path: Path, fixture_dir: Path,
                                                                             capsys):
    """A train interrupted between its writes left such a pair; predict ended in a torch traceback."""
    from safetensors.torch import save_file

    out = _untrained_task_model(tmp_path / "model", "classifier", fixture_dir)
    other = _untrained_task_model(tmp_path / "other", "tagger", fixture_dir)
    shutil.copyfile(other / "model.safetensors", out / "model.safetensors")
    (tmp_path / "texts.txt").write_text("a good film\n", encoding="utf-8")
    assert main(["task", "predict", str(out), "--input", str(tmp_path / "texts.txt")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"elmo task: error: {out}: model.safetensors does not hold the model task.json describes")
    assert len(error.splitlines()) == 1
    save_file({"nothing": torch.zeros(1)}, str(out / "model.safetensors"))  # a file of safetensors, of no model
    assert main(["task", "predict", str(out), "--input", str(tmp_path / "texts.txt")]) == 2
    assert "model.safetensors does not hold the model task.json describes" in capsys.readouterr().err


def test_train_names_a_split_that_is_not_utf8_or_is_a_directory_before_anything_is_embedded(
        tmp_path: Path, fixture_dir: Path, capsys):
    splits = _files(tmp_path, write_tagged, SENTENCES, "bio")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("café\tO\n".encode("latin-1"))  # é is byte 3, on line 1
    out = tmp_path / "out"
    for train, expected in [(latin1, f"{latin1} is not UTF-8 text: byte 3 (line 1, counting from 1) is 0xe9"),
                            (tmp_path, f"{tmp_path} is a directory; expected a tagging file")]:
        splits[1] = str(train)
        assert main(["task", "train", "tagger", *splits, "--model", str(fixture_dir), "--out", str(out),
                     "--quiet"]) == 2
        error = capsys.readouterr().err
        assert error.startswith(f"elmo task: error: {expected}") and len(error.splitlines()) == 1, error
        assert not out.exists()


@pytest.mark.parametrize(("flag", "value", "maximum"), [
    ("--hidden", "99999999999999999999", 16384), ("--hidden", "16385", 16384), ("--epochs", "10001", 10000),
    ("--patience", "10001", 10000), ("--min-epochs", "10001", 10000), ("--batch-size", "65537", 65536),
    ("--encoder-layers", "65", 64), ("--encoder-heads", "1025", 1024), ("--seed", str(2**32), 2**32 - 1),
])
def test_a_size_past_its_maximum_is_refused_while_the_command_line_is_parsed(tmp_path: Path, capsys, monkeypatch,
                                                                            flag: str, value: str, maximum: int):
    """--hidden 1e20 ended in a torch traceback (and 1e9 in one of memory) after the features were embedded;
    --seed 2**32 in numpy's, after them too."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(["task", "train", "tagger", "--train", "t", "--dev", "d", "--test", "t", "--model", "m", "--out", "out",
              "--encoder", "transformer", flag, value])
    assert exited.value.code == 2
    minimum = 0 if flag == "--seed" else 1
    assert f"argument {flag}: {value}: expected a whole number >= {minimum} and <= {maximum}\n" in \
        capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_train_help_states_each_sizes_maximum(capsys):
    with pytest.raises(SystemExit):
        main(["task", "train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, maximum in [("--hidden", "16,384"), ("--epochs", "10,000"), ("--patience", "10,000"),
                          ("--min-epochs", "10,000"), ("--batch-size", "65,536"), ("--encoder-layers", "64"),
                          ("--encoder-heads", "1,024"), ("--seed", "4,294,967,295")]:
        described = text[text.rindex(f"{flag} {flag.lstrip('-').upper().replace('-', '_')}"):]  # not the usage
        assert f"at most {maximum}" in described[:described.index(" --", 2)], flag  # its own help, not the next


def test_train_refuses_an_out_holding_other_files_or_a_cache_inside_out_before_any_file_is_read(
        tmp_path: Path, fixture_dir: Path, capsys, monkeypatch):
    """--out is replaced whole when the model is saved: its other files, or a cache elsewhere in it, would go."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "notes.txt").write_text("mine", encoding="utf-8")
    missing = str(tmp_path / "none.txt")  # the first file read would be refused as missing
    for flags, expected in [(["--out", "runs"], "--out runs holds files other than a task model's (notes.txt)"),
                            (["--out", "new", "--cache", "new/cache"], "--cache new/cache lies in --out new")]:
        assert main(["task", "train", "tagger", "--train", missing, "--dev", missing, "--test", missing,
                     "--model", str(fixture_dir), *flags]) == 2
        error = capsys.readouterr().err
        assert expected in error and len(error.splitlines()) == 1, error
    assert sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")) == ["runs", "runs/notes.txt"]
