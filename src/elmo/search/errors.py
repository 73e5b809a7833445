"""The one error contextual search raises for a request it cannot answer.

It carries a ``code`` (what went wrong, a stable identifier the service sends as its error code) and the
``field`` at fault (the argument's name), so a caller can answer each case differently without repeating
the check that found it: ``elmo serve`` maps it to a response in one exception handler.
"""


class SearchError(ValueError):
    """A query or index request refused: ``code`` is one of the names below, ``field`` the argument at fault.

    A ValueError, so the command line reports it as any bad input (one line, exit 2)."""

    INVALID = "invalid_request"  # an argument out of range or of the wrong form
    WORD_NOT_IN_SENTENCE = "word_not_in_sentence"  # the query word is not a token of the query sentence
    WORD_NOT_INDEXED = "word_not_indexed"  # a same-word search for a word the index does not hold
    TOO_FEW_OCCURRENCES = "too_few_occurrences"  # too few uses of a word to cluster into senses

    def __init__(self, message: str, field: str, code: str = INVALID) -> None:
        super().__init__(message)
        self.code = code
        self.field = field
