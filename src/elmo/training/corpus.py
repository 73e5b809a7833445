"""Streaming corpus: text files (or globs of shards), one sentence a line, read a line at a time.

The corpus is never held in memory. Each of the ``n_rows`` rows of the global batch reads its own
contiguous share of the text: the shards of an epoch, in an order shuffled per epoch, are seen as one
byte range cut into ``n_rows`` equal parts, and a line belongs to the row whose part holds its first
byte. So every line of an epoch goes to exactly one row, a row (and with it a rank that owns some rows)
reads only its share, and the global batch does not depend on how many processes share it.

A row's position is ``(epoch, byte offset, sentence being fed, cursor)``: small, JSON-able, exact.
"""

import glob
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from elmo.characters import BOS_TOKEN, EOS_TOKEN
from elmo.files import NotUtf8Error, utf8_blocks
from elmo.tokenizers import clean_text, get_tokenizer


class CorpusError(ValueError):
    """A corpus that cannot be read or holds no text."""


def _corpus_file(name: str, matched: str = "") -> Path:
    """``name`` as a corpus file; CorpusError saying what it is when it is not a regular file (``matched``: the glob
    pattern that named it, for the message)."""
    path = Path(name)
    if path.is_dir():
        raise CorpusError(f"{name}{matched} is a directory; expected a text file, one sentence a line (give its files, "
                          f"e.g. '{path / '*.txt'}')")
    if path.exists() and not path.is_file():
        raise CorpusError(f"{name}{matched} is not a regular file (a pipe, as <(...) gives?), and a corpus is read "
                          "more than once: write it to a file first")
    if not path.is_file():
        raise CorpusError(f"{name}: no such corpus file")
    return path


def check_utf8_text(path: Path) -> None:
    """CorpusError naming ``path``, the byte offset and the line of the first NUL byte (a binary or UTF-16 file) or
    byte that is not UTF-8 (Latin-1, say; ``elmo.files.NotUtf8Error``'s message): read as text, such a file would
    train on or be scored as replacement characters without a word said. Streams in blocks, so a corpus of
    gigabytes needs no memory."""
    try:
        for _ in utf8_blocks(path, refuse_nul=True):
            pass
    except NotUtf8Error as error:
        raise CorpusError(str(error)) from error


def matched_files(patterns: Sequence[str]) -> list[Path]:
    """The files that paths or glob patterns name, in order, each once (a name that exists is that file, whatever
    characters it holds); CorpusError for a pattern that matches nothing or a name that is not a regular file."""
    if not patterns:
        raise CorpusError("no corpus files given")
    paths: list[Path] = []
    for pattern in patterns:
        # A name that exists is that file, even where it holds a glob character (`notes[1].txt`)
        if glob.has_magic(pattern) and not Path(pattern).exists():
            matches = sorted(glob.glob(pattern))
            if not matches:
                raise CorpusError(f"corpus pattern {pattern!r} matches no file")
            paths.extend(_corpus_file(match, f" (matched by {pattern!r})") for match in matches)
        else:
            paths.append(_corpus_file(pattern))
    # A file that two patterns name is read once (twice, its words counted double and read twice a pass)
    first: dict[Path, Path] = {}
    for path in paths:
        first.setdefault(path.resolve(), path)
    return list(first.values())


