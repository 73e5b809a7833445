"""The word vocabulary of the language model's softmax, in bilm-tf's ``vocab.txt`` layout.

One token a line: ``<S>``, ``</S>``, ``<UNK>`` first, then tokens by descending corpus frequency. The
order matters: the log-uniform candidate sampler assumes that id k is the k-th most frequent token.
The input side never needs the vocabulary (the biLM reads characters), only the targets do.
"""

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path

import numpy as np

from elmo.characters import BOS_TOKEN, EOS_TOKEN
from elmo.files import NotUtf8Error, utf8_universal_lines

UNK_TOKEN = "<UNK>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)


class VocabularyError(ValueError):
    """A vocabulary file or token list that the language model cannot use."""


@dataclass(frozen=True)
class UnknownCounts:
    """Words of a text sample that a vocabulary maps to ``<UNK>``. A vocabulary leaves out rare words by design
    (``min_count``, ``max_size``), so on a small text most words may be ``<UNK>``; frequent words go missing only
    where it was made from text split by another tokenizer, or from other text."""

    words: int  # the words read (fewer than asked for where the text holds fewer)
    unknown: int  # of them, mapped to <UNK>
    frequent: int  # of them, of a type that occurs at least the frequent count asked for among them
    frequent_unknown: int  # of those, mapped to <UNK>


