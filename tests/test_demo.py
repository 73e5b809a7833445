import numpy as np
import pytest

from elmo.cli import main
from elmo.demo import run_demo, sense_similarities
from elmo.embedder import Embedder
from elmo.sense_examples import DEMO_EXAMPLES


def test_similarities_are_cosines_of_the_words_vectors_and_layer_0_is_static(fixture_bilm):
    embedder = Embedder(fixture_bilm)
    example = DEMO_EXAMPLES[0]
    result = sense_similarities(embedder, example)
    vectors = [layers[:, list(tokens).index(example.word)]
               for layers, (_, tokens) in zip(embedder.embed([list(t) for _, t in example.sentences]),
                                              example.sentences, strict=True)]
    a, b = vectors[0][2].astype(np.float64), vectors[3][2].astype(np.float64)
    np.testing.assert_allclose(result.similarities[2, 0, 3], a @ b / np.linalg.norm(a) / np.linalg.norm(b), rtol=1e-9)
    np.testing.assert_allclose(result.similarities[0], 1.0, atol=1e-6)  # context-free: every occurrence the same
    assert result.separates[0] is False  # a static vector cannot tell senses apart


def test_demo_writes_the_heat_map_and_reports_each_layer(fixture_dir, tmp_path, capsys):
    assert run_demo(str(fixture_dir), str(tmp_path / "demo.png")) == 0
    assert (tmp_path / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert printed.count("layer 0 (static): DOES NOT separate the senses") == len(DEMO_EXAMPLES)


@pytest.mark.parametrize(("out", "expected"), [
    ("demo.txt", "demo.txt: the map is a PNG; give a file name ending in .png"),
    ("plainname", "plainname: the map is a PNG; give a file name ending in .png"),  # matplotlib adds .png
    ("emptydir", "emptydir: the map is a PNG"),  # matplotlib wrote emptydir.png
    ("dir.png", "--out dir.png is a directory; expected the name of a file to write"),
    ("afile/demo.png", "--out afile/demo.png: afile is a file, not a directory to write in"),
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
