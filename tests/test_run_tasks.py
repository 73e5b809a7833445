"""scripts/run_tasks.py: a probe result is reused only for the same data as the corpora give it now, and the mix
weights' error bars are the sample standard deviation the tables report."""

import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType

import pytest

from elmo.tasks import probes
from elmo.tasks.probes import SenseInstance, TaggedLine

SCRIPT = Path(__file__).parents[1] / "scripts" / "run_tasks.py"
FIXTURE = Path(__file__).parent / "fixtures" / "elmo"


def fresh_run_tasks() -> ModuleType:
    """The script as a new process of it sees it: nothing cached from an earlier run."""
    spec = importlib.util.spec_from_file_location("run_tasks", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tagged_lines(n_words: int, tags: tuple[str, ...]) -> list[TaggedLine]:
    """12 lines of the biLM's train split and 4 held out, each of ``n_words`` words tagged in turn with ``tags``."""
    words = ("the", "dog", "runs", "fast", "home")[:n_words]
    line_tags = tuple(tags[i % len(tags)] for i in range(n_words))
    return [TaggedLine(words, line_tags, "train" if n < 12 else "test") for n in range(16)]


def test_a_pos_probe_is_computed_again_when_its_tagged_lines_change(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(probes, "brown_pos_lines", lambda: tagged_lines(3, ("n", "v")))
    out = fresh_run_tasks().pos_probe_job("en", str(FIXTURE), str(tmp_path), (8, 3))
    first = json.loads(Path(out).read_text())
    assert (first["tags"], first["train_tokens"], first["test_tokens"]) == (2, 8 * 3, 3 * 3)

    monkeypatch.setattr(probes, "brown_pos_lines", lambda: tagged_lines(3, ("n", "v")))
    fresh_run_tasks().pos_probe_job("en", str(FIXTURE), str(tmp_path), (8, 3))
    assert json.loads(Path(out).read_text())["seconds"] == first["seconds"]  # the same lines: kept

    monkeypatch.setattr(probes, "brown_pos_lines", lambda: tagged_lines(4, ("n", "v", "a")))
    fresh_run_tasks().pos_probe_job("en", str(FIXTURE), str(tmp_path), (8, 3))
    again = json.loads(Path(out).read_text())
    assert (again["tags"], again["train_tokens"], again["test_tokens"]) == (3, 8 * 4, 3 * 4)


def sense_instances(lemmas: tuple[str, ...]) -> list[SenseInstance]:
    """Two synsets of each lemma, two examples of each (the lemma first), so every instance is scored."""
    return [SenseInstance(lemma, "n", f"{lemma}-{synset}", (lemma, "near", f"word{example}"), 0)
            for lemma in lemmas for synset in (1, 2) for example in range(2)]


def test_a_word_sense_probe_is_computed_again_when_its_instances_change(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setattr(probes, "wordnet_instances", lambda tokenize: sense_instances(("bank",)))
    out = fresh_run_tasks().wsd_probe_job(str(FIXTURE), str(tmp_path), 10)
    assert (json.loads(Path(out).read_text())["instances"], json.loads(Path(out).read_text())["lemmas"]) == (4, 1)

    monkeypatch.setattr(probes, "wordnet_instances", lambda tokenize: sense_instances(("bank", "bat")))
    fresh_run_tasks().wsd_probe_job(str(FIXTURE), str(tmp_path), 10)
    result = json.loads(Path(out).read_text())
    assert (result["instances"], result["lemmas"], result["scored"]) == (8, 2, 8)


def test_the_mix_weight_error_bars_are_the_sample_standard_deviation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    import matplotlib.axes

    run_tasks = fresh_run_tasks()
    task = next(task for task in run_tasks.TASKS if task.name == "en-sentiment")
    weights = [[0.2, 0.3, 0.5], [0.4, 0.3, 0.3], [0.3, 0.5, 0.2]]
    results = {task.name: {"elmo-mix": [{"mix_weights": w} for w in weights],
                           "elmo+static": [{"mix_weights": [0.1, 0.6, 0.3]}]}}
    bars = []
    monkeypatch.setattr(matplotlib.axes.Axes, "bar", lambda self, x, height, width, yerr, label: bars.append(
        (list(height), list(yerr))))
    run_tasks.plot_mix_weights(results, (task,), tmp_path / "mix.png")

    for layer, (means, errors) in enumerate(bars):
        values = [w[layer] for w in weights]
        mean = sum(values) / 3
        assert means == pytest.approx([mean, [0.1, 0.6, 0.3][layer]])
        sample_std = math.sqrt(sum((value - mean) ** 2 for value in values) / (3 - 1))
        assert errors == pytest.approx([sample_std, 0.0])  # one run (elmo+static): no spread
    assert len(bars) == 3


def test_the_first_questions_file_keeps_a_row_holding_a_line_separator_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """train-N.jsonl was cut with splitlines, which ends a line at U+2028 too: a row was cut in two, N lines
    held fewer than N questions and the file was no longer JSON lines."""
    from elmo.tasks import qa_cloze

    def row(number: int, separator: str = "") -> dict:
        passage = f"Paris is big{separator} . Rome is old ."
        return {"id": f"q{number}", "question": "XXXXX is big", "passage": passage,
                "answers": [{"text": "Paris", "start": 0}]}

    rows = [row(0, "\u2028"), row(1, "\x85"), row(2)]
    monkeypatch.setattr(qa_cloze, "wiki_cloze", lambda: {"train": rows, "dev": [row(3)], "test": [row(4)]})
    paths = {name: tmp_path / f"{name}.jsonl" for name in ("train", "dev", "test")}
    head = tmp_path / "train-2.jsonl"
    head.write_text("a head cut by an older run\n", encoding="utf-8")
    assert fresh_run_tasks().write_cloze_data(paths, smoke=False, train_questions=2)["train"] == head
    assert head.read_text(encoding="utf-8") == "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[:2])
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "dev.jsonl", "split.json", "test.jsonl", "train-2.jsonl", "train.jsonl"]  # no partial file left


def test_a_smoke_cut_keeps_only_dev_and_test_rows_whose_labels_train_holds():
    """`elmo task train` refuses a label train lacks, and 60 smoke training tweets lack some WNUT-16 types."""
    run_tasks = fresh_run_tasks()
    train = [(["Ann", "ran"], ["B-PER", "O"])]
    part = [(["Bob"], ["B-PER"]), (["in", "Rome"], ["O", "B-LOC"]), (["ran"], ["O"])]
    assert run_tasks.with_labels_of(train, part, "tagger") == [part[0], part[2]]
    assert run_tasks.with_labels_of([("pos", "good")], [("neg", "bad"), ("pos", "fine")], "classifier") == [
        ("pos", "fine")]


@pytest.fixture
def report_folders(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[ModuleType, list[tuple[Path, Path]]]:
    """run_tasks with its repository at ``tmp_path/repo``, the caller in ``tmp_path/caller``, and neither task data
    nor a report written: each report's (work, docs) folders as ``main`` gives them, in the folder it ends in."""
    run_tasks = fresh_run_tasks()
    repository = tmp_path / "repo"
    for folder in (repository, tmp_path / "caller"):
        folder.mkdir()
    monkeypatch.setattr(run_tasks, "REPOSITORY", repository)
    monkeypatch.chdir(tmp_path / "caller")  # main moves to the repository; this puts the test back
    reports: list[tuple[Path, Path]] = []
    monkeypatch.setattr(run_tasks, "write_task_data", lambda task, work, smoke: {
        name: work / "data" / task.name / f"{name}.{task.suffix}" for name in ("train", "dev", "test")})
    monkeypatch.setattr(run_tasks, "write_report", lambda work, docs, *rest: reports.append(
        (Path.cwd() / work, Path.cwd() / docs)))
    return run_tasks, reports


REPORT_ONLY = ("--report-only", "--skip-probes", "--tasks", "en-sentiment")


def test_a_smoke_run_works_and_reports_in_a_folder_of_its_own(report_folders: tuple, tmp_path: Path):
    """In data/tasks a smoke run cut the real data to 60/20/30 and wrote its tables into docs/."""
    run_tasks, reports = report_folders
    assert run_tasks.main(["--smoke", "--work", "mine", *REPORT_ONLY]) == 0
    assert reports.pop() == (tmp_path / "caller" / "mine", tmp_path / "caller" / "mine" / "docs")
    assert run_tasks.main(["--smoke", *REPORT_ONLY]) == 0
    assert run_tasks.main([*REPORT_ONLY]) == 0
    smoke, real = tmp_path / "repo" / "data" / "tasks-smoke", tmp_path / "repo" / "data" / "tasks"
    assert reports == [(smoke, smoke / "docs"), (real, tmp_path / "repo" / "docs")]


def test_relative_folders_name_the_callers_folders_though_main_moves_to_the_repository(
    report_folders: tuple, tmp_path: Path
):
    run_tasks, reports = report_folders
    work = tmp_path / "repo" / "data" / "elsewhere"  # in the repository: main moves there
    argv = ["--work", str(work), "--docs", "my-docs", "--corpus-root", "my-corpora", *REPORT_ONLY]
    assert run_tasks.arguments(argv).corpus_root == tmp_path / "caller" / "my-corpora"
    assert run_tasks.main(argv) == 0
    assert Path.cwd() == tmp_path / "repo"
    assert reports == [(work, tmp_path / "caller" / "my-docs")]


@pytest.mark.parametrize(("flag", "name"), [("--tasks", "en-nre"), ("--methods", "elmo_mix")])
def test_an_unknown_task_or_method_is_refused_before_any_work(
    report_folders: tuple, capsys: pytest.CaptureFixture, flag: str, name: str
):
    """Unknown names used to run nothing and write an empty results.json, exit status 0."""
    run_tasks, reports = report_folders
    with pytest.raises(SystemExit) as exit_info:
        run_tasks.main([flag, name, "--report-only"])
    assert exit_info.value.code == 2 and f"invalid choice: '{name}'" in capsys.readouterr().err
    assert reports == []


def test_a_rerun_with_other_inputs_removes_the_old_digest_with_the_old_metrics(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """A run of other inputs that fails after writing metrics.json must not leave the old run's digest beside
    them: a later run of the old inputs then took the failed run's metrics for its own."""
    import elmo.cli

    run_tasks = fresh_run_tasks()
    monkeypatch.setattr("torch.set_num_threads", lambda threads: None)
    for split in ("train", "dev", "test"):
        (tmp_path / f"{split}.tsv").write_text(f"pos\t{split} text\n", encoding="utf-8")
    out = tmp_path / "runs" / "task" / "method" / "seed-0"
    started: list[str] = []

    def train(epochs: str, code: int):
        def main(argv: list[str]) -> int:
            started.append(epochs)
            out.mkdir(parents=True, exist_ok=True)
            (out / "task.json").write_text(json.dumps({"elmo": None}))  # no biLM to check
            (out / "metrics.json").write_text(json.dumps({"epochs": epochs}))
            return code
        return main

    def argv(epochs: str) -> list[str]:
        return ["task", "train", "classifier", *(item for split in ("train", "dev", "test")
                                                 for item in (f"--{split}", str(tmp_path / f"{split}.tsv"))),
                "--static", "none", "--epochs", epochs, "--seed", "0", "--out", str(out), "--quiet"]

    monkeypatch.setattr(elmo.cli, "main", train("10", 0))
    assert run_tasks.train_job(argv("10")) == (str(out), 0)
    assert run_tasks.train_job(argv("10")) == (str(out), 0) and started == ["10"]  # the same inputs: kept
    monkeypatch.setattr(elmo.cli, "main", train("5", 1))
    assert run_tasks.train_job(argv("5")) == (str(out), 1)  # fails after writing its metrics
    assert not (out / run_tasks.INPUTS_DIGEST).is_file()
    monkeypatch.setattr(elmo.cli, "main", train("10", 0))
    run_tasks.train_job(argv("10"))
    assert started == ["10", "5", "10"] and json.loads((out / "metrics.json").read_text()) == {"epochs": "10"}
