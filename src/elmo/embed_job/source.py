"""The input of ``elmo embed``: a UTF-8 text file of one sentence a line, or JSON lines, or standard input.

A text file is checked in one read before any work: it must exist, be non-empty, hold no NUL byte (a binary
or UTF-16 file) and be UTF-8 (``elmo.files.utf8_lines``, whose message names the byte and the line, counting from
1), and ``elmo embed``'s input must hold more than blank lines. JSON lines (``text_field``) are parsed in the same
read, and every bad line is reported by number at once (counting from 0, as the outputs name lines). The read
also hashes the bytes, so a resumed run can check that its input is the one it began with.
Standard input is copied to a temporary file first, so it can be hashed, checked and read again.
"""

import hashlib
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from elmo.embed_job.shards import WHOLE, Shard
from elmo.files import utf8_universal_lines
from elmo.tokenizers import BYTE_ORDER_MARK, CONTROL_CHARACTERS, clean_text, clean_token, token_problem

# C0/C1 control characters other than tab; they cannot be part of a meaningful token. A text file's NUL bytes are
# refused before this applies; JSON can still spell one (``\u0000``), which HDF5's strings cannot hold.
_BAD_LINES_SHOWN = 10
STDIN = "standard input"  # the name of input "-" in messages and recorded settings


@dataclass
class EmbedReport:
    lines: int = 0
    tokens: int = 0
    resumed_from: int = 0
    warnings: list[str] = field(default_factory=list)
    already_whole: bool = False  # a part of a directory of parts that a restarted job found whole and skipped


@dataclass(frozen=True)
class TextFile:
    """What one read of a text file found (see ``check_text_file``)."""

    path: Path
    lines: int
    sha256: str  # of the file's bytes: a resumed run checks that its input is the one the partial file began
    has_text: bool  # some line holds more than white space


@dataclass(frozen=True)
class Source:
    """Where the sentences come from. ``name`` is what messages and the recorded settings call it
    (``STDIN`` for ``-``); with ``text_field`` each line is a JSON object whose field holds the sentence, as text
    for the model's tokenizer or as a list of tokens, and ``id_field`` names a field kept with its vectors."""

    path: Path
    name: str
    text_field: str | None = None
    id_field: str | None = None


@dataclass(frozen=True)
class SourceLine:
    index: int  # 0-based line number in the input
    sentence: str  # the text (control characters replaced), or a JSON token list joined by spaces
    tokens: list[str] | None  # tokens given in JSON; None: the model's tokenizer splits the sentence
    id: str | None  # the id field's value as text


def check_text_file(path: str | Path, what: str = "input file", name: str | None = None,
                    stdin_usage: str | None = None) -> TextFile:
    """Read ``path`` once and refuse what is not text to embed: a missing file, a directory, a pipe or another
    file that is not a regular one (it would be read more than once), an empty file, a NUL byte (a binary or
    UTF-16 file) or bytes that are not UTF-8. Raises FileNotFoundError or ValueError naming the file (as
    ``name``, if given) and, for bad bytes, the byte offset and line. ``stdin_usage``: the command line that
    reads standard input instead, for the refusal of a pipe to name, where the command has one."""
    path = Path(path)
    name = name or str(path)
    if path.is_dir():
        raise ValueError(f"{name} is a directory; expected a text {what}, one sentence a line")
    if path.exists() and not path.is_file():
        instead = f"give - to read standard input (... | {stdin_usage}), or " if stdin_usage else ""
        raise ValueError(f"{name} is not a regular file (a pipe, as <(...) gives?), and the {what} is read more than "
                         f"once: {instead}write it to a file first")
    if not path.is_file():
        raise FileNotFoundError(f"{name}: no such {what}")
    digest = hashlib.sha256()
    lines = 0
    has_text = False
    for line in _decoded_lines(path, name, digest):
        has_text = has_text or bool(clean_text(line).strip())  # a zero-width space alone is no text
        lines += 1
    # A file of a byte-order mark alone holds no line either, but is not empty: it is refused as blank where blank
    # inputs are.
    if lines == 0 and path.stat().st_size == 0:
        raise ValueError(f"{name} is empty; expected a text {what}, one sentence a line")
    return TextFile(path, lines, digest.hexdigest(), has_text)


