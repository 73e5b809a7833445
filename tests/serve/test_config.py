"""How ``elmo serve``'s --model values name the models requests ask for."""

from pathlib import Path

import pytest

from elmo.serve.config import ModelSpec


def test_a_directory_is_served_under_its_folders_name_even_given_as_dot(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    model = tmp_path / "legal-en"
    model.mkdir()
    monkeypatch.chdir(model)
    assert ModelSpec.parse(".") == ModelSpec("legal-en", ".")
    assert ModelSpec.parse(str(model) + "/") == ModelSpec("legal-en", str(model) + "/")
    assert ModelSpec.parse("en") == ModelSpec("en", "en")  # no such folder here: a shipped model's name
    assert ModelSpec.parse("mine=.") == ModelSpec("mine", ".")
