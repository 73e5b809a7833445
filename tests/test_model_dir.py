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
