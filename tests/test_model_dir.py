"""A model directory's tokenizer.json: read when it names a tokenizer, refused naming the file otherwise."""

import shutil
from pathlib import Path

import pytest

from elmo.model_dir import ModelDir


@pytest.fixture
def model_copy(fixture_dir: Path, tmp_path: Path) -> Path:
    for name in ("options.json", "lm_weights.hdf5"):
        shutil.copy(fixture_dir / name, tmp_path / name)
    return tmp_path


def test_a_tokenizer_json_naming_a_tokenizer_sets_the_models_tokenizer(model_copy: Path):
    assert ModelDir.find(model_copy).tokenizer == "whitespace"  # none: the default
    (model_copy / "tokenizer.json").write_text('{"name": "jieba"}\n')
    assert ModelDir.find(model_copy).tokenizer == "jieba"


@pytest.mark.parametrize(("data", "message"), [
    # these used to raise a bare TypeError (unhashable type) or UnicodeDecodeError, naming no file
    (b'{"name": ["english"]}', r"""tokenizer\.json: "name" is \['english'\]; expected a tokenizer name, one of \["""),
    (b'{"name": {"english": 1}}', r"""tokenizer\.json: "name" is \{'english': 1\}; expected a tokenizer name"""),
    (b'\xff\xfe{"name": "english"}', r"""tokenizer\.json: expected UTF-8 JSON \{"name": <tokenizer>\}"""),
    (b'{"name": "klingon"}', r"""tokenizer\.json: unknown tokenizer 'klingon'; expected one of \["""),
    (b'["english"]', r"""tokenizer\.json: expected UTF-8 JSON \{"name": <tokenizer>\}"""),
])
def test_a_malformed_tokenizer_json_is_refused_with_a_value_error_naming_the_file(model_copy: Path, data: bytes,
                                                                                  message: str):
    (model_copy / "tokenizer.json").write_bytes(data)
    with pytest.raises(ValueError, match=message):
        ModelDir.find(model_copy)


@pytest.fixture
def shipped_en(fixture_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shipped model named ``en`` (the fixture), and an empty working directory to put folders in."""
    shipped = tmp_path / "shipped" / "en"
    shipped.mkdir(parents=True)
    for name in ("options.json", "lm_weights.hdf5"):
        shutil.copy(fixture_dir / name, shipped / name)
    monkeypatch.setattr("elmo.model_dir.shipped_models_root", lambda: shipped.parent)
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    return shipped


def test_a_bare_name_finds_the_shipped_model_past_a_folder_here_that_holds_no_model(shipped_en: Path):
    Path("en").mkdir()
    Path("en", "train.txt").write_text("a corpus, not a model\n")
    assert ModelDir.find("en").path == shipped_en


@pytest.mark.parametrize("model", ["./en", "en/"])
def test_a_name_written_as_a_path_is_never_swapped_for_the_shipped_model(shipped_en: Path, model: str):
    """``Path`` reads ``./en`` and ``en/`` as ``en``; they loaded the shipped model, other weights, exit 0."""
    Path("en").mkdir()
    Path("en", "train.txt").write_text("a corpus, not a model\n")
    with pytest.raises(FileNotFoundError, match=r"^en holds no options\.json"):
        ModelDir.find(model)


@pytest.mark.parametrize("model", ["en", "./en", "en/"])
@pytest.mark.parametrize("weight_name", ["weights.hdf5", "lm_weights.hdf5", "elmo_small_weights_v2.hdf5"])
def test_a_folder_holding_weights_but_no_options_is_named_not_swapped_for_the_shipped_model(
    shipped_en: Path, model: str, weight_name: str
):
    """An export cut short before its options.json: the reader says what is missing, even for a bare name."""
    Path("en").mkdir()
    Path("en", weight_name).write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"^en holds no options\.json"):
        ModelDir.find(model)
