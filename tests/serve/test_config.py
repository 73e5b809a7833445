"""How ``elmo serve``'s --model and --index values name the models and indexes requests ask for."""

from pathlib import Path

import pytest

from elmo.serve.config import IndexSpec, ModelSpec


def test_a_directory_is_served_under_its_folders_name_even_given_as_dot(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    model = tmp_path / "legal-en"
    model.mkdir()
    monkeypatch.chdir(model)
    assert ModelSpec.parse(".") == ModelSpec("legal-en", ".")
    assert ModelSpec.parse(str(model) + "/") == ModelSpec("legal-en", str(model) + "/")
    assert ModelSpec.parse("en") == ModelSpec("en", "en")  # no such folder here: a shipped model's name
    assert ModelSpec.parse("mine=.") == ModelSpec("mine", ".")


def test_an_existing_path_holding_an_equals_sign_is_a_bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    directory = tmp_path / "lr=0.1" / "model"
    directory.mkdir(parents=True)
    assert ModelSpec.parse(str(directory)) == ModelSpec("model", str(directory))
    assert IndexSpec.parse(str(directory)) == IndexSpec("model", directory)
    monkeypatch.chdir(tmp_path)
    assert ModelSpec.parse("lr=0.1/model") == ModelSpec("model", "lr=0.1/model")  # exists here: not NAME=DIR
    assert IndexSpec.parse("lr=0.1/model") == IndexSpec("model", Path("lr=0.1/model"))
    assert ModelSpec.parse("en=lr=0.1/model") == ModelSpec("en", "lr=0.1/model")  # a name still names it
    assert IndexSpec.parse("en=lr=0.1/model") == IndexSpec("en", Path("lr=0.1/model"))


def test_a_missing_path_with_a_separator_before_its_equals_sign_is_reported_whole(tmp_path: Path):
    missing = str(tmp_path / "no=such" / "model")
    assert ModelSpec.parse(missing) == ModelSpec(missing, missing)  # not NAME=f"{tmp_path}/no", DIR="such/model"
    assert IndexSpec.parse(missing) == IndexSpec("model", Path(missing))
    assert ModelSpec.parse("en=no/such") == ModelSpec("en", "no/such")  # a missing path under a name is named
