"""Raw text -> tokens, by name: ``whitespace``, ``english`` (Moses rules, as ELMo's 1B Word Benchmark
training text was tokenized, via sacremoses), ``jieba`` (Chinese word segmentation) and ``chars``
(one token per non-space character, for Chinese without segmentation).

The biLM reads bytes, so any tokenizer works with any model; a model should be fed text tokenized
the way its training corpus was.
"""

import re
import unicodedata
from collections.abc import Callable
from functools import cache
from typing import Any

Tokenizer = Callable[[str], list[str]]

# Text that no reader keeps as it is, by the embedder and the trainer alike: control characters (read as spaces),
# and characters that only steer how text is drawn (deleted), which a tokenizer would otherwise make tokens of or
# split a word at ("co\u00adoperation" -> "co", "\u00ad", "operation"). The byte-order mark is one of them: a
# Windows editor starts a file with it, so files joined together hold one at a line's start.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
BYTE_ORDER_MARK = "\ufeff"
INVISIBLE_FORMATTING = re.compile(
    "[\u00ad"  # soft hyphen: where a word may be hyphenated at a line's end
    "\u200b"  # zero-width space: where a line may break
    "\u200d"  # zero-width joiner: glyphs drawn joined (emoji sequences, Indic conjuncts)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # marks, embeddings and isolates of writing direction
    "\u180e"  # Mongolian vowel separator (a format character since Unicode 6.3)
    "\u206a-\u206f"  # deprecated format characters (symmetric swapping, Arabic shaping, digit shapes)
    "\u2060-\u2064"  # word joiner, invisible mathematical operators
    "\ufe00-\ufe0f\U000e0100-\U000e01ef"  # variation selectors: emoji or text style of the glyph before ("❤️")
    "\u180b-\u180d\u180f"  # Mongolian free variation selectors
    "\u034f"  # combining grapheme joiner
    "\U000e0001\U000e0020-\U000e007f"  # tag characters (subdivision flags' letters, the old language tag)
    f"{BYTE_ORDER_MARK}]"  # also read as a zero-width no-break space (the word joiner's old name)
)


def clean_text(text: str) -> str:
    """``text`` as every reader sees it before tokenizing (``Embedder.tokenize``, the trainer's corpus,
    ``elmo embed``, task texts): control characters as spaces, ``INVISIBLE_FORMATTING`` deleted, and composed
    (NFC), so that ``e`` and a combining U+0301 are the one ``é`` that typed text holds, not two tokens.

    The zero-width space is deleted, not read as a word break: in the Latin and Chinese text these tokenizers
    are made for it marks where a line may wrap, inside a word (``Wi``, U+200B, ``Fi``; a long URL) as often as
    between words, and a reader sees no gap. Thai, Khmer and Lao writers put it between words, but no tokenizer
    here splits those scripts and most of their text lacks it, so a model for them needs a word splitter that
    does without it. The zero-width non-joiner (U+200C) is kept: Persian and Indic spelling needs it in a word
    (the ``whitespace`` tokenizer keeps such a word whole; ``english``, ``jieba`` and ``chars`` split at it, as they
    split at a combining mark that has no composed form, for they split off what is neither a letter nor a digit)."""
    text = INVISIBLE_FORMATTING.sub("", CONTROL_CHARACTERS.sub(" ", text))
    return unicodedata.normalize("NFC", text)


def clean_token(token: str) -> str:
    """A given token (a tokenized sentence's) cleaned as raw text is (``clean_text``: invisible formatting deleted,
    composed), so that tokens from another tool reach the model in the form its training text had: ``cafe`` with a
    combining U+0301 read as ``café``, ``❤`` with the emoji variation selector as ``❤`` (vectors whose cosine with
    the cleaned form's was 0.17-0.8 on an audit). Still one token: call it on tokens ``token_problem`` passed, one
    of which never cleans to nothing."""
    return token if token.isascii() else clean_text(token)


