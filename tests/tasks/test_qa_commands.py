"""``elmo task train qa`` and ``elmo task predict`` on the fixture biLM: the test F1 that training reports is
the F1 of the answers that ``predict`` writes, scored independently against the gold answers."""

import json
import sys
from pathlib import Path

import pytest

from elmo.cli import main
from elmo.tasks.qa_data import write_qa
from elmo.tasks.qa_metrics import score_answers

sys.path.insert(0, str(Path(__file__).parent))
from test_qa_learning import toy_rows


def test_qa_trains_on_cached_layers_and_predict_gives_the_reported_answers(tmp_path: Path, fixture_dir: Path):
    splits = []
    for name, size, seed in (("train", 40, 1), ("dev", 12, 2), ("test", 12, 3)):
        write_qa(tmp_path / f"{name}.jsonl", toy_rows(size, seed))
        splits += [f"--{name}", str(tmp_path / f"{name}.jsonl")]
    out = tmp_path / "qa"
    assert main(["task", "train", "qa", *splits, "--model", str(fixture_dir), "--out", str(out), "--epochs", "2",
                 "--hidden", "8", "--max-answer-tokens", "3", "--quiet"]) == 0
    cached = {path.name for path in (out / "features").iterdir()}
    assert {"train-question.h5", "train-passage.h5", "test-passage.h5"} <= cached
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))

    answers_file = tmp_path / "answers.jsonl"
    assert main(["task", "predict", str(out), "--input", str(tmp_path / "test.jsonl"),
                 "--output", str(answers_file)]) == 0
    answers = [json.loads(line) for line in answers_file.read_text(encoding="utf-8").splitlines()]
    rows = toy_rows(12, 3)
    assert [answer["id"] for answer in answers] == [row["id"] for row in rows]
    for answer, row in zip(answers, rows, strict=True):
        assert answer["answer"] in row["passage"] and 1 <= len(answer["answer"].split()) <= 3
    scores = score_answers({a["id"]: a["answer"] for a in answers},
                           {row["id"]: [gold["text"] for gold in row["answers"]] for row in rows})
    assert scores["f1"] == pytest.approx(metrics["test"])
    assert scores["exact_match"] == pytest.approx(metrics["test_exact_match"])

    # Answers in the input are not read (the help says so): malformed or wrong ones change nothing.
    for row, answers in zip(rows, ([{"text": "w0"}], "Rome", [{"text": "x", "start": 999}]), strict=False):
        row["answers"] = answers
    write_qa(tmp_path / "questions.jsonl", rows)
    assert main(["task", "predict", str(out), "--input", str(tmp_path / "questions.jsonl"),
                 "--output", str(tmp_path / "again.jsonl")]) == 0
    assert (tmp_path / "again.jsonl").read_text(encoding="utf-8") == answers_file.read_text(encoding="utf-8")


@pytest.mark.parametrize("command", ["train", "predict"])
def test_a_qa_line_that_is_no_json_object_is_refused_in_one_line_naming_it(tmp_path: Path, fixture_dir: Path, capsys,
                                                                           command):
    """A line such as "just a string" stopped both commands with an AttributeError traceback."""
    path = tmp_path / "rows.jsonl"
    write_qa(path, toy_rows(2, 0))
    with path.open("a", encoding="utf-8") as file:
        file.write('"just a string"\n')
    if command == "train":
        argv = ["task", "train", "qa", "--train", str(path), "--dev", str(path), "--test", str(path), "--model",
                str(fixture_dir), "--out", str(tmp_path / "qa"), "--quiet"]
    else:
        model = tmp_path / "model"
        model.mkdir()
        (model / "task.json").write_text(json.dumps({"kind": "qa", "labels": [], "elmo": None,
                                                     "model": str(fixture_dir)}), encoding="utf-8")
        argv = ["task", "predict", str(model), "--input", str(path)]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert f'{path}:3: expected a JSON object {{"id", "question", "passage", "answers"}}, got "just a string"' in error
    assert len(error.strip().splitlines()) == 1, error


def test_qa_refuses_fine_tuning_in_one_line(tmp_path: Path, fixture_dir: Path, capsys):
    write_qa(tmp_path / "a.jsonl", toy_rows(4, 0))
    path = str(tmp_path / "a.jsonl")
    assert main(["task", "train", "qa", "--train", path, "--dev", path, "--test", path, "--model", str(fixture_dir),
                 "--out", str(tmp_path / "x"), "--fine-tune"]) == 2
    assert "--fine-tune is not available for qa" in capsys.readouterr().err


def test_a_question_without_an_answer_span_is_refused_naming_its_file_before_any_embedding(
        tmp_path: Path, fixture_dir: Path, capsys, no_model_load):
    """It was refused only after every split's layers were cached (minutes on a real set), naming no file, and
    said 'no answer inside their passage' of a row that had no answers at all."""
    rows = toy_rows(6, 0)
    del rows[-1]["answers"]
    write_qa(tmp_path / "test.jsonl", rows)
    write_qa(tmp_path / "train.jsonl", toy_rows(6, 1))
    splits = ["--train", str(tmp_path / "train.jsonl"), "--dev", str(tmp_path / "train.jsonl"),
              "--test", str(tmp_path / "test.jsonl")]
    assert main(["task", "train", "qa", *splits, "--model", str(fixture_dir), "--out", str(tmp_path / "qa"),
                 "--cache", str(tmp_path / "cache"), "--quiet"]) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert (f"{tmp_path / 'test.jsonl'}: 1 question(s) without an answer span, first {rows[-1]['id']!r}: it has no "
            "answers") in error
    assert not (tmp_path / "cache").exists()
