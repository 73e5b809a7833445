"""Raw text -> tokens, by name: ``whitespace``, ``english`` (Moses rules, as ELMo's 1B Word Benchmark
training text was tokenized, via sacremoses), ``jieba`` (Chinese word segmentation) and ``chars``
(one token per non-space character, for Chinese without segmentation).

The biLM reads bytes, so any tokenizer works with any model; a model should be fed text tokenized
the way its training corpus was.
"""

from collections.abc import Callable
from functools import cache

Tokenizer = Callable[[str], list[str]]


def whitespace_tokenize(text: str) -> list[str]:
    return text.split()


def chars_tokenize(text: str) -> list[str]:
    return [character for character in text if not character.isspace()]


@cache
def _moses():
    from sacremoses import MosesTokenizer

    return MosesTokenizer(lang="en")


def english_tokenize(text: str) -> list[str]:
    return _moses().tokenize(text, escape=False)


@cache
def _jieba():
    import jieba

    jieba.setLogLevel(60)  # its dictionary-loading chatter goes to stderr otherwise
    return jieba


def jieba_tokenize(text: str) -> list[str]:
    return [word for word in _jieba().lcut(text) if not word.isspace()]


TOKENIZERS: dict[str, Tokenizer] = {
    "whitespace": whitespace_tokenize,
    "english": english_tokenize,
    "jieba": jieba_tokenize,
    "chars": chars_tokenize,
}


def get_tokenizer(name: str) -> Tokenizer:
    try:
        return TOKENIZERS[name]
    except KeyError:
        raise ValueError(f"unknown tokenizer {name!r}; expected one of {sorted(TOKENIZERS)}") from None
