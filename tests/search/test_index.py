import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from elmo.embedder import Embedder
from elmo.files import write_text_atomic
from elmo.search import AnnOptions, ContextIndex, SearchError, build_index, neighbors
from elmo.search import build as build_module
from elmo.search.layout import TOKEN_DTYPE
from elmo.tokenizers import get_tokenizer
from elmo.windows import MAX_WINDOW_TOKENS

from .conftest import SPORTS_LINES, THEATRE_LINES, ConstructedEmbedder, constructed_vector


def _corpus_lines(path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def _brute_force(lines: list[str], query: np.ndarray, layer: int, dim: int) -> dict[tuple[int, int], float]:
    """Cosine of the query to every token of the corpus, from the closed form, keyed by (line, position)."""
    query = query / np.linalg.norm(query)
    scores = {}
    for line, text in enumerate(lines):
        tokens = text.split()
        for position in range(len(tokens)):
            vector = constructed_vector(tokens, position, layer, dim)
            scores[line, position] = float(vector @ query / np.linalg.norm(vector))
    return scores


def test_every_token_is_stored_with_its_line_position_and_unit_vector(topic_corpus, constructed_embedder, tmp_path):
    report = build_index(topic_corpus, tmp_path / "index", constructed_embedder, layers=[1, 2], progress=False)
    lines = _corpus_lines(topic_corpus)
    n_tokens = sum(len(line.split()) for line in lines)
    assert (report.sentences, report.tokens, report.indexed_tokens) == (len(lines), n_tokens, n_tokens)
    index = ContextIndex.load(tmp_path / "index")
    assert index.layers == ["layer1", "layer2"]
    row = 0
    for line, text in enumerate(lines):
        for position, token in enumerate(text.split()):
            occurrence = index.occurrence(row)
            assert (occurrence.line, occurrence.sentence, occurrence.token_index, occurrence.token) == \
                (line, text, position, token)
            for layer in (1, 2):
                expected = constructed_vector(text.split(), position, layer, index.dim)
                np.testing.assert_allclose(index.vectors(layer)[row], expected / np.linalg.norm(expected),
                                           atol=1e-3)  # float16
            row += 1
    assert row == index.n_indexed
    assert not (tmp_path / "index.partial").exists()


@pytest.mark.parametrize("exact", [False, True])
def test_neighbours_are_the_brute_force_nearest_tokens(topic_corpus, constructed_embedder, tmp_path, exact):
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, layers=[2], progress=False,
                ann=AnnOptions(factory="IVF4,PQ4x4", nprobe=4))  # IVF-PQ even on a small corpus
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    assert not index.ann().__class__.__name__.endswith("Flat")
    query = SPORTS_LINES[1]
    found = neighbors(index, query, "play", k=8, exact=exact)
    tokens = query.split()
    expected = _brute_force(_corpus_lines(topic_corpus), constructed_vector(tokens, tokens.index("play"), 2, 32),
                            2, index.dim)
    query_line = _corpus_lines(topic_corpus).index(query)
    del expected[query_line, tokens.index("play")]  # the query token itself is not its own neighbour
    best = sorted(expected.values(), reverse=True)[:8]
    np.testing.assert_allclose([n.score for n in found], best, atol=2e-3)
    for neighbor in found:
        assert neighbor.score == pytest.approx(expected[neighbor.line, neighbor.token_index], abs=2e-3)
        assert neighbor.tokens[neighbor.token_index] == neighbor.token


def test_same_word_finds_the_sense_of_the_query_first(topic_corpus, constructed_embedder, tmp_path):
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, layers=[2], progress=False)
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    lines = _corpus_lines(topic_corpus)
    sports = {lines.index(line) for line in SPORTS_LINES}
    theatre = {lines.index(line) for line in THEATRE_LINES}

    from_sport = neighbors(index, "Chico Ruiz made a spectacular play on the grounder", "play", k=10, same_word=True)
    assert all(n.token == "play" for n in from_sport)
    assert {n.line for n in from_sport[:3]} == sports
    from_theatre = neighbors(index, "he signed to do a broadway play", "Play", k=3, same_word=True)
    assert {n.line for n in from_theatre} == theatre
    assert len(from_sport) == 7  # every "play" of the corpus: 3 sports, 3 theatre, 1 filler


def test_neighbours_json_has_the_documented_fields(topic_corpus, constructed_embedder, tmp_path):
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, progress=False)
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    record = neighbors(index, THEATRE_LINES[0], "play", k=1)[0].to_json()
    assert set(record) == {"sentence", "token_index", "token", "score"}
    assert json.loads(json.dumps(record)) == record
    assert record["sentence"].split()[record["token_index"]] == record["token"]


def test_words_only_indexes_just_those_words_but_keeps_the_whole_vocabulary(topic_corpus, constructed_embedder,
                                                                            tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("Play\nstage\n", encoding="utf-8")
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, words_only=words, progress=False)
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    tokens = [token for line in _corpus_lines(topic_corpus) for token in line.split()]
    assert index.n_indexed == sum(token in ("play", "stage") for token in tokens)
    assert {index.occurrence(row).token for row in range(index.n_indexed)} == {"play", "stage"}
    assert sorted(index.words) == sorted(set(tokens))
    assert dict(zip(index.words, index.counts.tolist(), strict=True)) == {t: tokens.count(t) for t in set(tokens)}


def test_layer0_static_neighbours_are_context_free_vectors_of_the_vocabulary(topic_corpus, constructed_embedder,
                                                                             tmp_path):
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, progress=False)
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    static = index.static_vectors
    for word in ("play", "broadway", "fine"):
        np.testing.assert_array_equal(static.vector(word), constructed_vector([word], 0, 0, index.dim))
    # One-hot rows: the nearest words of "play" are the ones hashed to its slot (cosine 1), then all others (0).
    assert (index.vocabulary_form("PLAY"), index.vocabulary_form("play"), index.vocabulary_form("tennis")) == \
        ("play", "play", None)
    play = static.vector("play")
    # the query's own word is left out in any case (search reads case variants as one word)
    expected = sorted((float(static.vector(w) @ play) for w in index.words if w.casefold() != "play"),
                      reverse=True)[:3]
    assert [score for _, score in static.nearest("play", k=3)] == pytest.approx(expected)


