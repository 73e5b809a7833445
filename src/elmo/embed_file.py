"""A text file (one sentence per line) -> an HDF5 file of vectors, in AllenNLP's ``elmo`` command layout.

One dataset per input line, named by its 0-based line number, plus ``sentence_to_index``: a one-element
string dataset holding JSON ``{sentence: "line number"}``. So existing readers of AllenNLP's output work.

Everything that can be checked is checked before a file is made: the layers against the model, the output
path, and the input, which must be non-empty UTF-8 text (a NUL byte or a byte sequence that is not UTF-8
is refused, naming the byte; line numbers in messages count from 0, as the datasets are named).

The output is written to ``OUTPUT.partial`` and renamed when complete, so a file at OUTPUT is always
whole. The partial file records the run's settings, with the sha256 of the whole input, and how many lines
are done (``lines_done``: set after each flushed chunk, and to the last whole line when Ctrl-C or SIGTERM
stops the run). ``resume=True`` continues from there when the settings and the input's bytes match,
refuses when they do not, and starts over, saying why, when a killed run left a partial file that HDF5
cannot read or that lacks a line it claims (a kill can land anywhere, also inside HDF5's own writes).
"""

import hashlib
import itertools
import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import h5py
from tqdm import tqdm

from elmo.embedder import Embedder, Layers, layer_weights

log = logging.getLogger(__name__)

