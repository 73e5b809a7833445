"""The shipped models: loadable by name, from the source tree and from an installed wheel."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from elmo.embedder import Embedder
from elmo.model_dir import ModelDir, shipped_models

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not {"en", "zh"} <= set(shipped_models()), reason="the shipped en/zh models are not built yet (make models)"
)


@pytest.mark.parametrize(("name", "tokenizer"), [("en", "english"), ("zh", "jieba")])
def test_loading_by_name_gives_the_models_tokenizer_and_a_small_model(name, tokenizer):
    model_dir = ModelDir.find(name)
    assert model_dir.tokenizer == tokenizer
    size = sum(path.stat().st_size for path in model_dir.path.iterdir())
    assert size <= 25 * 2**20
    assert (model_dir.path / "README.md").read_text().count("perplexity") >= 1
    embedder = Embedder.load(name)
    text = "The bank of the river." if name == "en" else "我喜欢吃小米粥"
    vectors = embedder.embed([text], "all")[0]
    assert vectors.shape == (embedder.n_layers, len(embedder.tokenize(text)), embedder.dim)


def test_an_installed_wheel_loads_the_models_by_name(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "dist"),
                    str(ROOT)], check=True)
    wheel = next((tmp_path / "dist").glob("elmo-*.whl"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target),
                    str(wheel)], check=True)
    probe = (
        "import elmo, json; from elmo import Embedder; "
        "v = Embedder.load('en').embed([['the', 'bank']], 'top')[0]; "
        "print(json.dumps([elmo.__file__, list(v.shape), float(abs(v).sum())]))"
    )
    output = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True,
                            cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}).stdout
    location, shape, magnitude = json.loads(output)
    assert location.startswith(str(target))  # the wheel's copy, not the source tree
    assert shape == [2, Embedder.load("en").dim]
    source = Embedder.load("en").embed([["the", "bank"]], "top")[0]
    np.testing.assert_allclose(magnitude, float(np.abs(source).sum()), rtol=1e-5)