def test_an_interrupted_build_never_looks_complete_and_resumes_to_the_same_index(topic_corpus, fixture_bilm,
                                                                                   tmp_path):
    clean = tmp_path / "clean"
    build_index(topic_corpus, clean, ConstructedEmbedder(fixture_bilm), batch_size=2, progress=False,
                checkpoint_lines=2)
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm, fail_after=2), batch_size=1,
                    progress=False, checkpoint_lines=1)
    assert not out.exists()
    with pytest.raises(FileNotFoundError, match="unfinished build"):
        ContextIndex.load(out)
    progress = json.loads((tmp_path / "resumed.partial" / "progress.json").read_text())
    assert 0 < progress["lines"] < len(_corpus_lines(topic_corpus))
    report = build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), batch_size=1, progress=False,
                         resume=True, checkpoint_lines=1)
    assert report.resumed_from == progress["lines"]
    for name in ("sentences.txt", "sentence_offsets.i8", "tokens.bin", "vectors-layer2.f16", "vocab.txt",
                 "layer0.f16"):
        assert (out / name).read_bytes() == (clean / name).read_bytes(), name
    np.testing.assert_array_equal(np.load(out / "counts.npy"), np.load(clean / "counts.npy"))
    assert not (tmp_path / "resumed.partial").exists()


def test_a_build_killed_between_its_counts_and_its_progress_resumes_without_counting_a_chunk_twice(
        topic_corpus, fixture_bilm, tmp_path, monkeypatch):
    clean = tmp_path / "clean"
    build_index(topic_corpus, clean, ConstructedEmbedder(fixture_bilm), batch_size=1, progress=False,
                checkpoint_lines=1)
    progress_writes = []

    def killed_at_the_third_progress(path, text):
        if path.name == "progress.json":
            progress_writes.append(path)
            if len(progress_writes) == 3:
                raise KeyboardInterrupt  # the counts of line 3 are written, the progress that goes with them not
        write_text_atomic(path, text)

    monkeypatch.setattr(build_module, "write_text_atomic", killed_at_the_third_progress)
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), batch_size=1, progress=False,
                    checkpoint_lines=1)
    monkeypatch.undo()
    report = build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), batch_size=1, progress=False,
                         resume=True, checkpoint_lines=1)
    assert report.resumed_from == 2
    np.testing.assert_array_equal(np.load(out / "counts.npy"), np.load(clean / "counts.npy"))
    assert sorted(path.name for path in out.iterdir()) == sorted(path.name for path in clean.iterdir())


def test_a_build_killed_while_publishing_resumes_without_embedding_again(topic_corpus, fixture_bilm, tmp_path,
                                                                         monkeypatch):
    out = tmp_path / "index"

    def killed(partial, final):
        raise KeyboardInterrupt

    monkeypatch.setattr(build_module, "publish_directory", killed)
    with pytest.raises(KeyboardInterrupt):
        build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), batch_size=2, progress=False)
    monkeypatch.undo()
    assert not (tmp_path / "index.partial" / "progress.json").exists()  # meta.json says the partial is complete
    with pytest.raises(SearchError, match="other settings"):
        build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm, fail_after=0), layers=[1], progress=False,
                    resume=True)
    report = build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm, fail_after=0), batch_size=2,
                         progress=False, resume=True)  # an embedder that fails if asked to embed anything
    assert report.resumed_from == len(_corpus_lines(topic_corpus))
    assert ContextIndex.load(out).meta["n_sentences"] == len(_corpus_lines(topic_corpus))
    assert not (out / "progress.json").exists()


def test_resume_refuses_a_partial_index_made_with_other_settings(topic_corpus, fixture_bilm, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        build_index(topic_corpus, tmp_path / "index", ConstructedEmbedder(fixture_bilm, fail_after=1),
                    batch_size=1, progress=False, checkpoint_lines=1)
    with pytest.raises(ValueError, match="other settings"):
        build_index(topic_corpus, tmp_path / "index", ConstructedEmbedder(fixture_bilm), layers=[1],
                    progress=False, resume=True)


def test_bad_inputs_are_named(topic_corpus, constructed_embedder, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing\.txt"):
        build_index(tmp_path / "missing.txt", tmp_path / "index", constructed_embedder, progress=False)
    for layers, message in [([7], r"layers is 7; a layer index must be in -3..2"),
                            (["all"], "an index keeps one vector per token"), ([1, "layer1"], "name a layer twice")]:
        with pytest.raises(SearchError, match=message) as refused:
            build_index(topic_corpus, tmp_path / "index", constructed_embedder, layers=layers, progress=False)
        assert refused.value.field == "layers"
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, layers=[1], progress=False)
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    for sentence, word, options, message, code, field in [
        (SPORTS_LINES[0], "play", {"layer": 2}, "holds layer1, not layer2", "invalid_request", "layer"),
        (SPORTS_LINES[0], "play", {"layer": "top"}, "holds layer1, not layer2", "invalid_request", "layer"),
        (SPORTS_LINES[0], "play", {"layer": "\uff11"},  # the refusal names only what search takes
         "layers is '\uff11'; an index keeps one vector per token: expected a layer index, 'top' or 'average'$",
         "invalid_request", "layer"),
        (SPORTS_LINES[0], "play", {"layer": [0, 1, 0]}, "one vector per token", "invalid_request", "layer"),
        (SPORTS_LINES[0], "tennis", {}, "'tennis' is not a token", "word_not_in_sentence", "word"),
        (SPORTS_LINES[0], "play", {"occurrence": 1}, "occurs 1 time", "invalid_request", "occurrence"),
        ("tennis anyone", "tennis", {"same_word": True}, "'tennis' does not occur", "word_not_indexed", "word"),
    ]:
        with pytest.raises(SearchError, match=message) as refused:
            neighbors(index, sentence, word, **options)
        assert (refused.value.code, refused.value.field) == (code, field)
    with pytest.raises(SearchError, match="was built from an Embedder") as refused:
        neighbors(ContextIndex.load(tmp_path / "index"), SPORTS_LINES[0], "play")
    assert refused.value.field == "embedder"


def test_token_records_have_a_fixed_layout():
    assert TOKEN_DTYPE.itemsize == 16


def test_a_stored_layer_is_named_by_any_form_of_the_one_layer_choice(topic_corpus, constructed_embedder, tmp_path):
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, layers=["top", 1, "average"], progress=False)
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    assert index.layers == ["layer2", "layer1", "average"]
    assert [index.layer(given) for given in (None, 2, "2", "layer2", "top", -1, "-1", 1, -2, "average")] == \
        ["layer2"] * 7 + ["layer1"] * 2 + ["average"]


