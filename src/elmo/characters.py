"""Tokens -> character ids, in the 262-id scheme that bilm-tf trained with and AllenNLP reads.

Each token is its UTF-8 bytes (undecodable characters dropped), cut to ``max_characters - 2`` bytes even
in the middle of a multi-byte character, wrapped in begin-of-word / end-of-word markers and padded:
``[259, b1+1, ..., bn+1, 260, 261, 261, ...]``. Every id is the raw symbol + 1, so that id 0 means
"no token here" and the mask of a batch is simply ``(char_ids > 0).any(-1)``.
"""

from collections.abc import Sequence, Sized

import torch

MAX_CHARACTERS_PER_TOKEN = 50

# Raw symbols (before the +1 shift): bytes are 0..255, then these.
_BOS_CHAR = 256  # marks the sentence-start token
_EOS_CHAR = 257  # marks the sentence-end token
_BOW_CHAR = 258  # begin of word
_EOW_CHAR = 259  # end of word
_PAD_CHAR = 260  # pads a word to max_characters
PADDING_CHAR_ID = _PAD_CHAR + 1  # the id of a padding position after a word's end-of-word marker

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _wrap(symbols: Sequence[int], max_characters: int) -> list[int]:
    ids = [PADDING_CHAR_ID] * max_characters
    ids[0] = _BOW_CHAR + 1
    for position, symbol in enumerate(symbols, start=1):
        ids[position] = symbol + 1
    ids[len(symbols) + 1] = _EOW_CHAR + 1
    return ids


def token_to_char_ids(token: str, max_characters: int = MAX_CHARACTERS_PER_TOKEN) -> list[int]:
    """The ``max_characters`` ids of one token; ``<S>`` and ``</S>`` give the sentence-boundary tokens."""
    if max_characters < 3:
        raise ValueError(f"max_characters must be at least 3 (markers + one byte), got {max_characters}")
    if token == BOS_TOKEN:
        return _wrap([_BOS_CHAR], max_characters)
    if token == EOS_TOKEN:
        return _wrap([_EOS_CHAR], max_characters)
    token_bytes = token.encode("utf-8", "ignore")[: max_characters - 2]
    return _wrap(list(token_bytes), max_characters)


def bos_char_ids(max_characters: int = MAX_CHARACTERS_PER_TOKEN) -> list[int]:
    return token_to_char_ids(BOS_TOKEN, max_characters)


def eos_char_ids(max_characters: int = MAX_CHARACTERS_PER_TOKEN) -> list[int]:
    return token_to_char_ids(EOS_TOKEN, max_characters)


def batch_to_char_ids(
    sentences: Sequence[Sequence[str]], max_characters: int = MAX_CHARACTERS_PER_TOKEN
) -> torch.Tensor:
    """Tokenized sentences -> ``(batch, max_tokens, max_characters)`` int64 ids, padding rows all zero.

    A sentence is any sequence of str tokens (a list, a tuple, a NumPy array of str). No sentence-boundary tokens
    are added here: the biLM adds them itself. Every token is checked before any is encoded, so a bytes, None or
    number token is a TypeError naming its sentence and position, not an AttributeError from deep inside; and so is
    an iterator (a generator) of sentences or of tokens, which cannot be read twice.
    """
    if not isinstance(sentences, Sized):
        raise TypeError(f"sentences is a {type(sentences).__name__}; expected a list (a sequence) of token lists")
    for row, sentence in enumerate(sentences):
        if isinstance(sentence, str):
            raise TypeError(f"sentence {row} is a string; expected a list of tokens")
        if not isinstance(sentence, Sized):
            raise TypeError(f"sentence {row} is a {type(sentence).__name__}; expected a list (a sequence) of tokens")
        for position, token in enumerate(sentence):
            if not isinstance(token, str):
                raise TypeError(f"sentence {row}, token {position} is {token!r}; expected a string")
    max_tokens = max((len(sentence) for sentence in sentences), default=0)
    char_ids = torch.zeros((len(sentences), max_tokens, max_characters), dtype=torch.long)
    for row, sentence in enumerate(sentences):
        if len(sentence):  # not `if sentence`: a NumPy array's truth value is ambiguous
            char_ids[row, : len(sentence)] = torch.tensor(
                [token_to_char_ids(token, max_characters) for token in sentence], dtype=torch.long
            )
    return char_ids
