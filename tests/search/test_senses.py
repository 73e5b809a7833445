import importlib
import warnings
from pathlib import Path

import matplotlib.figure
import matplotlib.image
import numpy as np
import pytest

from elmo.search import ContextIndex, SearchError, build_index, plot_senses, senses
from elmo.search.index import Occurrence
from elmo.search.senses import Senses

from .conftest import SPORTS_LINES, THEATRE_LINES

senses_module = importlib.import_module("elmo.search.senses")  # elmo.search.senses is also the function


def _index(corpus_path, embedder, tmp_path) -> ContextIndex:
    # Each topic sentence twice more, so each sense has enough uses to form a cluster.
    lines = corpus_path.read_text(encoding="utf-8").split("\n")[:-1] + (SPORTS_LINES + THEATRE_LINES) * 2
    corpus_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    build_index(corpus_path, tmp_path / "index", embedder, progress=False)
    return ContextIndex.load(tmp_path / "index", embedder=embedder)


def test_the_uses_of_a_word_cluster_into_its_known_senses(topic_corpus, constructed_embedder, tmp_path):
    index = _index(topic_corpus, constructed_embedder, tmp_path)
    result = senses(index, "play", clusters=3)
    lines = topic_corpus.read_text(encoding="utf-8").split("\n")
    truth = [("sport" if lines[index.occurrence(int(r)).line] in SPORTS_LINES else
              "theatre" if lines[index.occurrence(int(r)).line] in THEATRE_LINES else "none") for r in result.rows]
    # A partition equal to the truth: each cluster holds exactly one sense.
    clusters = {label: {t for t, lab in zip(truth, result.labels, strict=True) if lab == label}
                for label in set(result.labels)}
    assert sorted(map(sorted, clusters.values())) == [["none"], ["sport"], ["theatre"]]
    assert sorted(result.sizes) == sorted([truth.count("none"), truth.count("sport"), truth.count("theatre")])
    for cluster, example in enumerate(result.examples):
        assert example.token == "play"
        assert result.labels[list(result.rows).index(example.row)] == cluster
    assert result.points.shape == (len(result.rows), 2)


def test_without_a_count_the_silhouette_picks_the_number_of_senses(topic_corpus, constructed_embedder, tmp_path):
    index = _index(topic_corpus, constructed_embedder, tmp_path)
    assert len(senses(index, "play").sizes) == 3
    assert len(senses(index, "play", max_clusters=2).sizes) == 2


def test_the_sense_map_is_a_png(topic_corpus, constructed_embedder, tmp_path):
    index = _index(topic_corpus, constructed_embedder, tmp_path)
    path = plot_senses(senses(index, "play", clusters=2), tmp_path / "play.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 500 and np.ptp(image) > 0


def _stopped_savefig(figure, fname, **kwargs):
    """A savefig stopped by Ctrl-C after its first bytes: what a write in place left, a 124-byte stub."""
    Path(fname).write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 116)
    raise KeyboardInterrupt


def test_a_map_write_stopped_midway_leaves_the_old_png_whole_and_no_partial(topic_corpus, constructed_embedder,
                                                                            tmp_path, monkeypatch):
    result = senses(_index(topic_corpus, constructed_embedder, tmp_path), "play", clusters=2)
    old = plot_senses(result, tmp_path / "maps" / "play.png").read_bytes()
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", _stopped_savefig)
    with pytest.raises(KeyboardInterrupt):
        plot_senses(result, tmp_path / "maps" / "play.png")
    assert (tmp_path / "maps" / "play.png").read_bytes() == old
    assert sorted(path.name for path in (tmp_path / "maps").iterdir()) == ["play.png"]


def test_a_word_with_too_few_uses_is_refused(topic_corpus, constructed_embedder, tmp_path):
    index = _index(topic_corpus, constructed_embedder, tmp_path)
    with pytest.raises(SearchError, match="'tennis' occurs 0 time") as refused:
        senses(index, "tennis")
    assert (refused.value.code, refused.value.field) == ("too_few_occurrences", "word")
    with pytest.raises(SearchError, match="clusters 99") as refused:
        senses(index, "play", clusters=99)
    assert (refused.value.code, refused.value.field) == ("invalid_request", "clusters")
    with pytest.raises(SearchError, match="max_occurrences 2: expected at least 3") as refused:
        senses(index, "play", max_occurrences=2)  # a sample of 2 of its uses would pass the rule of 3
    assert refused.value.field == "max_occurrences"