def test_an_index_refuses_another_model_of_the_same_shape(topic_corpus, fixture_bilm, tmp_path):
    import torch

    from elmo import BiLM

    def random_model(seed: int) -> Embedder:
        torch.manual_seed(seed)
        return Embedder(BiLM(fixture_bilm.config).eval())

    built_with, other = random_model(0), random_model(1)
    build_index(topic_corpus, tmp_path / "index", built_with, progress=False)
    assert json.loads((tmp_path / "index" / "meta.json").read_text())["fingerprint"] == built_with.fingerprint
    same_shape = ContextIndex.load(tmp_path / "index", embedder=other)
    message = r"the embedder's model \(fingerprint [0-9a-f]{12}\) differs from the one .*index was built with " \
              r"\([0-9a-f]{12}\): other options or weights"
    with pytest.raises(SearchError, match=message) as refused:
        neighbors(same_shape, SPORTS_LINES[0], "play")
    assert refused.value.field == "embedder"
    found = neighbors(ContextIndex.load(tmp_path / "index", embedder=random_model(0)), SPORTS_LINES[0], "play", k=2)
    assert len(found) == 2  # a model of the same weights, loaded again, is the same model


class _NeverEmbeds(ConstructedEmbedder):
    """Fails the test if asked to embed: a refusal must come before any work."""

    def embed(self, *args, **kwargs) -> list[np.ndarray]:
        raise AssertionError("embedded before refusing")


def test_a_directory_that_is_not_an_index_is_refused_before_any_work_and_kept(topic_corpus, fixture_bilm, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "precious.txt").write_text("not an index\n")
    never_embeds = _NeverEmbeds(fixture_bilm)
    with pytest.raises(SearchError, match="holds something other than an index") as refused:
        build_index(topic_corpus, data, never_embeds, progress=False)
    assert refused.value.field == "out"
    assert (data / "precious.txt").read_text() == "not an index\n"
    with pytest.raises(SearchError, match="is a file"):
        build_index(topic_corpus, data / "precious.txt", never_embeds, progress=False)
    (data / "meta.json").write_text("{}\n")  # a meta.json of something else beside other files
    with pytest.raises(SearchError, match="holds something other than an index"):
        build_index(topic_corpus, data, never_embeds, progress=False)
    assert (data / "precious.txt").read_text() == "not an index\n"


def test_an_index_with_a_file_of_its_own_beside_it_is_not_replaced(topic_corpus, fixture_bilm, tmp_path):
    out = tmp_path / "index"
    build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), progress=False)
    (out / "notes.txt").write_text("mine\n")
    with pytest.raises(SearchError, match="holds something other than an index"):
        build_index(topic_corpus, out, _NeverEmbeds(fixture_bilm), progress=False)
    assert (out / "notes.txt").read_text() == "mine\n"


def test_rebuilding_replaces_an_index_whole_and_leaves_nothing_beside_it(topic_corpus, fixture_bilm, tmp_path):
    out = tmp_path / "indexes" / "index"
    build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), layers=[1], progress=False)
    build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), layers=[2], progress=False)
    assert ContextIndex.load(out).layers == ["layer2"]
    assert not (out / "vectors-layer1.f16").exists()
    assert [path.name for path in out.parent.iterdir()] == ["index"]  # the old one, set aside, is gone


def test_a_loaded_index_answers_from_the_version_it_loaded_after_a_rebuild_in_place(topic_corpus,
                                                                                     constructed_embedder, tmp_path):
    """A rebuild publishes a new directory under the same name: a loaded index (a server's) read the new version's
    lines at the old one's offsets, and a layer first used after the rebuild mapped the new vectors under the old
    records. Now each answers as before the rebuild until loaded again."""
    lines = topic_corpus.read_text(encoding="utf-8").splitlines()
    reordered = tmp_path / "reordered.txt"  # the same bytes in another order: every file keeps its size
    reordered.write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")
    out = tmp_path / "index"
    build_index(topic_corpus, out, constructed_embedder, layers=[1, 2], progress=False)
    query = ("Chico Ruiz made a spectacular play on the grounder", "play")

    def answers(index: ContextIndex, layer: int) -> list[tuple[int, str, float]]:
        return [(n.line, n.sentence, n.score) for n in neighbors(index, *query, k=7, layer=layer, same_word=True)]

    used = ContextIndex.load(out, embedder=constructed_embedder)
    before = answers(used, 2), answers(ContextIndex.load(out, embedder=constructed_embedder), 1)
    build_index(reordered, out, constructed_embedder, layers=[1, 2], progress=False)
    assert (answers(used, 2), answers(used, 1)) == before  # layer 1 first used after the rebuild
    rebuilt = answers(ContextIndex.load(out, embedder=constructed_embedder), 2)  # every "play", lines reversed
    assert {(len(lines) - 1 - line, sentence) for line, sentence, _ in rebuilt} == {
        (line, sentence) for line, sentence, _ in before[0]}