# C0/C1 control characters other than tab and NUL (NUL is refused); they cannot be part of a meaningful token.
_CONTROL = re.compile(r"[\x01-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass
class EmbedReport:
    lines: int = 0
    tokens: int = 0
    resumed_from: int = 0
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TextFile:
    """What one read of a text file found (see ``check_text_file``)."""

    path: Path
    lines: int
    sha256: str  # of the file's bytes: a resumed run checks that its input is the one the partial file began
    has_text: bool  # some line holds more than white space


def check_text_file(path: str | Path, what: str = "input file") -> TextFile:
    """Read ``path`` once and refuse what is not text to embed: a missing file, a directory, an empty file,
    a NUL byte (a binary or UTF-16 file) or bytes that are not UTF-8. Raises FileNotFoundError or
    ValueError naming the file and, for bad bytes, the byte offset and line."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a directory; expected a text {what}, one sentence a line")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {what}")
    digest = hashlib.sha256()
    lines = offset = 0
    has_text = False
    with path.open("rb") as handle:
        for raw in handle:
            line = _decode(path, raw, lines, offset)
            has_text = has_text or bool(line.strip())
            digest.update(raw)
            lines += 1
            offset += len(raw)
    if lines == 0:
        raise ValueError(f"{path} is empty; expected a text {what}, one sentence a line")
    return TextFile(path, lines, digest.hexdigest(), has_text)


def _decode(path: Path, raw: bytes, number: int, offset: int) -> str:
    """One line's bytes (``offset`` from the file's start) as text, without its line break."""
    nul = raw.find(b"\0")
    if nul >= 0:
        raise ValueError(f"{path} holds a NUL byte at byte {offset + nul} (line {number}, counting from 0): "
                         "it looks binary or UTF-16; expected UTF-8 text, one sentence a line")
    try:
        return raw.rstrip(b"\r\n").decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 at byte {offset + error.start} (line {number}, counting from 0: "
                         f"{error.reason}); expected UTF-8 text (convert it first, e.g. iconv -t utf-8)") from None


def read_lines(path: Path, report: EmbedReport) -> Iterator[str]:
    """Each line as text, control characters replaced by spaces and each fix reported; bytes that are not
    UTF-8 text raise ValueError (``check_text_file`` finds them before any work)."""
    offset = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle):
            line = _decode(path, raw, number, offset)
            offset += len(raw)
            if _CONTROL.search(line):
                line = _CONTROL.sub(" ", line)
                report.warnings.append(f"line {number}: control characters replaced by spaces")
            if not line.strip():
                report.warnings.append(f"line {number}: empty; its dataset has 0 tokens")
            yield line


def partial_path(output_path: Path) -> Path:
    return output_path.with_name(output_path.name + ".partial")


def check_output_path(output_path: str | Path) -> None:
    """Refuse an output that could not be written, before any work: a directory, a file in a folder that
    does not exist or cannot be written, or a directory in the way of the partial file."""
    output_path = Path(output_path)
    if output_path.is_dir():
        raise ValueError(f"{output_path} is a directory; expected the name of the HDF5 file to write")
    folder = output_path.parent
    if not folder.is_dir():
        if folder.exists():
            raise ValueError(f"{folder} is not a directory; cannot write {output_path.name} in it")
        raise FileNotFoundError(f"{folder}: no such directory to write {output_path.name} in")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{folder} is not writable; cannot write {output_path.name} in it")
    if partial_path(output_path).is_dir():
        raise ValueError(f"{partial_path(output_path)} is a directory in the way of the partial output; remove it")


def embed_file(
    input_path: str | Path,
    output_path: str | Path,
    embedder: Embedder,
    layers: Layers = "all",
    batch_size: int = 32,
    resume: bool = False,
    progress: bool = True,
) -> EmbedReport:
    input_path, output_path = Path(input_path), Path(output_path)
    layer_weights(layers, embedder.n_layers)  # a bad choice fails here, not after a file is made
    if batch_size < 1:
        raise ValueError(f"batch_size is {batch_size}; expected at least 1")
    text = check_text_file(input_path)
    check_output_path(output_path)
    partial = partial_path(output_path)
    settings = {"input": str(input_path.resolve()), "sha256": text.sha256,
                "layers": layers if isinstance(layers, str) else [float(weight) for weight in layers],
                "tokenizer": embedder.tokenizer_name, "model": repr(embedder.bilm.config)}
    report = EmbedReport(lines=text.lines)
    out, report.resumed_from = _open_partial(partial, settings, resume, text.lines)
    try:
        _embed_lines(input_path, out, embedder, layers, batch_size, progress, report)
    finally:
        out.close()
    os.replace(partial, output_path)
    for warning in report.warnings:
        log.warning(warning)
    return report


def _open_partial(partial: Path, settings: dict, resume: bool, total: int) -> tuple[h5py.File, int]:
    """The partial file to continue and how many lines it holds, or a new one and 0."""
    if resume and partial.exists():
        try:
            out = h5py.File(partial, "a")
        except OSError as error:
            log.warning(f"{partial} cannot be read (a run killed as it began leaves such a file: {error}); "
                        "starting over")
        else:
            try:
                done = _lines_to_keep(out, partial, settings, total)
            except BaseException:
                out.close()
                raise
            if done is not None:
                return out, done
            out.close()
    out = h5py.File(partial, "w")
    out.attrs["settings"] = json.dumps(settings)
    out.attrs["lines_done"] = 0
    return out, 0


def _lines_to_keep(out: h5py.File, partial: Path, settings: dict, total: int) -> int | None:
    """How many lines of ``out`` a resumed run keeps, after deleting any written past them; None when the
    file is damaged. Raises ValueError when it was made from another input or with other settings."""
    try:
        recorded = json.loads(out.attrs["settings"])
        done = int(out.attrs["lines_done"])
        names = set(out)
        if not isinstance(recorded, dict):
            raise TypeError(f"settings {recorded!r} are not a JSON object")
    except Exception as error:  # whatever HDF5 reports, the file is of no use
        log.warning(f"{partial} is damaged ({type(error).__name__}: {error}); starting over")
        return None
    if "sha256" not in recorded:
        raise ValueError(f"{partial} was begun by an older version that kept no hash of its input; run without "
                         "--resume to start over")
    differing = [key for key in settings if recorded.get(key) != settings[key]]
    if differing == ["sha256"]:
        raise ValueError(f"{settings['input']} has changed since {partial} was begun (its sha256 differs); "
                         "run without --resume to start over")
    if differing:
        raise ValueError(f"{partial} was made with another {', '.join(differing)}; run without --resume to "
                         "start over")
    if not 0 <= done <= total or not all(str(line) in names for line in range(done)):
        log.warning(f"{partial} claims {done} lines done but lacks some of them; starting over")
        return None
    try:
        for name in names:  # lines written after the last recorded flush may be incomplete
            if not name.isdigit() or int(name) >= done:
                del out[name]
    except Exception as error:  # damage HDF5 finds only as it rewrites the group
        log.warning(f"{partial} is damaged ({type(error).__name__}: {error}); starting over")
        return None
    return done


def _embed_lines(input_path: Path, out: h5py.File, embedder: Embedder, layers: Layers, batch_size: int,
                 progress: bool, report: EmbedReport) -> None:
    """Lines ``report.resumed_from`` onward into ``out``, a chunk at a time, then ``sentence_to_index``."""
    lines = read_lines(input_path, report)  # streamed: only one chunk of text and vectors is held at a time
    written = sum(1 for _ in itertools.islice(lines, report.resumed_from))
    bar = tqdm(total=report.lines, initial=written, unit=" sentences", disable=not progress)
    chunk = batch_size * embedder.bucket_batches
    try:
        while texts := list(itertools.islice(lines, chunk)):
            for vectors in embedder.iter_embed(texts, layers, batch_size):
                out.create_dataset(str(written), data=vectors)
                written += 1  # only after the dataset is whole: an interrupt before this line redoes it
                report.tokens += vectors.shape[-2]
            out.attrs["lines_done"] = written
            out.flush()
            bar.update(len(texts))
            bar.set_postfix(tokens_per_s=f"{report.tokens / max(bar.format_dict['elapsed'], 1e-9):.0f}")
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM under elmo.command_line.interruptible
        out.attrs["lines_done"] = written
        out.flush()
        interrupt.add_note(f"{out.filename} holds the first {written} of {report.lines} lines")
        raise
    finally:
        bar.close()
    # The layout's index of every sentence is the one part that grows with the input (text, not vectors).
    sentence_to_index = {line: str(number) for number, line in enumerate(read_lines(input_path, EmbedReport()))}
    out.create_dataset("sentence_to_index", data=[json.dumps(sentence_to_index)], dtype=h5py.string_dtype())
