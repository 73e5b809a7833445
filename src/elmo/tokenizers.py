"""Raw text -> tokens, by name: ``whitespace``, ``english`` (Moses rules, as ELMo's 1B Word Benchmark
training text was tokenized, via sacremoses), ``jieba`` (Chinese word segmentation) and ``chars``
(one token per non-space character, for Chinese without segmentation).

The biLM reads bytes, so any tokenizer works with any model; a model should be fed text tokenized
the way its training corpus was.
"""

import re
from collections.abc import Callable
from functools import cache

Tokenizer = Callable[[str], list[str]]

# Text that no reader keeps as it is: control characters (read as spaces) and the byte-order mark a Windows
# editor starts a file with (dropped at a line's start), by the embedder and the trainer alike.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
BYTE_ORDER_MARK = "\ufeff"


def clean_text(text: str) -> str:
    """``text`` as every reader sees it before tokenizing (``Embedder.tokenize``, the trainer's corpus,
    ``elmo embed``): a byte-order mark at its start dropped, control characters as spaces."""
    return CONTROL_CHARACTERS.sub(" ", text.removeprefix(BYTE_ORDER_MARK))


def whitespace_tokenize(text: str) -> list[str]:
    return text.split()


def chars_tokenize(text: str) -> list[str]:
    return [character for character in text if not character.isspace()]


@cache
def _moses():
    from sacremoses import MosesTokenizer

    return MosesTokenizer(lang="en")


# The clitics a tokenizer splits off (PTB: ``do n't``, Moses: ``don 't``), each standing alone between spaces in
# text tokenized already. Moses would split such a chunk once more (``Alusik 's`` -> ``Alusik ' s``).
_CLITIC = re.compile(r"(?:'(?:s|t|re|m|ve|d|ll)|n't)", re.IGNORECASE)


def english_tokenize(text: str) -> list[str]:
    """Moses rules, except that a clitic standing alone (``'s``, ``n't``, ``'re``, ...) is kept as it is, so
    text tokenized already (``Alusik 's``, ``do n't``) comes back unchanged. Moses sees an alphanumeric
    stand-in in its place, so the rules around it act as they would on the spaced text.

    Not kept: Moses' split of a name at its apostrophe (``O'Hara`` -> ``O 'Hara``), which cannot be told
    from an opening quote (``'Hara``); a second pass makes it ``O ' Hara`` (422 of the en corpus' 1.94 M
    tokens). Nor PTB's closing quote ``''`` and ``'em``, which Moses splits (``' '``, ``' em``) as it split
    the shipped models' training text, so that a model reads them as it learnt them."""
    chunks = text.split()
    clitics = [chunk for chunk in chunks if _CLITIC.fullmatch(chunk)]
    if not clitics:
        return _moses().tokenize(text, escape=False)
    stand_in = "elmoclitic"
    while stand_in in text:  # a stand-in the text does not hold, so only ours are put back
        stand_in += "x"
    marked = " ".join(stand_in if _CLITIC.fullmatch(chunk) else chunk for chunk in chunks)
    put_back = iter(clitics)
    return [next(put_back) if token == stand_in else token for token in _moses().tokenize(marked, escape=False)]


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