def test_bad_factories_and_empty_word_lists_are_refused_before_the_corpus_is_embedded(topic_corpus, fixture_bilm,
                                                                                      tmp_path):
    never_embeds = _NeverEmbeds(fixture_bilm)
    for factory in ("bogus", "IVF4,PQ5x4fsr"):  # no such index; 5 pieces do not divide 32 dimensions
        with pytest.raises(SearchError, match="not a faiss index") as refused:
            build_index(topic_corpus, tmp_path / "index", never_embeds, ann=AnnOptions(factory=factory),
                        progress=False)
        assert refused.value.field == "factory"
    for words, message in (([], "lists no words"), (["  "], "lists no words"),
                           (["play", "New York"], r"\['new york'\].* several words never matches")):
        with pytest.raises(SearchError, match=message) as refused:
            build_index(topic_corpus, tmp_path / "index", never_embeds, words_only=words, progress=False)
        assert refused.value.field == "words_only"
    for options, field in (({"batch_size": 0}, "batch_size"), ({"checkpoint_lines": 0}, "checkpoint_lines"),
                           ({"layers": []}, "layers")):
        with pytest.raises(SearchError) as refused:
            build_index(topic_corpus, tmp_path / "index", never_embeds, progress=False, **options)
        assert refused.value.field == field
    assert not (tmp_path / "index.partial").exists()


def test_listed_words_that_never_occur_are_named_in_a_warning(topic_corpus, constructed_embedder, tmp_path):
    report = build_index(topic_corpus, tmp_path / "index", constructed_embedder, words_only=["play", "Zebra"],
                         progress=False)
    assert report.indexed_tokens == sum(line.split().count("play") for line in _corpus_lines(topic_corpus)) > 0
    assert [warning for warning in report.warnings if "words_only" in warning] == [
        f"1 of the 2 words_only never occur as a token of {topic_corpus} (zebra); a word the tokenizer splits "
        "never does"]  # the whitespace tokenizer keeps don't whole: no split to show


def test_the_words_only_warning_shows_don_t_as_the_index_tokenizer_splits_it(topic_corpus, fixture_bilm, tmp_path):
    """The warning said don't -> do n't (PTB) while the english tokenizer (Moses) gives don 't."""
    class EnglishEmbedder(ConstructedEmbedder):
        tokenizer_name = "english"

        def tokenize(self, sentence: str | Sequence[str]) -> list[str]:
            return get_tokenizer("english")(sentence) if isinstance(sentence, str) else list(sentence)

    report = build_index(topic_corpus, tmp_path / "index", EnglishEmbedder(fixture_bilm), words_only=["play", "don't"],
                         progress=False)
    assert [warning for warning in report.warnings if "words_only" in warning] == [
        f"1 of the 2 words_only never occur as a token of {topic_corpus} (don't); a word the tokenizer splits "
        "(don't -> don 't) never does"]


def test_an_index_records_how_long_sentences_were_cut_and_refuses_queries_cut_otherwise(topic_corpus, fixture_bilm,
                                                                                       tmp_path):
    built_with = Embedder(fixture_bilm, tokenizer="whitespace", max_window_tokens=16, window_context=4)
    build_index(topic_corpus, tmp_path / "index", built_with, progress=False)
    window = json.loads((tmp_path / "index" / "meta.json").read_text())["window"]
    assert window == {"max_window_tokens": 16, "window_context": 4}
    long_sentence = " ".join([SPORTS_LINES[0]] * 6)
    assert len(long_sentence.split()) > 16  # cut into windows: its vectors depend on how
    other = Embedder(fixture_bilm, tokenizer="whitespace")
    assert not np.allclose(other.embed([long_sentence], "top")[0], built_with.embed([long_sentence], "top")[0])
    with pytest.raises(SearchError, match=rf"cuts long sentences as .*{MAX_WINDOW_TOKENS}.*built with .*16") as refused:
        neighbors(ContextIndex.load(tmp_path / "index", embedder=other), long_sentence, "play")
    assert refused.value.field == "embedder"
    same = Embedder(fixture_bilm, tokenizer="whitespace", max_window_tokens=16, window_context=4)
    assert len(neighbors(ContextIndex.load(tmp_path / "index", embedder=same), long_sentence, "play", k=2)) == 2


def test_an_index_built_before_windows_were_recorded_is_read_as_cut_by_the_defaults_then(topic_corpus, fixture_bilm,
                                                                                        tmp_path):
    """Such an index (format 2, until 2026-12-05) was cut at 256 / 64; read as "no windows recorded" it took
    today's larger defaults for its queries without a word."""
    then = Embedder(fixture_bilm, tokenizer="whitespace", max_window_tokens=256, window_context=64)
    build_index(topic_corpus, tmp_path / "index", then, progress=False)
    meta_file = tmp_path / "index" / "meta.json"
    meta = json.loads(meta_file.read_text())
    del meta["window"]
    meta_file.write_text(json.dumps(meta))
    today = Embedder(fixture_bilm, tokenizer="whitespace")
    assert (today.max_window_tokens, today.window_context) != (256, 64)
    with pytest.raises(SearchError, match=r"cuts long sentences as .* was built with .*'max_window_tokens': 256"):
        neighbors(ContextIndex.load(tmp_path / "index", embedder=today), SPORTS_LINES[0], "play")
    assert neighbors(ContextIndex.load(tmp_path / "index", embedder=then), SPORTS_LINES[0], "play", k=1)