class Corpus:
    """Files named by paths or glob patterns (a name that exists is that file, whatever characters it holds),
    tokenized line by line with a named tokenizer. Opening one refuses, before any work, a name that is not a
    regular file and, with ``check_utf8`` (off only for a resumed run: one begun before the check read such bytes as
    U+FFFD and goes on as it began), a file that is not UTF-8 text (``check_utf8_text``)."""

    def __init__(self, patterns: Sequence[str], tokenizer: str = "whitespace", check_utf8: bool = True) -> None:
        self.paths = matched_files(patterns)
        for path in self.paths if check_utf8 else []:
            check_utf8_text(path)
        self.sizes = [os.path.getsize(path) for path in self.paths]
        self.tokenizer_name = tokenizer
        self.tokenize = get_tokenizer(tokenizer)
        if not any(True for _ in self.sentences()):
            raise CorpusError(f"the corpus ({', '.join(map(str, self.paths))}) holds no tokens")

    @property
    def n_bytes(self) -> int:
        return sum(self.sizes)

    def sentences(self) -> Iterator[list[str]]:
        """Every non-empty sentence, files in the order given."""
        for path in self.paths:
            with path.open("rb") as handle:
                for line in handle:
                    yield from self.line_sentences(line)

    def line_sentences(self, line: bytes) -> list[list[str]]:
        r"""The tokens of each non-empty sentence of a line read up to ``\n``, as the embedder reads text: a lone
        ``\r`` ends a sentence too (classic Mac OS line ends, ``elmo.files.utf8_universal_lines``), and each is
        cleaned (``clean_text``) and tokenized. The files were checked to be UTF-8 when the corpus was opened; a byte
        changed since becomes U+FFFD rather than stopping a run mid-way."""
        text = line.decode("utf-8", errors="replace").removesuffix("\n").removesuffix("\r")
        return [tokens for part in text.split("\r") if (tokens := self.tokenize(clean_text(part)))]

    def count_tokens(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for tokens in self.sentences():
            counts.update(tokens)
        return counts

    def file_order(self, epoch: int, seed: int) -> list[int]:
        """The shards of ``epoch`` in a shuffled order that depends only on ``(seed, epoch)``."""
        if len(self.paths) == 1:
            return [0]
        return np.random.default_rng([seed, epoch]).permutation(len(self.paths)).tolist()


class OpenFiles:
    """One read handle per corpus file, shared by every row of a batch: a handle per row and file would need
    rows x shards descriptors, past the usual limit of 1,024 open files. A row seeks before it reads
    wherever the handle stands elsewhere."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._handles: dict[int, BinaryIO] = {}

    def get(self, file_index: int) -> BinaryIO:
        if file_index not in self._handles:
            self._handles[file_index] = self.corpus.paths[file_index].open("rb")
        return self._handles[file_index]

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()


# Passes in a row without a sentence before a corpus of several shards counts as too small: its share may fall
# inside one long line in one shard order and not in the next, so only a share that never holds text is refused.
_EMPTY_PASSES_ALLOWED = 100


@dataclass
class RowPosition:
    """Where one row of the batch stands: the next line to read, and the sentence it is feeding.

    ``offset`` is a byte offset into the epoch's shards laid end to end in ``Corpus.file_order``;
    ``wrapped``: the row has read its pass from where the pass starts to its share's end and now reads the share's
    opening, up to where the pass started; ``cursor`` counts the tokens of ``<S> sentence </S>`` already fed as
    inputs.
    """

    epoch: int
    offset: int
    sentence: list[str] = field(default_factory=list)
    cursor: int = 0
    wrapped: bool = False

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "RowPosition":
        return cls(int(data["epoch"]), int(data["offset"]), list(data["sentence"]), int(data["cursor"]),
                   bool(data.get("wrapped", False)))  # absent: saved before 2026-12-07, when no pass wrapped


@dataclass
class RowTokens:
    """Up to ``n`` steps of one row: the inputs and targets of both directions, as token strings."""

    forward_inputs: list[str]
    forward_targets: list[str]
    backward_inputs: list[str]
    backward_targets: list[str]


class RowReader:
    """The sentence stream of one row, packed back to back as bilm-tf packs it.

    Forward, a sentence is ``<S> w1 .. wn </S>``; backward, ``</S> wn .. w1 <S>``. A row feeds each
    token but the last as an input and each token but the first as a target, so ``</S>`` (forward) is
    only ever a target and the next sentence starts with ``<S>``. Both directions read the same
    sentences in the same order, so their rows stay aligned.
    """

    def __init__(self, corpus: Corpus, files: OpenFiles, row: int, n_rows: int, seed: int, max_epochs: int | None,
                 position: RowPosition | None = None, pass_start_fraction: float = 0.0) -> None:
        self.corpus = corpus
        self.files = files
        self.row = row
        self.n_rows = n_rows
        self.seed = seed
        self.max_epochs = max_epochs
        self._order_epoch = -1
        self._bases: list[int] = []
        self._order: list[int] = []
        self.pass_start_fraction = pass_start_fraction
        self._pass_start_epoch, self._pass_start = -1, 0
        self.position = position if position is not None else RowPosition(0, self._pass_start_of(0))
        self._text_this_pass = bool(self.position.sentence)
        self._passes_without_text = 0
        if position is not None and not self._at_line_start(position):
            raise CorpusError(f"row {row} was saved at byte {position.offset:,} of pass {position.epoch}, which is not "
                              "the start of a line of the text: the text changed since (the same size, other "
                              "bytes), and resuming would read from the wrong places")

    def _at_line_start(self, position: RowPosition) -> bool:
        """Whether ``position`` stands where a line of the text starts, as every saved position does."""
        if position.offset >= self.corpus.n_bytes:
            return position.offset == self.corpus.n_bytes
        file_index, local = self._locate(position.epoch, position.offset)
        if local == 0:
            return True
        handle = self.files.get(file_index)
        handle.seek(local - 1)
        around = handle.read(2)  # the byte before it ends a line: \n, or a \r that no \n follows
        return around[:1] == b"\n" or (around[:1] == b"\r" and around[1:2] != b"\n")

    def take(self, n_steps: int) -> RowTokens:
        """The next ``n_steps`` steps, fewer only when the last epoch has run out."""
        tokens = RowTokens([], [], [], [])
        position = self.position
        while len(tokens.forward_inputs) < n_steps:
            if not position.sentence or position.cursor >= len(position.sentence) + 1:
                sentence = self._next_sentence()
                if sentence is None:
                    break
                position.sentence, position.cursor = sentence, 0
            forward = [BOS_TOKEN, *position.sentence, EOS_TOKEN]
            backward = [EOS_TOKEN, *reversed(position.sentence), BOS_TOKEN]
            start = position.cursor
            count = min(len(forward) - 1 - start, n_steps - len(tokens.forward_inputs))
            tokens.forward_inputs += forward[start : start + count]
            tokens.forward_targets += forward[start + 1 : start + 1 + count]
            tokens.backward_inputs += backward[start : start + count]
            tokens.backward_targets += backward[start + 1 : start + 1 + count]
            position.cursor += count
        return tokens

    def _next_sentence(self) -> list[str] | None:
        position = self.position
        while True:
            if self.max_epochs is not None and position.epoch >= self.max_epochs:
                return None
            if not position.wrapped and position.offset >= self._segment_end():
                position.wrapped, position.offset = True, self._segment_start(position.epoch)
            if position.wrapped and position.offset >= self._pass_start_of(position.epoch):
                self._passes_without_text = 0 if self._text_this_pass else self._passes_without_text + 1
                self._text_this_pass = False
                allowed = 1 if len(self.corpus.paths) == 1 else _EMPTY_PASSES_ALLOWED
                if self._passes_without_text >= allowed and self.max_epochs is None:
                    raise CorpusError(
                        f"the corpus is too small for {self.n_rows} rows: row {self.row}'s share of it (1/"
                        f"{self.n_rows} of {self.corpus.n_bytes:,} bytes) holds no sentence start, as it lies "
                        "inside a longer line; use a smaller batch, more text, or shorter lines"
                    )
                position.epoch += 1
                position.wrapped, position.offset = False, self._pass_start_of(position.epoch)
                continue
            line = self._read_line(position.epoch, position.offset)
            position.offset += len(line)
            sentences = self.corpus.line_sentences(line)  # one at most: the line ends at its first line end
            if sentences:
                self._text_this_pass = True
                return sentences[0]

    def _layout(self, epoch: int) -> None:
        if epoch != self._order_epoch:
            self._order = self.corpus.file_order(epoch, self.seed)
            self._bases = np.concatenate([[0], np.cumsum([self.corpus.sizes[k] for k in self._order])]).tolist()
            self._order_epoch = epoch

    def _locate(self, epoch: int, offset: int) -> tuple[int, int]:
        """Global offset -> (file index, offset in that file)."""
        self._layout(epoch)
        slot = int(np.searchsorted(self._bases, offset, side="right")) - 1
        slot = min(slot, len(self._order) - 1)
        return self._order[slot], offset - self._bases[slot]

    def _read_line(self, epoch: int, offset: int) -> bytes:
        """The line that starts at ``offset``, its line end included: ``\\n``, ``\\r\\n`` or a lone ``\\r``."""
        file_index, local = self._locate(epoch, offset)
        return _read_line_at(self.files.get(file_index), local)

    def _segment_end(self) -> int:
        return (self.row + 1) * self.corpus.n_bytes // self.n_rows

    def _segment_start(self, epoch: int) -> int:
        """The first line start at or after this row's share of the epoch's bytes."""
        return self._line_start_from(epoch, self.row * self.corpus.n_bytes // self.n_rows)

    def _pass_start_of(self, epoch: int) -> int:
        """Where this row starts reading a pass: the first line start at or after ``pass_start_fraction`` of its share
        of the pass's bytes, or the share's start where no line starts in the rest of the share. The row reads from
        there to the share's end, then the share's opening up to there: every pass reads the whole share."""
        if epoch != self._pass_start_epoch:
            share_start = self.row * self.corpus.n_bytes // self.n_rows
            start = self._line_start_from(
                epoch, share_start + int(self.pass_start_fraction * (self._segment_end() - share_start)))
            self._pass_start_epoch = epoch
            self._pass_start = start if start < self._segment_end() else self._segment_start(epoch)
        return self._pass_start

    def _line_start_from(self, epoch: int, start: int) -> int:
        """The first line start at or after byte ``start`` of the epoch's bytes."""
        if start == 0:
            return 0
        file_index, local = self._locate(epoch, start)
        if local == 0:
            return start
        line = _read_line_at(self.files.get(file_index), local - 1)  # to the end of the line holding byte local-1
        return start - 1 + len(line)


def pass_start_fraction(seed: int) -> float:
    """Where in its share of the text every row starts each pass, as a fraction of the share drawn from ``seed``: a
    run continued from another (``--init-from``) with another seed reads other text first, rather than the same
    opening stretch of each share again. A row reads from there to its share's end, then the share's opening, so
    that each pass reads the whole share (with shards, whose order changes every pass, each in its pass's order)."""
    return float(np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_PASS_START_STREAM,))).random())


