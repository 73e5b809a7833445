"""scripts/domain_task.py keeps a work folder's data and runs for a rerun only when they were made for the same
task, model, data and flags; it reports one seed as well as several."""

import importlib.util
import json
import re
import shutil
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from elmo.tasks.data import read_labelled

SCRIPTS = Path(__file__).parents[2] / "scripts"


@pytest.fixture
def domain_task(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # it imports run_tasks, a script beside it
    spec = importlib.util.spec_from_file_location("domain_task", SCRIPTS / "domain_task.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_folder_made_for_another_task_or_model_is_refused_not_reused(domain_task, tmp_path: Path):
    record = tmp_path / "runs" / "general" / "made-with.json"
    made_with = {"model": "en", "fingerprint": "f44f"}
    domain_task.check_made_with(record, made_with)
    assert json.loads(record.read_text()) == made_with
    domain_task.check_made_with(record, made_with)  # the same: kept
    with pytest.raises(SystemExit, match=r"was made with .*'f44f'.*, not .*'0b1d'.*: give another --work"):
        domain_task.check_made_with(record, {"model": "en", "fingerprint": "0b1d"})


LICENSE_TASK = "en-license-categories"


@pytest.fixture
def trained(domain_task, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """``elmo task train`` replaced by a stand-in whose test accuracy is the test file's share of Copyleft rows plus
    seed / 100 (so a figure tells which data and seed made it), and the biLM by a fingerprint; the commands run."""
    import elmo.cli

    commands: list[list[str]] = []

    def train(argv: list[str]) -> int:
        commands.append(argv)
        test = read_labelled(_flag(argv, "--test"))
        accuracy = sum(label == "Copyleft" for label, _ in test) / len(test) + int(_flag(argv, "--seed")) / 100
        out = Path(_flag(argv, "--out"))
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.json").write_text(json.dumps({"test": accuracy}))
        return 0

    monkeypatch.setattr(elmo.cli, "main", train)
    monkeypatch.setattr(domain_task, "Embedder", SimpleNamespace(load=lambda model: SimpleNamespace(fingerprint="f4")))
    return commands


def _flag(argv: list[str], name: str) -> str:
    """The value of ``name`` in a command, given as ``--name value`` or ``--name=value``."""
    for index, item in enumerate(argv):
        if item == name:
            return argv[index + 1]
        if item.startswith(f"{name}="):
            return item.partition("=")[2]
    raise AssertionError(f"{name} not in {argv}")


def _set_rows(domain_task, monkeypatch: pytest.MonkeyPatch, test: list[tuple[str, str]]) -> None:
    train = [("Permissive", "mit text"), ("Copyleft", "gpl text")]
    monkeypatch.setitem(domain_task.TASKS, LICENSE_TASK, lambda: {"train": train, "dev": train[:1], "test": test})
    # Each script run is a process of its own: the hashes of files rewritten since are not remembered.
    sys.modules["run_tasks"].file_sha256.cache_clear()


def _main(domain_task, work: Path, *seeds: int) -> dict:
    domain_task.main(["--task", LICENSE_TASK, "--model", "general=en", "--work", str(work), "--train-size", "2",
                      "--dev-size", "1", "--seeds", *map(str, seeds)])
    return json.loads((work / "results.json").read_text())


@pytest.mark.parametrize("data_deleted", [False, True], ids=["data-kept", "data-deleted"])
def test_a_new_split_of_the_same_sizes_is_written_and_its_runs_trained_again(
    domain_task, trained: list, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data_deleted: bool
):
    old_test = [("Permissive", "a b"), ("Copyleft", "c d")]
    _set_rows(domain_task, monkeypatch, old_test)
    assert _main(domain_task, tmp_path, 0, 1)["test_accuracy"]["general"] == pytest.approx([0.5, 0.51])
    assert len(trained) == 2

    if data_deleted:  # the runs' own record must tell their data from the new files
        shutil.rmtree(tmp_path / "data")
    new_test = [("Copyleft", "new split"), ("Copyleft", "other"), ("Permissive", "x")]
    _set_rows(domain_task, monkeypatch, new_test)
    results = _main(domain_task, tmp_path, 0, 1)
    assert sorted(read_labelled(tmp_path / "data" / "test.tsv")) == sorted(new_test)
    assert len(trained) == 4
    assert results["test_accuracy"]["general"] == pytest.approx([2 / 3, 2 / 3 + 0.01])


def test_a_finished_run_is_kept_for_the_same_inputs_and_trained_again_for_other_flags(
    domain_task, trained: list, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    _set_rows(domain_task, monkeypatch, [("Permissive", "a b"), ("Copyleft", "c d")])
    _main(domain_task, tmp_path, 0, 1)
    _set_rows(domain_task, monkeypatch, [("Permissive", "a b"), ("Copyleft", "c d")])
    _main(domain_task, tmp_path, 0, 1)
    assert len(trained) == 2
    monkeypatch.setattr(domain_task, "MAX_WORDS", 32)
    _main(domain_task, tmp_path, 0, 1)
    assert len(trained) == 4 and {_flag(argv, "--max-words") for argv in trained[2:]} == {"32"}


def test_one_seed_gives_the_mean_alone_and_the_seeds_are_recorded(
    domain_task, trained: list, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
):
    _set_rows(domain_task, monkeypatch, [("Permissive", "a b"), ("Copyleft", "c d")])
    results = _main(domain_task, tmp_path, 0)
    assert results["seeds"] == [0] and results["test_accuracy"]["general"] == [0.5]
    assert "| general (`en`) | 50.00 | 50.00 |" in capsys.readouterr().out

    results = _main(domain_task, tmp_path / "three", 0, 1, 2)
    spread = 100 * statistics.stdev([0.5, 0.51, 0.52])
    assert results["seeds"] == [0, 1, 2]
    assert f"| general (`en`) | 51.00 ± {spread:.2f} | 50.00, 51.00, 52.00 |" in capsys.readouterr().out


@pytest.mark.parametrize(("arguments", "named"), [
    (("--model", "general"), r"argument --model: 'general' is not LABEL=MODEL"),
    (("--model", "=en"), r"argument --model: '=en' is not LABEL=MODEL"),
    (("--model", "general=en", "--model", "general=domain/en-adapted"), r"--model label general given more than once"),
    (("--model", "general=en", "--seeds", "0", "1", "0"), r"--seeds 0 given more than once"),
], ids=["no-equals", "no-label", "label-twice", "seed-twice"])
def test_a_model_not_given_as_label_equals_model_a_label_or_a_seed_twice_is_refused_before_any_work(
    domain_task, trained: list, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture,
    arguments: tuple[str, ...], named: str
):
    """A bare name gave a traceback; a label given twice kept only its last model; a seed given twice counted one
    run twice, which shrank the standard deviation."""
    _set_rows(domain_task, monkeypatch, [("Permissive", "a b"), ("Copyleft", "c d")])
    with pytest.raises(SystemExit) as exit_info:
        domain_task.main(["--task", LICENSE_TASK, "--work", str(tmp_path / "work"), *arguments])
    assert exit_info.value.code == 2
    assert re.search(named, capsys.readouterr().err)
    assert trained == [] and not (tmp_path / "work").exists()


def test_a_rerun_that_fails_removes_the_old_digest_so_its_metrics_do_not_pass_for_the_old_inputs(
    domain_task, trained: list, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    import elmo.cli

    _set_rows(domain_task, monkeypatch, [("Permissive", "a b"), ("Copyleft", "c d")])
    assert _main(domain_task, tmp_path, 0)["test_accuracy"]["general"] == [0.5]
    succeeding = elmo.cli.main

    def failing(argv: list[str]) -> int:  # writes its metrics, then fails
        succeeding(argv)
        (Path(_flag(argv, "--out")) / "metrics.json").write_text(json.dumps({"test": 0.99}))
        return 1

    monkeypatch.setattr(elmo.cli, "main", failing)
    monkeypatch.setattr(domain_task, "MAX_WORDS", 32)
    with pytest.raises(SystemExit, match="general seed 0 failed"):
        _main(domain_task, tmp_path, 0)
    assert not (tmp_path / "runs" / "general" / "seed-0" / "inputs.sha256").exists()

    monkeypatch.setattr(elmo.cli, "main", succeeding)
    monkeypatch.setattr(domain_task, "MAX_WORDS", 64)
    assert _main(domain_task, tmp_path, 0)["test_accuracy"]["general"] == [0.5]  # trained again, not 0.99
    assert len(trained) == 3
