from collections import Counter
from pathlib import Path

import matplotlib.figure
import numpy as np
import pytest

from elmo.cli import main
from elmo.demo import plot, run_demo, sense_similarities
from elmo.embedder import Embedder
from elmo.sense_examples import DEMO_EXAMPLES, POLYSEMY_EXAMPLES
from elmo.tokenizers import english_tokenize, jieba_tokenize


def _cosines(vectors: np.ndarray) -> np.ndarray:
    """``(n_sentences, n_layers, dim)`` -> ``(n_layers, n_sentences, n_sentences)``, pair by pair in float64."""
    vectors = vectors.astype(np.float64)
    n_layers = vectors.shape[1]
    return np.array([[[a @ b / np.linalg.norm(a) / np.linalg.norm(b) for b in vectors[:, layer]]
                      for a in vectors[:, layer]] for layer in range(n_layers)])


def test_similarities_are_cosines_of_the_words_vectors_and_layer_0_is_static(fixture_bilm):
    embedder = Embedder(fixture_bilm)
    example = DEMO_EXAMPLES[0]
    result = sense_similarities(embedder, example)
    vectors = np.stack([layers[:, list(sentence.tokens).index(example.word)]
                        for layers, sentence in zip(embedder.embed([list(s.tokens) for s in example.sentences]),
                                                    example.sentences, strict=True)])
    np.testing.assert_allclose(result.similarities, _cosines(vectors), rtol=0, atol=1e-6)
    np.testing.assert_allclose(result.similarities[0], 1.0, atol=1e-6)  # context-free: every occurrence the same
    assert result.separates[0] is False  # a static vector cannot tell senses apart


def test_a_model_reading_characters_compares_the_mean_of_the_words_characters(fixture_bilm):
    """小米 to a model reading characters is 小 and 米 (as the polysemy measures read it): fed whole, it was one
    token the model never saw."""
    embedder = Embedder(fixture_bilm, tokenizer="chars")
    example = next(example for example in DEMO_EXAMPLES if example.word == "小米")
    vectors = []
    for sentence in example.sentences:
        characters = list("".join(sentence.tokens))
        start = "".join(sentence.tokens).index("小米")
        vectors.append(embedder.embed([characters], "all")[0][:, start:start + 2].mean(axis=1))
    result = sense_similarities(embedder, example)
    np.testing.assert_allclose(result.similarities, _cosines(np.stack(vectors)), rtol=0, atol=1e-6)


def test_every_word_of_the_demo_has_six_sentences_of_each_sense():
    """Two per sense gave each word two same-sense pairs, too few for a share to mean anything."""
    for example in POLYSEMY_EXAMPLES:
        counts = Counter(sentence.sense for sentence in example.sentences)
        assert len(counts) >= 2 and min(counts.values()) >= 6, (example.word, counts)


def _jieba_with_the_word_alone(text: str, word: str) -> tuple[str, ...]:
    """jieba's tokens, a token holding the word and more (小米粥) split around it."""
    tokens: list[str] = []
    for token in jieba_tokenize(text):
        before, found, after = token.partition(word) if token != word else ("", token, "")
        tokens += [part for part in (before, found, after) if part]
    return tuple(tokens)


def test_the_demo_sentences_are_tokenized_as_the_shipped_models_tokenizers_split_them():
    for example in POLYSEMY_EXAMPLES:
        for sentence in example.sentences:
            if example.language == "en":
                assert tuple(english_tokenize(sentence.text)) == sentence.tokens, sentence.text
            else:
                assert _jieba_with_the_word_alone(sentence.text, example.word) == sentence.tokens, sentence.text
            assert sentence.tokens.count(example.word) == 1 and sentence.tokens[sentence.index] == example.word


def test_demo_writes_the_heat_map_and_reports_each_layer(fixture_dir, tmp_path, capsys):
    assert run_demo(str(fixture_dir), str(tmp_path / "demo.png")) == 0
    assert (tmp_path / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert printed.count("layer 0 (static): DOES NOT separate the senses") == len(DEMO_EXAMPLES)


def test_a_heat_map_write_stopped_midway_leaves_the_old_png_whole_and_no_partial(fixture_bilm, tmp_path,
                                                                                  monkeypatch):
    results = [sense_similarities(Embedder(fixture_bilm), DEMO_EXAMPLES[0])]
    plot(results, str(tmp_path / "demo.png"))
    old = (tmp_path / "demo.png").read_bytes()

    def stopped_savefig(figure, fname, **kwargs):  # Ctrl-C after the first bytes: a write in place left this stub
        Path(fname).write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 116)
        raise KeyboardInterrupt

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", stopped_savefig)
    with pytest.raises(KeyboardInterrupt):
        plot(results, str(tmp_path / "demo.png"))
    assert (tmp_path / "demo.png").read_bytes() == old
    assert [path.name for path in tmp_path.iterdir()] == ["demo.png"]


@pytest.mark.parametrize(("out", "expected"), [
    ("demo.txt", "demo.txt: the map is a PNG; give a file name ending in .png"),
    ("plainname", "plainname: the map is a PNG; give a file name ending in .png"),  # matplotlib adds .png
    ("emptydir", "emptydir: the map is a PNG"),  # matplotlib wrote emptydir.png
    ("dir.png", "--out dir.png is a directory; expected the name of a file to write"),
    ("afile/demo.png", "--out afile/demo.png: afile is a file, not a directory to write in"),
    pytest.param("/proc/elmo/demo.png", "--out /proc/elmo/demo.png: cannot create a file in /proc (",
                 marks=pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc here")),  # root too
])
def test_an_out_the_heat_map_cannot_be_written_to_is_refused_before_any_model_loads(out, expected, tmp_path,
                                                                                   monkeypatch, capsys, no_model_load):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "emptydir").mkdir()
    (tmp_path / "dir.png").mkdir()
    (tmp_path / "afile").write_text("")
    assert main(["demo", "--out", out]) == 2
    error = capsys.readouterr()
    assert expected in error.err and len(error.err.splitlines()) == 1 and error.out == ""
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile", "dir.png", "emptydir"]