_PASS_START_STREAM = 1  # a spawn key: numpy keeps the draw apart from file_order's ([seed, epoch], no spawn key)


def _read_line_at(handle: BinaryIO, offset: int) -> bytes:
    r"""The line of ``handle`` that starts at byte ``offset``, up to and including its end: ``\n``, ``\r\n``, or a
    lone ``\r`` (classic Mac OS), as ``elmo.files.utf8_universal_lines`` ends lines for the embedder; the handle is
    left just after it. Read in blocks that double from ``_FIRST_BLOCK`` bytes: a file of lone ``\r`` has no
    ``\n`` to stop ``readline`` before its end (reading it whole for every line took hours for 100 MB), and a
    line costs about its own length."""
    if handle.tell() != offset:
        handle.seek(offset)
    blocks: list[bytes] = []
    size = _FIRST_BLOCK
    while True:
        block = handle.readline(size)
        end = _lone_carriage_return(block, handle)
        if end != -1:
            blocks.append(block[: end + 1])
            line = b"".join(blocks)
            handle.seek(offset + len(line))
            return line
        blocks.append(block)
        if len(block) < size or block.endswith(b"\n"):
            return b"".join(blocks)
        size *= 2


_FIRST_BLOCK = 512  # bytes: most lines of text are shorter


def _lone_carriage_return(block: bytes, handle: BinaryIO) -> int:
    """Where ``block`` (just read from ``handle``) holds its first ``\\r`` that no ``\\n`` follows, or -1; a
    ``\\r`` that ends the block is judged by the file's next byte, the handle left where it was."""
    position = block.find(b"\r")
    while position != -1:
        following = block[position + 1 : position + 2]
        if not following:
            following = handle.read(1)
            handle.seek(-len(following), os.SEEK_CUR)
        if following != b"\n":
            return position
        position = block.find(b"\r", position + 1)
    return -1