def test_a_words_file_saved_with_a_byte_order_mark_keeps_its_first_word(topic_corpus, constructed_embedder,
                                                                        tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("\ufeffplay\n", encoding="utf-8")
    report = build_index(topic_corpus, tmp_path / "index", constructed_embedder, words_only=words, progress=False)
    expected = sum(line.split().count("play") for line in _corpus_lines(topic_corpus))
    assert report.indexed_tokens == expected > 0


def test_a_build_killed_inside_its_finish_resumes(topic_corpus, fixture_bilm, tmp_path, monkeypatch):
    out = tmp_path / "index"

    def killed_after_the_counts_rename(path, text):
        if path.name == "progress.json" and '"counts.npy"' in text:
            raise KeyboardInterrupt  # counts-N.npy is counts.npy now; progress.json still names counts-N.npy
        write_text_atomic(path, text)

    monkeypatch.setattr(build_module, "write_text_atomic", killed_after_the_counts_rename)
    with pytest.raises(KeyboardInterrupt):
        build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), progress=False)
    monkeypatch.undo()
    build_index(topic_corpus, out, _NeverEmbeds(fixture_bilm), progress=False, resume=True)
    clean = tmp_path / "clean"
    build_index(topic_corpus, clean, ConstructedEmbedder(fixture_bilm), progress=False)
    np.testing.assert_array_equal(np.load(out / "counts.npy"), np.load(clean / "counts.npy"))


def test_resume_refuses_files_shorter_than_their_last_checkpoint(topic_corpus, fixture_bilm, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        build_index(topic_corpus, tmp_path / "index", ConstructedEmbedder(fixture_bilm, fail_after=2),
                    batch_size=1, progress=False, checkpoint_lines=1)
    vectors = tmp_path / "index.partial" / "vectors-layer2.f16"
    vectors.write_bytes(vectors.read_bytes()[:-2])  # lost a block: resuming would pad it with zero vectors
    with pytest.raises(SearchError, match="shorter than its last checkpoint"):
        build_index(topic_corpus, tmp_path / "index", ConstructedEmbedder(fixture_bilm), batch_size=1,
                    progress=False, checkpoint_lines=1, resume=True)


def test_an_index_refuses_a_query_embedder_that_splits_text_otherwise(topic_corpus, fixture_bilm, tmp_path):
    build_index(topic_corpus, tmp_path / "index", Embedder(fixture_bilm, tokenizer="whitespace"), progress=False)
    index = ContextIndex.load(tmp_path / "index", embedder=Embedder(fixture_bilm, tokenizer="chars"))
    with pytest.raises(SearchError, match=r"'chars' tokenizer.*built with 'whitespace'") as refused:
        neighbors(index, SPORTS_LINES[0], "p")
    assert refused.value.field == "embedder"


def test_a_rebuild_killed_while_deleting_the_old_index_leaves_a_whole_index(topic_corpus, fixture_bilm, tmp_path,
                                                                             monkeypatch):
    from elmo import files

    out = tmp_path / "index"
    build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), layers=[1], progress=False)

    rmtree = files.shutil.rmtree

    def killed_after_one_file(path, *args, **kwargs):
        if not Path(path).is_relative_to(tmp_path) or not Path(path).exists():  # the build's clearing of a partial
            return rmtree(path, *args, **kwargs)
        next(Path(path).iterdir()).unlink()  # the old index, whichever name it has by now (swapped: index.partial)
        raise KeyboardInterrupt

    monkeypatch.setattr(files.shutil, "rmtree", killed_after_one_file)
    with pytest.raises(KeyboardInterrupt):
        build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), layers=[2], progress=False)
    monkeypatch.undo()
    clean = tmp_path / "clean"
    build_index(topic_corpus, clean, ConstructedEmbedder(fixture_bilm), layers=[2], progress=False)
    assert {path.name for path in out.iterdir()} == {path.name for path in clean.iterdir()}  # the new index, whole
    assert ContextIndex.load(out).layers == ["layer2"]


def test_a_rebuild_killed_while_deleting_the_old_index_resumes_to_a_whole_index_with_nothing_beside_it(
        topic_corpus, fixture_bilm, tmp_path, monkeypatch):
    """The old index used to be deleted under the new one's partial name, ``index.partial``, which ``--resume``
    takes for a finished build: it published the half-deleted old index (no ``tokens.bin``) over the new one."""
    from elmo import files

    out = tmp_path / "index"
    build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), progress=False)
    rmtree = files.shutil.rmtree

    def killed_after_deleting_the_tokens(path, *args, **kwargs):
        if not (Path(path) / "tokens.bin").is_file():  # the build's clearing of leftovers
            return rmtree(path, *args, **kwargs)
        (Path(path) / "tokens.bin").unlink()
        raise KeyboardInterrupt

    monkeypatch.setattr(files.shutil, "rmtree", killed_after_deleting_the_tokens)
    with pytest.raises(KeyboardInterrupt):
        build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), progress=False)
    monkeypatch.undo()
    assert not (tmp_path / "index.partial").exists()
    build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), progress=False, resume=True)
    clean = tmp_path / "clean" / "index"
    build_index(topic_corpus, clean, ConstructedEmbedder(fixture_bilm), progress=False)
    assert sorted(path.name for path in out.iterdir()) == sorted(path.name for path in clean.iterdir())
    assert (out / "tokens.bin").read_bytes() == (clean / "tokens.bin").read_bytes()
    assert ContextIndex.load(out).occurrence(0).sentence == _corpus_lines(topic_corpus)[0]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["clean", "corpus.txt", "index"]


def test_an_index_of_a_shipped_model_queries_that_model_where_a_directory_has_its_name(topic_corpus, fixture_dir,
                                                                                      tmp_path, monkeypatch):
    from elmo import model_dir

    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "tiny").symlink_to(fixture_dir)
    monkeypatch.setattr(model_dir, "shipped_models_root", lambda: shipped)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    build_index(topic_corpus, "tiny", "tiny", progress=False)  # the index is ./tiny, as --out en makes ./en
    index = ContextIndex.load("tiny")
    assert len(neighbors(index, SPORTS_LINES[0], "play", k=2)) == 2  # not "tiny holds no options.json"
    assert index.model_source == str(shipped / "tiny")
    meta = json.loads((work / "tiny" / "meta.json").read_text())
    assert (meta["model"], meta["model_shipped"]) == ("tiny", True)
    build_index(topic_corpus, "tiny", "tiny", layers=[1], progress=False)  # rebuilt in place: ./tiny is no model
    assert ContextIndex.load("tiny").layers == ["layer1"]
    meta = json.loads((work / "tiny" / "meta.json").read_text())
    del meta["model_shipped"]  # an index from before it was recorded: the name, found as before
    (work / "tiny" / "meta.json").write_text(json.dumps(meta))
    assert ContextIndex.load("tiny").model_source == "tiny"


