"""How a long sentence is cut into overlapping windows (docs/long-inputs.md): the defaults and the one rule, for
the ``Embedder``, ``elmo embed`` and the service. No torch here: the command line reads it for its ``--help``."""

MAX_WINDOW_TOKENS = 512  # a sentence of more tokens is embedded in windows
WINDOW_CONTEXT = 128  # tokens of context each window adds on either side of its core
# The defaults until 2026-12-07: what a search index or task model that records no windows was made with.
EARLIER_DEFAULTS = {"max_window_tokens": 256, "window_context": 64}


def check_windows(max_window_tokens: int, window_context: int,
                  names: tuple[str, str] = ("max_window_tokens", "window_context")) -> None:
    """ValueError unless each window keeps a core of at least one token: ``max_window_tokens`` over twice
    ``window_context``, which is 0 or more; ``names`` are what the caller calls the two."""
    max_name, context_name = names
    if window_context < 0 or max_window_tokens - 2 * window_context < 1:
        raise ValueError(f"{max_name} ({max_window_tokens}) must exceed 2 x {context_name} ({window_context}), "
                         f"and {context_name} be 0 or more")
