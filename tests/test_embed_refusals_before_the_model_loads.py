"""``elmo embed`` refuses, before the model loads and leaving every file as it was, an OUTPUT that is a file of the
model being read, OUTPUT ``-``, and an input of only blank lines."""

import hashlib
import shutil
from pathlib import Path

import pytest

from elmo.cli import main
from elmo.model_dir import MODEL_FILES as MODEL_FILE_NAMES
from elmo.model_dir import ModelDir

MODEL_FILES = sorted(MODEL_FILE_NAMES)  # what a model directory holds, the shipped model's card included


def _digests(folder: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def model_copy(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A copy of the shipped ``en`` model (every file an exported model has) and the sha256 of each of its files."""
    copy = tmp_path_factory.mktemp("model") / "mcopy"
    shutil.copytree(ModelDir.find("en").path, copy)
    assert sorted(path.name for path in copy.iterdir()) == MODEL_FILES
    return copy, _digests(copy)


@pytest.fixture
def text(tmp_path) -> Path:
    path = tmp_path / "good.txt"
    path.write_text("a b\nc d\n")
    return path


@pytest.mark.parametrize("name", MODEL_FILES)
def test_an_output_that_is_a_file_of_the_model_is_refused_and_the_model_kept(name, model_copy, text, capsys,
                                                                              no_model_load):
    """``elmo embed --model mcopy good.txt mcopy/weights.hdf5`` replaced the weights with vectors and exited 0."""
    model, digests = model_copy
    assert main(["embed", "--model", str(model), str(text), str(model / name), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert error == (f"elmo embed: error: OUTPUT {model / name} is an input of this command: writing it would destroy "
                     "the input; give another output\n")
    assert _digests(model) == digests


@pytest.mark.parametrize("name", ["options.json", "weights.hdf5"])
def test_an_output_that_is_the_options_or_weight_file_given_is_refused_and_the_file_kept(name, model_copy, text,
                                                                                          capsys, no_model_load):
    model, digests = model_copy
    assert main(["embed", "--options-file", str(model / "options.json"), "--weight-file", str(model / "weights.hdf5"),
                 str(text), str(model / name), "--quiet"]) == 2
    assert f"OUTPUT {model / name} is an input of this command" in capsys.readouterr().err
    assert _digests(model) == digests


def test_the_model_directory_as_a_directory_of_parts_is_refused_without_advice_to_remove_the_model(
        model_copy, text, capsys, no_model_load):
    """It was refused as a directory holding files that are not parts, advising to remove them: the model's files."""
    model, digests = model_copy
    assert main(["embed", "--model", str(model), str(text), f"{model}/", "--quiet"]) == 2
    error = capsys.readouterr().err
    assert f"OUTPUT {model} is the directory of the model being read ({model})" in error
    assert "remove" not in error
    assert _digests(model) == digests


def test_a_dash_as_output_is_refused_not_written_as_a_file_named_dash(fixture_dir, text, tmp_path, capsys,
                                                                      monkeypatch, no_model_load):
    """``elmo embed - - < good.txt`` wrote an HDF5 file named ``-``."""
    monkeypatch.chdir(tmp_path)
    assert main(["embed", "--model", str(fixture_dir), str(text), "-", "--quiet"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("elmo embed: error: OUTPUT - would be standard output, which elmo embed does not write")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["good.txt"]


@pytest.mark.parametrize("model", [True, False], ids=["model-given", "model-guessed"])
@pytest.mark.parametrize("blank", ["\n\n\n", " \n\t\n", "\r\n", "\u200b\n\u00ad\n"],
                         ids=["empty-lines", "white-space", "crlf", "invisible"])  # characters the tokenizers drop
def test_an_input_of_only_blank_lines_is_refused_as_elmo_index_refuses_it(blank, model, fixture_dir, tmp_path,
                                                                          capsys, no_model_load):
    """It was embedded into one entry of 0 tokens a line, exit 0, where ``elmo index`` refuses such a corpus."""
    (tmp_path / "blank.txt").write_text(blank, newline="")
    given = ["--model", str(fixture_dir)] if model else []
    assert main(["embed", str(tmp_path / "blank.txt"), str(tmp_path / "o.hdf5"), *given, "--quiet"]) == 2
    assert capsys.readouterr().err == (f"elmo embed: error: {tmp_path / 'blank.txt'} holds only blank lines; expected "
                                       "text to embed, one sentence a line\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["blank.txt"]
