"""What ``elmo serve`` is told: which models, under which names, and the limits that keep it standing.

A frozen dataclass, so the app, the batchers and the tests read one validated set of numbers.
"""

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from elmo.files import NotUtf8Error, utf8_lines
from elmo.windows import MAX_WINDOW_TOKENS, check_windows

LOOPBACK_NAMES = ("localhost",)


def _split_name(value: str, flag: str, expected: str) -> tuple[str, str] | None:
    """``NAME=THING`` as ``(NAME, THING)``; None for a bare ``THING``; ValueError for ``=THING`` or ``NAME=``.

    A path may hold '=' (``/data/lr=0.1/model``), so ``value`` is a bare path when it exists (an existing
    directory is never misread as a name) or when a path separator comes before its first '=' (a NAME holds
    none), so a mistyped path is reported whole."""
    name, separator, thing = value.partition("=")
    if not separator or Path(value).exists() or "/" in name or os.sep in name:
        return None
    if not name or not thing:
        raise ValueError(f"{flag} {value!r}: expected {expected}")
    return name, thing


@dataclass(frozen=True)
class ModelSpec:
    """A served model: ``name`` is what requests say in ``"model"``; ``source`` a directory or shipped name."""

    name: str
    source: str

    @classmethod
    def parse(cls, value: str) -> "ModelSpec":
        """``NAME=DIR`` names it; a bare directory is served under its directory name, a shipped name as itself."""
        named = _split_name(value, "--model", "NAME=DIR, a directory or a shipped model name")
        if named:
            return cls(*named)
        return cls(Path(value).resolve().name if Path(value).is_dir() else value, value)  # "." names its folder


@dataclass(frozen=True)
class IndexSpec:
    """A served search index: ``name`` is what requests say in ``"index"``; ``directory`` is from ``elmo index``."""

    name: str
    directory: Path

    @classmethod
    def parse(cls, value: str) -> "IndexSpec":
        """``NAME=DIR`` names it; a bare directory is served under its directory name."""
        named = _split_name(value, "--index", "NAME=DIR or an index directory")
        return cls(named[0], Path(named[1])) if named else cls(Path(value).resolve().name, Path(value))


@dataclass(frozen=True)
class ServeConfig:
    """Limits, timeouts and batching knobs; the defaults suit a CPU replica serving short sentences.

    Together they bound the memory a replica can hold (docs/serving.md, "Limits and timeouts"): request bodies
    by ``limit_concurrency * max_body_bytes``, and per model the vectors and response bytes of at most
    ``max_queue_tokens`` tokens, counted from a request's admission to the last byte of its answer.
    """

    max_body_bytes: int = 1 << 20
    max_sentences: int = 128
    max_sentence_tokens: int = MAX_WINDOW_TOKENS  # the embedder's window: longer sentences are windowed, or refused
    long_sentences: Literal["window", "refuse"] = "window"
    window_context: int | None = None  # default: a quarter of max_sentence_tokens
    max_request_tokens: int = 4096  # all sentences of one request together, a windowed long sentence included
    max_batch_tokens: int = 4096
    max_wait_ms: float = 5.0
    max_queue: int = 256  # requests admitted and not yet answered, per model
    max_queue_tokens: int = 16384  # tokens admitted and not yet answered (to the last byte sent), per model
    request_timeout_s: float = 30.0
    retry_after_s: int = 1
    batch_size: int = 32  # rows per biLM forward pass inside a merged batch
    limit_concurrency: int = 128  # open connections (uvicorn's limit_concurrency)
    header_timeout_s: float = 10.0  # from connecting (or the previous answer) to a request's complete head
    body_timeout_s: float = 30.0  # from the request head to the body's last byte
    write_timeout_s: float = 30.0  # a client that accepts no byte of its answer for this long is cut off
    keep_alive_s: int = 5  # an idle keep-alive connection is closed after this (uvicorn's timeout_keep_alive)
    drain_bytes: int = 16 << 20  # an oversized body up to this size is read and dropped before the 413
    api_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for field in ("max_body_bytes", "max_sentences", "max_sentence_tokens", "max_request_tokens",
                      "max_batch_tokens", "max_queue", "max_queue_tokens", "batch_size", "retry_after_s",
                      "limit_concurrency", "keep_alive_s"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field} is {getattr(self, field)}; expected a positive number")
        for field in ("request_timeout_s", "header_timeout_s", "body_timeout_s", "write_timeout_s"):
            if not 0 < getattr(self, field) < float("inf"):
                raise ValueError(f"{field} is {getattr(self, field)}; expected a positive number of seconds")
        if not 0 <= self.max_wait_ms < float("inf"):
            raise ValueError(f"max_wait_ms is {self.max_wait_ms}; expected a number >= 0")
        if self.drain_bytes < 0:
            raise ValueError(f"drain_bytes is {self.drain_bytes}; expected a number >= 0")
        # the settings two fields decide are named with elmo serve's flags too: a user of the command sees these
        if self.max_queue_tokens < self.max_request_tokens:
            raise ValueError(f"max_queue_tokens (--max-queue-tokens, {self.max_queue_tokens}) must be at least "
                             f"max_request_tokens (--max-request-tokens, {self.max_request_tokens}), or the largest "
                             "request could never be admitted")
        if self.long_sentences not in ("window", "refuse"):
            raise ValueError(f"long_sentences is {self.long_sentences!r}; expected 'window' or 'refuse'")
        check_windows(self.max_sentence_tokens, self.context_tokens,
                      ("max_sentence_tokens (--max-sentence-tokens)", "window_context (--window-context)"))

    @property
    def context_tokens(self) -> int:
        return self.max_sentence_tokens // 4 if self.window_context is None else self.window_context


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the service on this machine (so no key is needed by default)."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_api_keys(path: str | Path) -> tuple[str, ...]:
    """One key per line; blank lines and ``#`` comments are skipped, and so is a byte-order mark at the start (it
    would be part of the first key). An empty file is refused, not ignored, and so are a directory, a file that
    cannot be read and one that is not UTF-8 text (``elmo.files.NotUtf8Error``'s message), each naming
    ``--api-key-file`` (the OS's and Python's own errors named neither the option nor, for bytes, the file)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"--api-key-file {path} is a directory; expected a file of API keys, one per line")
    try:
        lines = [line.strip() for text in utf8_lines(path) for line in text.splitlines()]
    except FileNotFoundError:
        raise FileNotFoundError(f"--api-key-file {path}: no such file") from None
    except OSError as error:
        raise ValueError(f"--api-key-file {path} cannot be read ({error.strerror})") from None
    except NotUtf8Error as error:
        raise ValueError(f"--api-key-file {error}") from error
    keys = tuple(line for line in lines if line and not line.startswith("#"))
    if not keys:
        raise ValueError(f"{path} holds no API key (expected one key per line)")
    return keys