def test_a_factory_faiss_cannot_train_on_the_corpus_is_named_and_resume_finishes_with_another(
        topic_corpus, fixture_bilm, tmp_path):
    out = tmp_path / "index"
    n_tokens = sum(len(line.split()) for line in _corpus_lines(topic_corpus))
    with pytest.raises(SearchError, match=rf"'IVF256,Flat' over the {n_tokens} indexed tokens of layer2 .*"
                                          r"--resume and another --factory") as refused:
        build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), ann=AnnOptions(factory="IVF256,Flat"),
                    progress=False)  # 256 lists, fewer tokens to train them on
    assert refused.value.field == "factory"
    report = build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm, fail_after=0), progress=False,
                         ann=AnnOptions(factory="Flat"), resume=True)  # fails if asked to embed again
    assert report.factories == {"layer2": "Flat"}
    assert ContextIndex.load(out).n_indexed == n_tokens


def test_k_beyond_the_index_asks_the_search_for_no_more_rows_than_it_holds(topic_corpus, constructed_embedder,
                                                                            tmp_path, monkeypatch):
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, progress=False)
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    search = ContextIndex.search

    def capped(self, queries, k=10, *args, **kwargs):
        assert k <= self.n_indexed, f"asked for {k} rows of {self.n_indexed}"  # before any array of k rows
        return search(self, queries, k, *args, **kwargs)

    monkeypatch.setattr(ContextIndex, "search", capped)
    for options in ({}, {"exact": True}, {"same_word": True}):
        found = neighbors(index, SPORTS_LINES[0], "play", k=10**9, **options)
        expected = index.n_indexed if not options.get("same_word") else len(index.rows_of("play"))
        assert len(found) == expected - 1  # every indexed token but the query's own


def test_a_build_killed_after_publishing_leaves_an_index_that_can_be_rebuilt_in_place(topic_corpus, fixture_bilm,
                                                                                       tmp_path, monkeypatch):
    out = tmp_path / "index"
    publish = build_module.publish_directory

    def killed_after(partial, final):
        publish(partial, final)
        raise KeyboardInterrupt

    monkeypatch.setattr(build_module, "publish_directory", killed_after)
    with pytest.raises(KeyboardInterrupt):
        build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), layers=[1], progress=False)
    monkeypatch.undo()
    assert not (out / "progress.json").exists()
    assert ContextIndex.load(out).layers == ["layer1"]
    (out / "progress.json").write_text("{}")  # as earlier versions, killed there, left it: still an index
    build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), layers=[2], progress=False)
    assert ContextIndex.load(out).layers == ["layer2"]
    assert not (out / "progress.json").exists()


def test_a_repeated_query_sentence_leaves_out_one_use_as_the_query_and_keeps_its_other_copies(
        topic_corpus, constructed_embedder, tmp_path):
    lines = _corpus_lines(topic_corpus) + [SPORTS_LINES[0]] * 2  # the sentence on three lines
    topic_corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    copies = [line for line, text in enumerate(lines) if text == SPORTS_LINES[0]]
    assert len(copies) == 3
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, progress=False)
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    position = SPORTS_LINES[0].split().index("play")
    for options in ({}, {"exact": True}, {"same_word": True}):
        found = neighbors(index, SPORTS_LINES[0], "play", k=20, **options)
        same_use = [hit for hit in found if hit.sentence == SPORTS_LINES[0] and hit.token_index == position]
        assert [hit.line for hit in same_use] == copies[1:], options  # the earliest copy is taken for the query
        assert [hit.score for hit in same_use] == pytest.approx([1.0, 1.0], abs=1e-3)


def test_k_beyond_the_index_returns_every_token_even_where_the_ann_lists_visited_hold_fewer(
        topic_corpus, constructed_embedder, tmp_path):
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, progress=False,
                ann=AnnOptions(factory="IVF4,Flat", nprobe=1))  # one list of four visited a query
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    query = SPORTS_LINES[0].split()
    proposed = index.ann().search(constructed_vector(query, query.index("play"), 2, index.dim)[None], index.n_indexed)
    assert (proposed[1] < 0).any()  # the ANN index alone cannot supply every token
    found = neighbors(index, SPORTS_LINES[0], "play", k=10**6)
    assert len(found) == index.n_indexed - 1  # every indexed token but the query's own
    assert len({(hit.line, hit.token_index) for hit in found}) == len(found)
    assert [hit.score for hit in found] == sorted((hit.score for hit in found), reverse=True)


def test_a_negative_k_is_refused_by_the_index_search(topic_corpus, constructed_embedder, tmp_path):
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, progress=False)
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    for exact in (False, True):
        with pytest.raises(SearchError, match="k is -2") as refused:
            index.search(np.ones(index.dim, np.float32), k=-2, exact=exact)
        assert refused.value.field == "k"


