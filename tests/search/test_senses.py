import matplotlib.image
import numpy as np
import pytest

from elmo.search import ContextIndex, SearchError, build_index, plot_senses, senses

from .conftest import SPORTS_LINES, THEATRE_LINES


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