@pytest.mark.parametrize("name", ["play", "play.svg", "play.png.txt"])
def test_a_map_named_other_than_png_is_refused_not_written_elsewhere(topic_corpus, constructed_embedder, tmp_path,
                                                                     name):
    result = senses(_index(topic_corpus, constructed_embedder, tmp_path), "play", clusters=2)
    with pytest.raises(SearchError, match=r"give a file name ending in \.png") as refused:
        plot_senses(result, tmp_path / "maps" / name)
    assert refused.value.field == "out"
    assert not (tmp_path / "maps").exists()


def test_more_clusters_than_distinct_uses_is_refused_naming_clusters(constructed_embedder, tmp_path):
    # the same line three times: three uses of "dock" with one vector between them
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("they tied the boat to the dock\n" * 3 + "a walk by the river\n", encoding="utf-8")
    build_index(corpus, tmp_path / "index", constructed_embedder, progress=False)
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    with pytest.raises(SearchError, match="1 distinct vector") as refused:
        senses(index, "dock", clusters=2)
    assert refused.value.field == "clusters"
    one = senses(index, "dock")  # left to choose, it finds the one sense there is
    assert one.sizes == [3] and list(one.labels) == [0, 0, 0]


def test_a_sample_of_the_uses_is_reported_as_a_sample_of_all_of_them(topic_corpus, constructed_embedder, tmp_path,
                                                                     monkeypatch):
    import matplotlib.axes

    index = _index(topic_corpus, constructed_embedder, tmp_path)
    total = len(index.rows_of("play"))
    result = senses(index, "play", max_occurrences=5)
    assert (len(result.rows), result.total_occurrences, result.sampled) == (5, total, True)
    everything = senses(index, "play")
    assert (len(everything.rows), everything.total_occurrences, everything.sampled) == (total, total, False)
    titles = []
    set_title = matplotlib.axes.Axes.set_title
    monkeypatch.setattr(matplotlib.axes.Axes, "set_title",
                        lambda axes, label, *args, **kwargs: titles.append(label) or set_title(axes, label, *args,
                                                                                                  **kwargs))
    plot_senses(result, tmp_path / "sample.png")
    plot_senses(everything, tmp_path / "all.png")
    assert titles[0].startswith(f"'play': 5 of {total} occurrences (a random sample), layer2,")
    assert titles[1].startswith(f"'play': {total} occurrences, layer2,")


def _chinese_senses() -> Senses:
    """Two senses of 打 (to hit, to play), drawn from hand-made occurrences."""
    sentences = [["我", "打", "球"], ["他", "打", "人"]]
    occurrences = [Occurrence(row, row, " ".join(tokens), tokens, 1) for row, tokens in enumerate(sentences)]
    return Senses("打", "layer2", np.arange(4), np.array([0, 0, 1, 1]), np.array([[0, 0], [0, 1], [1, 0], [1, 1.0]]),
                  occurrences, [2, 2], 0.5, 4)


def test_a_chinese_map_without_a_cjk_font_names_its_boxed_characters_once_not_per_glyph(tmp_path, monkeypatch, caplog):
    """DejaVu Sans lacks CJK: matplotlib warned ~120 times per map ('Glyph ... missing') and said no remedy."""
    monkeypatch.setattr(senses_module, "FONT_FALLBACK", ("DejaVu Sans",))  # as on a machine without a CJK font
    with warnings.catch_warnings(record=True) as raised, caplog.at_level("WARNING"):
        warnings.simplefilter("always")
        plot_senses(_chinese_senses(), tmp_path / "da.png")
    assert [str(warning.message) for warning in raised if "missing from font" in str(warning.message)] == []
    notices = [record.getMessage() for record in caplog.records if "as boxes" in record.getMessage()]
    # the word, and the examples' characters: 人 他 我 打 球 in code point order
    assert notices == ["the sense map of '打' draws 5 character(s) as boxes (人他我打球): no installed font has them; "
                       "install one that does (for Chinese or Japanese, e.g. Debian's fonts-noto-cjk)"]
    assert matplotlib.image.imread(tmp_path / "da.png").ndim == 3


def test_a_latin_map_logs_no_missing_characters(topic_corpus, constructed_embedder, tmp_path, caplog):
    index = _index(topic_corpus, constructed_embedder, tmp_path)
    with caplog.at_level("WARNING"):
        plot_senses(senses(index, "play", clusters=2), tmp_path / "play.png")
    assert [record for record in caplog.records if "as boxes" in record.getMessage()] == []