def token_problem(token: str) -> str | None:
    """Why a token given as it is (a tokenized sentence) cannot be embedded, or None: empty or only white space
    (the character CNN would see only a word's start and end marks, the empty word's vector, for a token no
    tokenizer makes), only invisible formatting and white space (``INVISIBLE_FORMATTING``: raw text deletes it, so
    no tokenizer makes such a token, and search and ``/v1/similarity`` read it as no word), holding a control
    character (``CONTROL_CHARACTERS``: raw text reads one as a space, so no tokenizer makes such a token either; a
    tab or line feed inside a token is white space, as a space is), or
    holding a lone surrogate (half a character, which UTF-8 cannot hold: it was dropped, and the token embedded
    as the empty word). The embedder, the service and ``elmo embed`` refuse the same tokens."""
    if not token.strip():
        return "is empty or only white space"
    if not INVISIBLE_FORMATTING.sub("", token).strip():
        shown = " ".join(f"U+{ord(character):04X}" for character in dict.fromkeys(token) if not character.isspace())
        return f"holds only invisible formatting ({shown}), which raw text loses (clean_text)"
    if control := CONTROL_CHARACTERS.search(token):
        return f"holds the control character U+{ord(control.group()):04X}"
    try:
        token.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"holds the lone surrogate U+{ord(token[error.start]):04X} (half a character)"
    return None


class RefusedToken(ValueError):
    """A given token that ``token_problem`` refuses, at ``position`` in its sentence (the service names it so)."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


def word_key(word: str, match_case: bool = False) -> str:
    """``word`` as it is compared with a token (search, ``/v1/similarity``, the demo): cleaned as a sentence is
    before it is split (``clean_text``), without the spaces around it, and casefolded unless ``match_case``. A
    typed ``cafe`` + U+0301 must equal the ``café`` the tokenizer made from the same text."""
    cleaned = clean_text(word).strip()
    return cleaned if match_case else cleaned.casefold()


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


# sacremoses' own stand-in for a run of dots (``DOTMULTI``, ``DOTDOTMULTI``): it puts a dot back wherever the
# word stands after tokenizing, also where the text held it (``xDOTMULTIy`` -> ``x.y``).
_MOSES_DOTS = "DOTMULTI"


def _stand_in(stem: str, text: str) -> str:
    """A word from ``stem`` and x's that ``text`` does not hold. ``stem``'s first letter stands nowhere else in the
    word, so the word overlaps no copy of itself, and every occurrence after the swap is one of ours."""
    while stem in text:
        stem += "x"
    return stem


def english_tokenize(text: str) -> list[str]:
    """``_english_tokenize`` with the words sacremoses reads as its dot stand-ins swapped out around it."""
    if _MOSES_DOTS not in text:
        return _english_tokenize(text)
    stand_in = _stand_in("QELMODOTS", text)
    tokens = _english_tokenize(text.replace(_MOSES_DOTS, stand_in))
    return [token.replace(stand_in, _MOSES_DOTS) for token in tokens]


def _english_tokenize(text: str) -> list[str]:
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
    stand_in = _stand_in("elmoclitic", text)  # only ours are put back
    marked = " ".join(stand_in if _CLITIC.fullmatch(chunk) else chunk for chunk in chunks)
    put_back = iter(clitics)
    return [next(put_back) if token == stand_in else token for token in _moses().tokenize(marked, escape=False)]


@cache
def _jieba() -> Any:
    """A jieba tokenizer of this package's own, with jieba's default dictionary and settings (HMM on), as the
    shipped zh models' text was cut: jieba's module-level functions share one tokenizer with the whole process, so
    a caller's ``jieba.add_word`` or ``load_userdict`` for other work changed how this package split text. Not
    reached: ``jieba.del_word`` (and ``add_word`` with frequency 0), which also add the word to the HMM's set of
    words it must split, one set for every jieba tokenizer of the process."""
    import jieba

    jieba.setLogLevel(60)  # its dictionary-loading chatter goes to stderr otherwise
    return jieba.Tokenizer()


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
