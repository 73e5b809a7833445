"""How search matches a word to the corpus's tokens: as the model read them.

Every line is cleaned (``elmo.tokenizers.clean_text``: control characters as spaces, invisible formatting
deleted, composed to NFC) before it is split, so a token never holds a soft hyphen or a combining accent of its
own. A word typed beside a sentence (``neighbors``' ``word``, ``senses``' word, ``--words-only`` entries) is
cleaned the same way, or ``cafe`` + U+0301 would never equal the ``café`` that the corpus's tokens hold.
"""

from elmo.tokenizers import clean_text


def word_key(word: str) -> str:
    """``word`` as search compares it with a token: cleaned as text is before splitting, without the spaces
    around it, and casefolded (matches ignore case)."""
    return clean_text(word).strip().casefold()