def test_an_index_of_an_earlier_format_is_refused_by_load_and_rebuilt_in_place(topic_corpus, fixture_bilm,
                                                                              tmp_path):
    out = tmp_path / "index"
    build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), layers=[1], progress=False)
    meta = json.loads((out / "meta.json").read_text())
    meta["format"], meta["model_config"] = 1, meta.pop("fingerprint")  # as format 1 named the model
    (out / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(SearchError, match=r"index format 1.*build the index again"):
        ContextIndex.load(out)
    build_index(topic_corpus, out, ConstructedEmbedder(fixture_bilm), layers=[2], progress=False)
    assert ContextIndex.load(out).layers == ["layer2"]


def test_an_index_storing_an_nprobe_beyond_its_lists_searches_them_all(topic_corpus, constructed_embedder, tmp_path):
    """`elmo index --nprobe 999999999999999999999` stored it; every query then failed in faiss's setter."""
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, progress=False,
                ann=AnnOptions(factory="IVF4,Flat", nprobe=1))
    meta = json.loads((tmp_path / "index" / "meta.json").read_text())
    meta["ann"]["nprobe"] = 999999999999999999999
    (tmp_path / "index" / "meta.json").write_text(json.dumps(meta))
    index = ContextIndex.load(tmp_path / "index", embedder=constructed_embedder)
    queries = np.eye(index.dim, dtype=np.float32)[:8]
    _, rows = index.search(queries, k=5, exact=False)
    np.testing.assert_array_equal(rows, index.search(queries, k=5, exact=True)[1])  # every list: a flat IVF is exact


