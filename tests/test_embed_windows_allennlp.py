"""`elmo embed --options-file/--weight-file` against elmo.allennlp.ElmoEmbedder (AllenNLP's whole-sentence run) on
lines longer than a window. The fixture model forgets within 64 tokens, so small windows show the difference."""

import h5py
import numpy as np

from elmo.allennlp import ElmoEmbedder
from elmo.cli import main


def _run(fixture_dir, text, output, *options):
    assert main(["embed", str(text), str(output), "--options-file", str(fixture_dir / "options.json"),
                 "--weight-file", str(fixture_dir / "lm_weights.hdf5"), "--quiet", *options]) == 0
    with h5py.File(output, "r") as handle:
        return handle["0"][...]


def test_a_line_longer_than_a_window_is_embedded_whole_as_allennlp_when_the_window_holds_it(fixture_dir, tmp_path):
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefghij"), size=rng.integers(1, 8))) for _ in range(60)]
    text = tmp_path / "in.txt"
    text.write_text(" ".join(words) + "\n", encoding="utf-8")
    whole = ElmoEmbedder(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5").embed_sentence(words)
    windowed = _run(fixture_dir, text, tmp_path / "windowed.hdf5", "--max-window-tokens", "16", "--window-context", "2")
    assert np.abs(windowed[2] - whole[2]).max() > 1e-2  # windows of 2 tokens' context: not AllenNLP's vectors
    np.testing.assert_array_equal(windowed[0], whole[0])  # layer 0 is context-free
    unwindowed = _run(fixture_dir, text, tmp_path / "whole.hdf5", "--max-window-tokens", "60", "--window-context", "2")
    np.testing.assert_allclose(unwindowed, whole, atol=1e-5)


def test_windows_that_leave_no_core_are_refused_before_the_model_loads(fixture_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "o.hdf5"), "--model", str(fixture_dir),
                 "--max-window-tokens", "8", "--window-context", "4", "--quiet"]) == 2
    assert "--max-window-tokens (8) must exceed 2 x --window-context (4)" in capsys.readouterr().err
    assert not (tmp_path / "o.hdf5").exists()
