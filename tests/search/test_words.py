"""Lines and words holding characters that cleaning changes (``elmo.tokenizers.clean_text``): the index's
tokens must be the ones the model embedded, and a query word must match them however it was typed."""

import numpy as np
import pytest

from elmo.embedder import Embedder
from elmo.search import ContextIndex, SearchError, build_index, neighbors, senses
from elmo.search import build as build_module
from elmo.search.neighbors import locate

from .conftest import ConstructedEmbedder

# Raw corpus lines, and the tokens a reader sees in each, written out by hand: a soft hyphen inside a word and
# one standing alone (deleted: the tokens after it move one place left), a zero-width space likewise, a control
# character (a space), and an accent typed as a combining character (composed with its letter).
RAW_LINES = [
    "the co\u00adoperation of a \u00ad play",
    "Wi\u200bFi \u200b play is allowed here",
    "a\x01play at the cafe\u0301",
    "they saw a play at the cafe\u0301 tonight",
    "the cafe\u0301 play",
]
READ_TOKENS = [
    ["the", "cooperation", "of", "a", "play"],
    ["WiFi", "play", "is", "allowed", "here"],
    ["a", "play", "at", "the", "caf\u00e9"],
    ["they", "saw", "a", "play", "at", "the", "caf\u00e9", "tonight"],
    ["the", "caf\u00e9", "play"],
]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(RAW_LINES) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def embedder(fixture_bilm) -> Embedder:
    return Embedder(fixture_bilm, tokenizer="whitespace")


@pytest.fixture
def index(corpus, embedder, tmp_path) -> ContextIndex:
    build_index(corpus, tmp_path / "index", embedder, progress=False)
    return ContextIndex.load(tmp_path / "index", embedder=embedder)


def test_an_indexed_token_is_the_token_embedded_at_its_position(index):
    row = 0
    for line, tokens in enumerate(READ_TOKENS):
        for position, token in enumerate(tokens):
            occurrence = index.occurrence(row)
            assert (occurrence.line, occurrence.token_index, occurrence.tokens, occurrence.token) == \
                (line, position, tokens, token)
            assert index.words[int(index.tokens[row]["word"])] == token
            row += 1
    assert row == index.n_indexed


def test_a_corpus_line_as_the_query_leaves_out_its_own_token(index):
    for line, raw in enumerate(RAW_LINES):
        position = READ_TOKENS[line].index("play")
        found = neighbors(index, raw, "play", k=index.n_indexed, exact=True)
        assert len(found) == index.n_indexed - 1
        assert (line, position) not in {(hit.line, hit.token_index) for hit in found}
        assert all(hit.tokens[hit.token_index] == hit.token for hit in found)
        assert all(hit.sentence.split() == hit.tokens for hit in found)  # the text the tokens were split from


def test_a_decomposed_query_word_finds_the_composed_tokens(index, corpus, embedder, tmp_path):
    decomposed, composed = "cafe\u0301", "caf\u00e9"
    cafe_rows = [row for row in range(index.n_indexed) if index.occurrence(row).token == composed]
    assert len(cafe_rows) == 3
    found = neighbors(index, f"he saw a play at the {decomposed} .", decomposed, k=3, same_word=True)
    assert [hit.token for hit in found] == [composed] * 3
    assert index.rows_of(decomposed).tolist() == index.rows_of(composed.upper()).tolist() == cafe_rows
    assert index.vocabulary_form(decomposed) == composed
    assert locate(["at", "the", decomposed], composed) == 2  # a token list is kept as given, still matched
    clustered = senses(index, decomposed)
    assert clustered.total_occurrences == 3
    assert [example.token for example in clustered.examples] == [composed] * len(clustered.examples)

    build_index(corpus, tmp_path / "cafe", embedder, words_only=[decomposed], progress=False)
    only = ContextIndex.load(tmp_path / "cafe", embedder=embedder)
    assert [only.occurrence(row).token for row in range(only.n_indexed)] == [composed] * 3


@pytest.mark.parametrize("word", [" ", "\u200d", "\u00ad\ufeff"])
def test_a_blank_word_is_refused_naming_word_not_matched_to_a_blank_token(index, word):
    # A token list may hold a token that cleans to nothing; a blank word's empty key matched it, and its vector
    # was searched as if it were a word's. The same word is refused by /v1/similarity. (The embedder now refuses
    # such a token itself, so neighbors is given a sentence without it.)
    blank_token = ["a", "\u200b", "play"]
    searches = [lambda: locate(blank_token, word), lambda: neighbors(index, ["a", "play"], word, k=3),
                lambda: senses(index, word), lambda: index.rows_of(word)]
    for search in searches:
        with pytest.raises(SearchError, match="only spaces or invisible characters") as refused:
            search()
        assert (refused.value.field, refused.value.code) == ("word", SearchError.INVALID)


def test_an_index_whose_lines_split_otherwise_than_embedded_is_refused_naming_the_line(corpus, fixture_bilm,
                                                                                       tmp_path, monkeypatch):
    # As an index built before lines were cleaned: the soft hyphen standing alone was a token of its own.
    monkeypatch.setattr(build_module, "clean_text", lambda text: text)
    build_index(corpus, tmp_path / "index", ConstructedEmbedder(fixture_bilm), progress=False)
    monkeypatch.undo()
    index = ContextIndex.load(tmp_path / "index")
    assert index.occurrence(3).token == "a"  # before the lone soft hyphen: the same position either way
    with pytest.raises(SearchError, match=r"line 0 split by the 'whitespace' tokenizer has 'play' at position 4, "
                                          r"where the index embedded '\\xad'") as refused:
        index.occurrence(4)
    assert refused.value.field == "directory"
    np.testing.assert_array_equal(index.rows_of("play"), [5, 8, 13, 20, 27])