class Vocabulary:
    """Token <-> id; unknown tokens map to ``<UNK>``."""

    def __init__(self, tokens: Iterable[str], source: str = "vocabulary",
                 line_numbers: Sequence[int] | None = None) -> None:
        """``line_numbers``: where each token stands in ``source`` (a file with blank lines), for errors."""
        self.tokens: list[str] = list(tokens)
        self.ids: dict[str, int] = {}
        line = line_numbers if line_numbers is not None else range(1, len(self.tokens) + 1)
        for index, token in enumerate(self.tokens):
            if not token or any(character.isspace() for character in token):
                raise VocabularyError(f"{source}: line {line[index]} holds {token!r}; expected one token, no spaces")
            if token in self.ids:
                raise VocabularyError(f"{source}: token {token!r} appears twice (lines {line[self.ids[token]]} "
                                      f"and {line[index]})")
            self.ids[token] = index
        missing = [token for token in SPECIAL_TOKENS if token not in self.ids]
        if missing:
            raise VocabularyError(f"{source} lacks {', '.join(missing)}; a biLM vocabulary needs <S>, </S> and <UNK>")
        self.bos_id = self.ids[BOS_TOKEN]
        self.eos_id = self.ids[EOS_TOKEN]
        self.unk_id = self.ids[UNK_TOKEN]

    def __len__(self) -> int:
        return len(self.tokens)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self.tokens == other.tokens

    def __hash__(self) -> int:
        return hash(tuple(self.tokens))

    def token_id(self, token: str) -> int:
        return self.ids.get(token, self.unk_id)

    def count_unknown(self, sentences: Iterable[Sequence[str]], n_words: int, frequent_count: int) -> UnknownCounts:
        """How many of the first ``n_words`` words of ``sentences`` map to ``<UNK>``, over all of them and over those
        whose type occurs at least ``frequent_count`` times among them (see ``UnknownCounts``)."""
        words = list(islice(chain.from_iterable(sentences), n_words))
        type_counts = Counter(words)
        unknown = frequent = frequent_unknown = 0
        for word in words:
            is_unknown = self.token_id(word) == self.unk_id
            is_frequent = type_counts[word] >= frequent_count
            unknown += is_unknown
            frequent += is_frequent
            frequent_unknown += is_unknown and is_frequent
        return UnknownCounts(len(words), unknown, frequent, frequent_unknown)

    def frequency_order(self, sentences: Iterable[Sequence[str]], n_words: int, frequent_count: int) -> float | None:
        """How far the ids follow frequency in the first ``n_words`` words of ``sentences``: Spearman's rank
        correlation between the id and the count of each word of this vocabulary that occurs at least
        ``frequent_count`` times there, most frequent first, tied counts ranked alike (None where fewer than 20
        words do, or all of them equally often). About 0.85 for the shipped ``en`` vocabulary on its own training
        text, 0.5 on other English text, near 0 for the same words in alphabetical or random order, which the
        sampler's assumption (the module docstring) does not fit."""
        counts = Counter(islice(chain.from_iterable(sentences), n_words))
        known = [(self.ids[word], count) for word, count in counts.items()
                 if count >= frequent_count and word in self.ids and word not in SPECIAL_TOKENS]
        if len(known) < 20 or len({count for _, count in known}) == 1:
            return None
        ids, word_counts = np.array(known, dtype=np.float64).T
        return float(np.corrcoef(_ranks(ids), _ranks(-word_counts))[0, 1])

    def specials_first(self) -> bool:
        """Whether ``<S>``, ``</S>``, ``<UNK>`` are ids 0, 1, 2 in some order (``from_counts`` writes them in that
        order, bilm-tf's published vocabulary starts ``</S>``, ``<S>``, ``<UNK>``): the sampler then counts ``</S>``,
        a target of every sentence, among the most frequent."""
        return set(self.tokens[: len(SPECIAL_TOKENS)]) == set(SPECIAL_TOKENS)

    @classmethod
    def load(cls, path: str | Path) -> "Vocabulary":
        """``path``'s tokens, one a line (blank lines skipped); VocabularyError naming the file, and the line and
        byte where it is not UTF-8 text, rather than the decoder's bare message that names neither."""
        path = Path(path)
        if path.is_dir():
            raise VocabularyError(f"{path} is a directory; expected a vocabulary file (vocab.txt), one token a line")
        if path.exists() and not path.is_file():
            raise VocabularyError(f"{path} is not a regular file (a pipe, as <(...) gives?); write the vocabulary to "
                                  "a file first, as a run reads it again on resume")
        if not path.is_file():
            raise VocabularyError(f"{path}: no such vocabulary file")
        lines = [(number, line.strip()) for number, line in _decoded_lines(path) if line.strip()]
        if not lines:
            raise VocabularyError(f"{path}: the vocabulary file is empty")
        return cls([token for _, token in lines], source=str(path), line_numbers=[number for number, _ in lines])

    def save(self, path: str | Path) -> None:
        from elmo.files import write_text_atomic

        write_text_atomic(Path(path), "".join(f"{token}\n" for token in self.tokens))

    @classmethod
    def from_counts(cls, counts: Counter[str], min_count: int = 1, max_size: int | None = None) -> "Vocabulary":
        """Specials, then tokens seen at least ``min_count`` times, most frequent first (ties by first
        appearance, as ``Counter.most_common`` keeps insertion order), at most ``max_size`` in all."""
        if min_count < 1:
            raise VocabularyError(f"min_count is {min_count}; expected at least 1")
        if max_size is not None and max_size < len(SPECIAL_TOKENS):
            raise VocabularyError(f"max_size is {max_size}; it must leave room for {len(SPECIAL_TOKENS)} specials")
        tokens = list(SPECIAL_TOKENS)
        for token, count in counts.most_common():
            if count < min_count or (max_size is not None and len(tokens) >= max_size):
                break
            if token not in SPECIAL_TOKENS:
                tokens.append(token)
        return cls(tokens)

    def adapted_to(self, tokens_by_frequency: Iterable[str]) -> "Vocabulary":
        """Every token of this vocabulary and of ``tokens_by_frequency`` (a new text's tokens, most frequent
        first), in the order the sampler needs for that text: the specials, then ``tokens_by_frequency``, then
        this vocabulary's tokens the new text lacks, in their old order. Ids change; a trained softmax follows
        its tokens (``grow_vocabulary``)."""
        ordered = dict.fromkeys([*SPECIAL_TOKENS, *tokens_by_frequency, *self.tokens])
        return Vocabulary(ordered)


def _ranks(values: np.ndarray) -> np.ndarray:
    """Each value's rank from 0, tied values given the mean of their ranks (as Spearman's correlation takes them)."""
    ordinal = np.empty(len(values))
    ordinal[np.argsort(values, kind="stable")] = np.arange(len(values))
    _, tie_group, group_sizes = np.unique(values, return_inverse=True, return_counts=True)
    return (np.bincount(tie_group, weights=ordinal) / group_sizes)[tie_group]


def _decoded_lines(path: Path) -> list[tuple[int, str]]:
    r"""Each line of ``path`` with its number (from 1), decoded as UTF-8 without a leading byte-order mark (which
    would hide ``<S>`` on the first line); lines end at ``\n``, ``\r\n`` or ``\r``, as a text file opened in
    Python reads them. VocabularyError at a NUL byte or a byte that is not UTF-8 (``elmo.files.NotUtf8Error``'s
    message, whose line is counted by ``\n``)."""
    try:
        return list(enumerate(utf8_universal_lines(path, refuse_nul=True), start=1))
    except NotUtf8Error as error:
        raise VocabularyError(str(error)) from error
