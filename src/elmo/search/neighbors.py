"""The query side of contextual search: a word as used in a sentence -> one vector -> the indexed uses nearest
to it, as what people read (``Neighbor``)."""

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from elmo.layer_choice import LayerChoice, stored_layer
from elmo.search.errors import SearchError
from elmo.search.index import ContextIndex, highlighted, query_key
from elmo.tokenizers import clean_text, word_key


@dataclass(frozen=True)
class Neighbor:
    """An indexed token near the query: its corpus line's text (cleaned, as the model read it), its position among
    that line's tokens (as the model's tokenizer splits it), the token, and the cosine to the query."""

    sentence: str
    token_index: int
    token: str
    score: float
    line: int = field(compare=False)
    tokens: list[str] = field(compare=False, repr=False)

    def to_json(self) -> dict:
        return {key: value for key, value in asdict(self).items() if key in ("sentence", "token_index", "token",
                                                                              "score")}

    def highlighted(self, start: str = "[", end: str = "]") -> str:
        return highlighted(self.tokens, self.token_index, start, end)


def locate(tokens: Sequence[str], word: str, occurrence: int = 0) -> int:
    """The position among ``tokens`` of the ``occurrence``-th use of ``word`` (0-based, ignoring case; word and
    tokens compared as ``elmo.tokenizers.word_key`` cleans them, as a sentence is cleaned before it is split).

    SearchError ``word_not_in_sentence`` (field ``word``) if it is not there, ``invalid_request`` (field ``word``)
    for a blank word (``query_key``), or naming ``occurrence`` if the word is used fewer times."""
    wanted = query_key(word)
    positions = [position for position, token in enumerate(tokens) if word_key(token) == wanted]
    if not positions:
        raise SearchError(f"{word!r} is not a token of the sentence {' '.join(tokens)!r}", "word",
                          SearchError.WORD_NOT_IN_SENTENCE)
    if not 0 <= occurrence < len(positions):
        raise SearchError(f"{word!r} occurs {len(positions)} time(s) in the sentence; occurrence {occurrence} "
                          "is out of range", "occurrence")
    return positions[occurrence]


def neighbors(index: ContextIndex, sentence: str | Sequence[str], word: str, k: int = 10,
              layer: LayerChoice | str | None = None, same_word: bool = False, exact: bool = False,
              occurrence: int = 0) -> list[Neighbor]:
    """The ``k`` indexed tokens nearest to ``word`` as used in ``sentence`` (its ``occurrence``-th use there;
    fewer if the index holds fewer).

    If the corpus holds the sentence (the same tokens), one use at the query's position is left out as the
    query token itself: the best ranked, which among the identical vectors of repeated lines is the earliest
    line. Its other copies are uses of their own and stay, at a cosine of about 1.

    A sentence given as text is cleaned (``clean_text``) and split as the corpus lines were; the word is matched
    cleaned alike (``elmo.tokenizers.word_key``). The sentence is embedded by ``index.embedder`` and the word's vector
    taken at ``layer`` (default: the first indexed); ANN candidates are re-ranked by exact cosine, or ``exact``
    scans every token. ``same_word`` keeps to occurrences of the same word (ignoring case), searched exactly, as
    the paper's table does. SearchError names the argument at fault."""
    if k < 1:
        raise SearchError(f"k is {k}; expected at least 1", "k")
    name = index.layer(layer)
    embedder = index.embedder
    tokens = embedder.tokenize(clean_text(sentence) if isinstance(sentence, str) else sentence)
    position = locate(tokens, word, occurrence)
    rows = index.rows_of(word) if same_word else None
    if rows is not None and not len(rows):
        raise SearchError(f"{word!r} does not occur among the indexed tokens", "word", SearchError.WORD_NOT_INDEXED)
    all_layers = embedder.embed([tokens], "all")[0]
    stored = stored_layer(name, index.n_layers)
    vector = all_layers[:, position].mean(axis=0) if stored == "average" else all_layers[stored, position]
    available = index.n_indexed if rows is None else len(rows)
    # one more than k for the query token itself; never more than there are (the search fills every row it returns)
    scores, found = index.search(vector, min(k + 1, available), name, exact, rows)
    results, left_out = [], False
    for score, row in zip(scores[0], found[0], strict=True):
        hit = index.occurrence(int(row))
        if not left_out and hit.tokens == tokens and hit.token_index == position:
            left_out = True  # the query token itself; the sentence's other copies in the corpus stay
            continue
        results.append(Neighbor(hit.sentence, hit.token_index, hit.token, float(score), hit.line, hit.tokens))
    return results[:k]
