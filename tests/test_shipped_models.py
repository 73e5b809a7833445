"""The shipped models: loadable by name, from the source tree and from an installed wheel."""

import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from elmo.cli import main
from elmo.demo import sense_similarities
from elmo.embedder import Embedder
from elmo.model_dir import ModelDir, shipped_models
from elmo.sense_examples import DEMO_EXAMPLES

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not {"en", "zh"} <= set(shipped_models()), reason="the shipped en/zh models are not built yet (make models)"
)


@pytest.mark.parametrize(("name", "tokenizer"), [("en", "english"), ("zh", "jieba")])
def test_loading_by_name_gives_the_models_tokenizer_and_a_small_model(name, tokenizer):
    model_dir = ModelDir.find(name)
    assert model_dir.tokenizer == tokenizer
    size = sum(path.stat().st_size for path in model_dir.path.iterdir())
    assert size <= 40_000_000  # the bound on a shipped model directory, softmax included (make_models.py)
    assert (model_dir.path / "README.md").read_text().count("perplexity") >= 1
    embedder = Embedder.load(name)
    text = "The bank of the river." if name == "en" else "我喜欢吃小米粥"
    vectors = embedder.embed([text], "all")[0]
    assert vectors.shape == (embedder.n_layers, len(embedder.tokenize(text)), embedder.dim)


def test_an_installed_wheel_loads_the_models_by_name(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "dist"),
                    str(ROOT)], check=True)
    wheel = next((tmp_path / "dist").glob("elmo_bilm-*.whl"))  # the distribution elmo-bilm, as wheels spell it
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


# Until run 19 the shipped en missed "play" on layer 2 (run 16: -0.0001 on the six and six uses of each sense; run 19:
# +0.001, a thin margin, recorded in its card).
@pytest.mark.parametrize(
    ("example", "layer"),
    [pytest.param(example, layer, id=f"{example.label}-layer{layer}") for example in DEMO_EXAMPLES for layer in (1, 2)],
)
def test_each_contextual_layer_of_the_shipped_models_puts_the_demo_words_same_sense_occurrences_closer(
    example, layer
):
    result = sense_similarities(Embedder.load(example.language), example)
    assert not result.separates[0]  # layer 0 is context-free: one vector for every occurrence
    assert result.separates[layer], result.margins


def test_elmo_embed_without_a_model_embeds_chinese_text_with_zh_and_english_with_en(tmp_path):
    for name, lines in (("zh", ["我喜欢吃小米粥", "小米手机很好用"]), ("en", ["The bank of the river ."])):
        source, target = tmp_path / f"{name}.txt", tmp_path / f"{name}.hdf5"
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert main(["embed", str(source), str(target), "--layers", "top", "--quiet"]) == 0
        expected = Embedder.load(name).embed(lines, "top")
        with h5py.File(target) as vectors:
            for number, array in enumerate(expected):
                np.testing.assert_allclose(vectors[str(number)][()], array, atol=1e-6)


@pytest.mark.parametrize("name", ["en", "zh"])
def test_the_shipped_softmax_scores_real_sentences_above_the_same_words_shuffled(name, tmp_path):
    """A language model, not just a biLM: ``elmo perplexity --model NAME`` works, and the shipped softmax
    finds the polysemy set's sentences far likelier than the same words in a random order."""
    from elmo.polysemy import load_sentences
    from elmo.training import Corpus, evaluate
    from elmo.training.export import load_language_model

    model, vocab = load_language_model(name)
    sentences = [list(s.tokens) for s in load_sentences(name)][:120]
    rng = np.random.default_rng(0)
    shuffled = [[tokens[k] for k in rng.permutation(len(tokens))] for tokens in sentences]
    perplexities = []
    for label, lines in (("real", sentences), ("shuffled", shuffled)):
        path = tmp_path / f"{label}.txt"
        path.write_text("".join(" ".join(tokens) + "\n" for tokens in lines), encoding="utf-8")
        perplexities.append(evaluate(model, Corpus([str(path)], "whitespace"), vocab).average)
    real, shuffled_perplexity = perplexities
    assert real < 1000 and shuffled_perplexity > 2 * real, perplexities