def check_input(source: Source) -> TextFile:
    """``check_text_file`` of ``elmo embed``'s input, whose refusal of a pipe points to ``-``; an input of only
    blank lines is refused too (as ``elmo index`` refuses such a corpus): it would give only empty entries. Blank
    lines among text still get theirs."""
    text = check_text_file(source.path, name=source.name, stdin_usage="elmo embed - OUTPUT")
    if not text.has_text:
        raise ValueError(f"{source.name} holds only blank lines; expected text to embed, one sentence a line")
    return text


def _decoded_lines(path: Path, name: str, digest: "hashlib._Hash | None" = None) -> Iterator[str]:
    r"""Each line of ``path`` (ended by ``\n``, ``\r\n`` or a lone ``\r``, as Python's text mode, AllenNLP's
    ``elmo`` command and ``elmo.allennlp`` read them) as text without its line break or a byte-order mark (which
    Windows editors write at a file's start, so files joined together hold one at a line's start; it would stick
    to the first token); NotUtf8Error, a ValueError, at the first NUL or non-UTF-8 byte. Streams: a block of the
    file (``elmo.files.TEXT_BLOCK``) and its lines are held at a time."""
    for line in utf8_universal_lines(path, name, refuse_nul=True, digest=digest):
        yield line.removeprefix(BYTE_ORDER_MARK)


def read_lines(path: Path, report: EmbedReport, name: str | None = None) -> Iterator[str]:
    """Each line as text, control characters replaced by spaces and each fix reported; bytes that are not
    UTF-8 text raise ValueError (``check_text_file`` finds them before any work)."""
    for number, line in enumerate(_decoded_lines(path, name or str(path))):
        yield _cleaned(number, line, report)


def _cleaned(number: int, line: str, report: EmbedReport) -> str:
    if CONTROL_CHARACTERS.search(line):
        line = CONTROL_CHARACTERS.sub(" ", line)
        report.warnings.append(f"line {number}: control characters replaced by spaces")
    if not clean_text(line).strip():  # blank, or only characters the tokenizers drop (a zero-width space)
        report.warnings.append(f"line {number}: empty; it has 0 tokens")
    return line


def check_source(source: Source, sentence_keys: bool = False) -> TextFile:
    """``check_input``, then every line parsed as it will be read; with ``sentence_keys`` each sentence
    must also be usable as an HDF5 dataset name, once. Raises ValueError listing the bad lines by number."""
    text = check_input(source)
    if source.text_field is None and not sentence_keys:
        return text
    problems: list[str] = []
    first_seen: dict[str, int] = {}
    for number, line in enumerate(_decoded_lines(source.path, source.name)):
        try:
            parsed = _parse(source, number, line, EmbedReport())
        except ValueError as error:
            problems.append(str(error))
            continue
        if sentence_keys:
            key = sentence_key(parsed.sentence)
            problem = _key_problem(key, first_seen.setdefault(key, number), number)
            if problem:
                problems.append(f"line {number}: {problem}")
    if problems:
        more = f"; and {len(problems) - _BAD_LINES_SHOWN} more" if len(problems) > _BAD_LINES_SHOWN else ""
        raise ValueError(f"{source.name} has {len(problems)} bad line(s), counting from 0: "
                         f"{'; '.join(problems[:_BAD_LINES_SHOWN])}{more}")
    return text


def sentence_key(sentence: str) -> str:
    """A sentence as AllenNLP's ``elmo`` command keyed it (a dataset's name, ``sentence_to_index``): without the
    white space around it, as it stripped every line."""
    return sentence.strip()


def _key_problem(sentence: str, first: int, number: int) -> str | None:
    """Why ``sentence`` cannot name an HDF5 dataset (``--use-sentence-keys``), or None."""
    if first != number:
        return f"the same sentence as line {first}; sentence keys must be unique (drop --use-sentence-keys)"
    if not sentence.strip():
        return "empty; an empty sentence cannot be a dataset name (drop --use-sentence-keys)"
    if "/" in sentence or sentence == ".":
        return f"{sentence[:40]!r} cannot be an HDF5 dataset name (it holds '/' or is '.')"
    return None