@pytest.mark.parametrize("nprobe", [0, -3, "32", None])
def test_an_index_storing_an_nprobe_faiss_cannot_take_is_refused_by_load_naming_it(topic_corpus, constructed_embedder,
                                                                                   tmp_path, nprobe):
    build_index(topic_corpus, tmp_path / "index", constructed_embedder, progress=False)
    meta = json.loads((tmp_path / "index" / "meta.json").read_text())
    meta["ann"]["nprobe"] = nprobe
    (tmp_path / "index" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(SearchError, match=f"meta.json: ann.nprobe is {nprobe!r}; expected") as refused:
        ContextIndex.load(tmp_path / "index")
    assert refused.value.field == "directory"


def test_a_batch_size_beyond_the_corpus_builds_the_index_of_a_small_one(topic_corpus, constructed_embedder, tmp_path):
    """A batch_size of 10**21 asked islice for more lines than it can count, after the model had loaded."""
    build_index(topic_corpus, tmp_path / "small", constructed_embedder, progress=False)
    build_index(topic_corpus, tmp_path / "huge", constructed_embedder, progress=False, batch_size=10**21)
    for name in sorted(path.name for path in (tmp_path / "small").iterdir()):
        if name != "meta.json":
            assert (tmp_path / "huge" / name).read_bytes() == (tmp_path / "small" / name).read_bytes(), name


def test_load_names_a_missing_index_directory_a_file_and_an_unfinished_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere: no such index directory"):
        ContextIndex.load(tmp_path / "nowhere")
    (tmp_path / "afile").write_text("")
    with pytest.raises(SearchError, match="afile is a file; expected an index directory"):
        ContextIndex.load(tmp_path / "afile")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty is not a finished index \(no meta.json\)"):
        ContextIndex.load(tmp_path / "empty")
    (tmp_path / "killed.partial").mkdir()  # a build of killed that never finished
    with pytest.raises(FileNotFoundError, match=r"killed: no such index directory .*killed.partial is an unfinished"):
        ContextIndex.load(tmp_path / "killed")


def test_an_embedder_that_carries_state_between_batches_is_refused_to_build_and_to_query(topic_corpus, fixture_bilm,
                                                                                         tmp_path):
    """A StatefulEmbedder gives one line other vectors after other lines (its batch row's state), so an index built
    with it ranked a query line's own copies below other lines' uses; it is refused at build and at query."""
    from elmo.stateful_embedder import StatefulEmbedder

    line = THEATRE_LINES[0]
    position = line.split().index("play")
    stateless = Embedder(fixture_bilm, tokenizer="whitespace").embed([line], "top")[0][position]
    carried = StatefulEmbedder(fixture_bilm).embed([SPORTS_LINES[0], line], "top", batch_size=1)[1][position]
    cosine = stateless @ carried / np.linalg.norm(stateless) / np.linalg.norm(carried)
    assert cosine < 0.99  # the premise: the line's vector depends on the line before it in its row

    with pytest.raises(SearchError, match="StatefulEmbedder") as refused:
        build_index(topic_corpus, tmp_path / "stateful", StatefulEmbedder(fixture_bilm), progress=False)
    assert refused.value.field == "model"
    assert not (tmp_path / "stateful").exists() and not (tmp_path / "stateful.partial").exists()

    build_index(topic_corpus, tmp_path / "index", Embedder(fixture_bilm, tokenizer="whitespace"), progress=False)
    queried_statefully = ContextIndex.load(tmp_path / "index", embedder=StatefulEmbedder(fixture_bilm))
    with pytest.raises(SearchError, match="StatefulEmbedder") as refused:
        neighbors(queried_statefully, line, "play")
    assert refused.value.field == "embedder"


@pytest.mark.parametrize("target", ["an index", "nothing"])
def test_an_out_that_is_a_symbolic_link_is_refused_before_any_work_and_left_as_it_is(topic_corpus, fixture_bilm,
                                                                                    tmp_path, target):
    """The link passed, the corpus was embedded and the ANN index built, and only publishing refused it."""
    existing = tmp_path / "existing"
    if target == "an index":
        build_index(topic_corpus, existing, ConstructedEmbedder(fixture_bilm), progress=False)
    meta_before = (existing / "meta.json").read_text() if target == "an index" else None
    link = tmp_path / "link"
    link.symlink_to(existing.name)
    with pytest.raises(SearchError, match=r"link is a symbolic link \(to existing\)") as refused:
        build_index(topic_corpus, link, _NeverEmbeds(fixture_bilm), progress=False)
    assert refused.value.field == "out"
    with pytest.raises(SearchError, match="is a symbolic link"):  # elmo index's check, before the model loads
        build_module.check_index_options(link, None, fixture_bilm.config.n_output_layers,
                                         fixture_bilm.config.output_dim, None, None)
    assert link.is_symlink() and str(link.readlink()) == "existing"
    assert not (tmp_path / "link.partial").exists()
    if meta_before is not None:
        assert (existing / "meta.json").read_text() == meta_before


@pytest.mark.parametrize(("meta", "message"), [
    ([1, 2], r"meta.json holds a JSON list, not an object; the index is damaged"),
    ({"format": 2}, r"meta.json lacks model, fingerprint, tokenizer, layers, .*, ann; the index is damaged"),
    ("without layers", r"meta.json lacks layers; the index is damaged: build it again"),
    ("without ann.candidates", r"meta.json lacks ann.candidates; "),
    ("an empty window", r"meta.json lacks window.max_window_tokens, window.window_context; "),
    ("dim as text", r"meta.json: dim is '32'; expected a whole number >= 1"),
    ("ann as a list", r"meta.json: ann is \[\]; expected an object"),
    ("not JSON", r"meta.json is not JSON \(.*\); the index is damaged"),
])
def test_a_damaged_meta_json_is_refused_by_load_naming_it_and_the_key(topic_corpus, constructed_embedder, tmp_path,
                                                                     meta, message):
    """[1, 2] gave an AttributeError, {"format": 2} a KeyError 'ann', a missing key a bare KeyError."""
    out = tmp_path / "index"
    build_index(topic_corpus, out, constructed_embedder, progress=False)
    built = json.loads((out / "meta.json").read_text())
    damaged = {"without layers": {key: value for key, value in built.items() if key != "layers"},
               "without ann.candidates": {**built, "ann": {"factories": {}, "nprobe": 1}},
               "an empty window": {**built, "window": {}}, "dim as text": {**built, "dim": "32"},
               "ann as a list": {**built, "ann": []}}
    if meta == "not JSON":
        (out / "meta.json").write_text('{"format": 2,')
    else:
        (out / "meta.json").write_text(json.dumps(damaged.get(meta, meta) if isinstance(meta, str) else meta))
    with pytest.raises(SearchError, match=message) as refused:
        ContextIndex.load(out)
    assert refused.value.field == "directory"


@pytest.mark.parametrize("damaged", ["vectors-layer1.f16", "tokens.bin", "sentence_offsets.i8", "layer0.f16"])
def test_a_file_cut_short_or_missing_is_refused_by_load_naming_it_before_it_is_mapped(topic_corpus,
                                                                                      constructed_embedder, tmp_path,
                                                                                      damaged):
    """A memory map of a file cut short failed as "mmap length is greater than file size", naming no file (the
    vectors' only at the first search)."""
    out = tmp_path / "index"
    build_index(topic_corpus, out, constructed_embedder, layers=["top", 1], progress=False)
    path = out / damaged
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.truncate(size - 3)
    with pytest.raises(SearchError, match=rf"{damaged} is {size - 3:,} bytes where meta.json makes it {size:,}: "
                                          r"the index is damaged .*build it again") as refused:
        ContextIndex.load(out)
    assert refused.value.field == "directory"
    path.unlink()
    with pytest.raises(SearchError, match=rf"{damaged} is missing; the index is damaged: build it again"):
        ContextIndex.load(out)


def test_the_docs_say_an_index_without_a_window_is_checked_against_the_defaults_of_then():
    """docs/search.md said such indexes were "not checked", while they are read as cut at 256 / 64 and checked."""
    from elmo.windows import EARLIER_DEFAULTS

    docs = " ".join((Path(__file__).parents[2] / "docs" / "search.md").read_text(encoding="utf-8").split())
    assert "Indexes built before it was recorded are not checked" not in docs
    assert f"defaults of then, {EARLIER_DEFAULTS['max_window_tokens']} / {EARLIER_DEFAULTS['window_context']} " \
           "(`elmo.windows.EARLIER_DEFAULTS`), and checked against them" in docs


@pytest.mark.parametrize("factory", ["IDMap,Flat", "IDMap2,Flat", "IDMap,IVF4,Flat"])
def test_a_factory_whose_index_cannot_take_plain_vectors_is_refused_before_the_corpus_is_embedded(
        topic_corpus, fixture_bilm, tmp_path, factory):
    """faiss builds these, so they passed the check, and failed at add() after the whole corpus was embedded, with
    faiss's C++ function and source line in the message."""
    with pytest.raises(SearchError, match=rf"^--factory '{factory}' makes a faiss index that cannot index the "
                                          r"corpus's vectors: add does not make sense with IndexIDMap, use "
                                          r"add_with_ids$") as refused:
        build_index(topic_corpus, tmp_path / "index", _NeverEmbeds(fixture_bilm), ann=AnnOptions(factory=factory),
                    progress=False)
    assert refused.value.field == "factory"
    assert not (tmp_path / "index.partial").exists()


def test_a_factory_faiss_cannot_parse_is_named_without_faiss_s_source_location(topic_corpus, fixture_bilm, tmp_path):
    with pytest.raises(SearchError, match=r"^--factory 'bogus' is not a faiss index this build can make: could not "
                                          r"parse index string bogus$"):
        build_index(topic_corpus, tmp_path / "index", _NeverEmbeds(fixture_bilm), ann=AnnOptions(factory="bogus"),
                    progress=False)


def test_a_faiss_failure_after_the_embedding_is_named_without_faiss_s_source_location(topic_corpus, fixture_bilm,
                                                                                      tmp_path, monkeypatch):
    """The reason was cut after "Error: ", and a faiss message without one kept faiss's C++ function and line."""
    def failing_build(*args, **kwargs):
        raise RuntimeError("Error in void faiss::IndexIDMapTemplate<IndexT>::add(faiss::idx_t, const float*) at "
                           "/project/faiss/IndexIDMap.cpp:75: add does not make sense with IndexIDMap, use "
                           "add_with_ids")

    monkeypatch.setattr(build_module, "build_ann", failing_build)
    with pytest.raises(SearchError, match=r"of layer2 \(add does not make sense with IndexIDMap, use add_with_ids\); "
                                          "the embedded corpus is kept") as refused:
        build_index(topic_corpus, tmp_path / "index", ConstructedEmbedder(fixture_bilm), progress=False)
    assert "faiss::" not in str(refused.value) and ".cpp" not in str(refused.value)