def read_source(source: Source, report: EmbedReport, shard: Shard = WHOLE) -> Iterator[SourceLine]:
    """The shard's lines of the input, in order, with warnings about them in ``report`` (``check_source``
    has refused bad lines before any work)."""
    for number, line in enumerate(_decoded_lines(source.path, source.name)):
        if shard.holds(number):
            yield _parse(source, number, line, report)


def text_sample(source: Source, characters: int = 1 << 16) -> str:
    """About the first ``characters`` characters of the sentences (of JSON lines, their text fields, whatever
    escapes the JSON used), lines that do not parse left out: what the input's language is guessed from."""
    sentences: list[str] = []
    taken = 0
    for number, line in enumerate(_decoded_lines(source.path, source.name)):
        try:
            sentence = _parse(source, number, line, EmbedReport()).sentence
        except ValueError:
            continue
        sentences.append(sentence)
        taken += len(sentence)
        if taken >= characters:
            break
    return "\n".join(sentences)[:characters]


def _parse(source: Source, number: int, line: str, report: EmbedReport) -> SourceLine:
    """Line ``number`` of the input: a text line, or a JSON object's fields. The sentence is cleaned, with
    ``_cleaned``'s warnings in ``report``, for JSON as for text. ValueError naming what is wrong with the line."""
    if source.text_field is None:
        return SourceLine(number, _cleaned(number, line, report), None, None)
    try:
        record = json.loads(line, strict=False)  # a raw control character in a string is read as its escape is
    except json.JSONDecodeError as error:
        raise ValueError(f"line {number}: not JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(record, dict):
        raise ValueError(f"line {number}: a JSON {type(record).__name__}, expected an object")
    text, identifier = record.get(source.text_field), None
    if isinstance(text, list) and all(isinstance(token, str) for token in text):
        for position, token in enumerate(text):
            if problem := token_problem(token):
                raise ValueError(f"line {number}: field {source.text_field!r}: token {position} {problem}; a token "
                                 "must be printable text")
        tokens = [clean_token(token) for token in text]
        sentence = " ".join(tokens)
        if not tokens:
            report.warnings.append(f"line {number}: empty; it has 0 tokens")
    elif isinstance(text, str):
        sentence, tokens = _cleaned(number, text, report), None
    else:
        found = _found(record, source.text_field)
        raise ValueError(f"line {number}: field {source.text_field!r}: {found}; expected text or a list of tokens")
    _refuse_unencodable(number, f"field {source.text_field!r}", sentence)
    if source.id_field is not None:
        identifier = record.get(source.id_field)
        if not isinstance(identifier, str | int) or isinstance(identifier, bool):
            found = _found(record, source.id_field)
            raise ValueError(f"line {number}: id field {source.id_field!r}: {found}; expected text or a whole number")
        if isinstance(identifier, str) and (control := CONTROL_CHARACTERS.search(identifier)):
            raise ValueError(f"line {number}: id field {source.id_field!r} holds the control character "
                             f"U+{ord(control.group()):04X}; ids must be printable text")
        _refuse_unencodable(number, f"id field {source.id_field!r}", str(identifier))
    return SourceLine(number, sentence, tokens, None if identifier is None else str(identifier))


def _found(record: dict, field_name: str) -> str:
    """What a JSON object holds at ``field_name``, for a message saying it is not what was expected."""
    if field_name not in record:
        return "no such field"
    value = record[field_name]
    return "null" if value is None else f"a JSON {type(value).__name__}"


def _refuse_unencodable(number: int, what: str, text: str) -> None:
    """ValueError for text that UTF-8 cannot hold: a lone surrogate, which JSON can escape (``"\\ud800"``) and
    every writer would fail on mid-run."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"line {number}: {what} holds the lone surrogate U+{ord(text[error.start]):04X} (a JSON "
                         "escape of half a character); expected text that UTF-8 can hold") from None


@contextmanager
def stdin_as_file() -> Iterator[Path]:
    """Standard input copied to a temporary file (removed afterwards): it is read more than once."""
    with tempfile.NamedTemporaryFile(prefix="elmo-embed-stdin-", suffix=".txt") as handle:
        shutil.copyfileobj(sys.stdin.buffer, handle)
        handle.flush()
        yield Path(handle.name)
