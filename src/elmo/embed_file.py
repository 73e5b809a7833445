"""A text file (one sentence per line) -> an HDF5 file of vectors, in AllenNLP's ``elmo`` command layout.

One dataset per input line, named by its 0-based line number, plus ``sentence_to_index``: a one-element
string dataset holding JSON ``{sentence: "line number"}``. So existing readers of AllenNLP's output work.

The output is written to ``OUTPUT.partial`` and renamed when complete, so a file at OUTPUT is always
whole. The partial file records how many lines are done (``lines_done``, updated after each flushed
chunk), and ``resume=True`` continues from there when the run's settings match.
"""

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

from elmo.embedder import Embedder, Layers

log = logging.getLogger(__name__)

# C0/C1 control characters other than tab; they cannot be part of a meaningful token.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass
class EmbedReport:
    lines: int = 0
    tokens: int = 0
    resumed_from: int = 0
    warnings: list[str] = field(default_factory=list)


def read_lines(path: Path, report: EmbedReport) -> Iterator[str]:
    """Each line as text: undecodable bytes replaced, control characters dropped, each fix reported."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle):
            raw = raw.rstrip(b"\r\n")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                line = raw.decode("utf-8", errors="replace")
                report.warnings.append(f"line {number}: not valid UTF-8 ({error.reason} at byte {error.start}); "
                                       "undecodable bytes replaced by U+FFFD")
            if _CONTROL.search(line):
                line = _CONTROL.sub(" ", line)
                report.warnings.append(f"line {number}: control characters replaced by spaces")
            if not line.strip():
                report.warnings.append(f"line {number}: empty; its dataset has 0 tokens")
            yield line


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
    if not input_path.is_file():
        raise FileNotFoundError(f"{input_path}: no such input file")
    partial = output_path.with_name(output_path.name + ".partial")
    settings = json.dumps({"input": str(input_path.resolve()), "size": input_path.stat().st_size,
                           "layers": layers if isinstance(layers, str) else list(layers),
                           "tokenizer": embedder.tokenizer_name, "model": repr(embedder.bilm.config)})
    report = EmbedReport()
    mode = "a" if resume and partial.exists() else "w"
    with h5py.File(partial, mode) as out:
        if mode == "a":
            if out.attrs.get("settings") != settings:
                raise ValueError(f"{partial} was made with other settings or input; run without --resume")
            report.resumed_from = int(out.attrs["lines_done"])
            for name in list(out):  # lines written after the last recorded flush may be incomplete
                if name.isdigit() and int(name) >= report.resumed_from:
                    del out[name]
        out.attrs["settings"] = settings
        out.attrs["lines_done"] = report.resumed_from
        with input_path.open("rb") as handle:
            report.lines = sum(1 for _ in handle)
        lines = read_lines(input_path, report)  # streamed: only one chunk of text and vectors is held at a time
        done = sum(1 for _ in itertools.islice(lines, report.resumed_from))
        bar = tqdm(total=report.lines, initial=done, unit=" sentences", disable=not progress)
        chunk = batch_size * embedder.bucket_batches
        while texts := list(itertools.islice(lines, chunk)):
            for offset, vectors in enumerate(embedder.iter_embed(texts, layers, batch_size)):
                out.create_dataset(str(done + offset), data=vectors)
                report.tokens += vectors.shape[-2]
            done += len(texts)
            out.attrs["lines_done"] = done
            out.flush()
            bar.update(len(texts))
            bar.set_postfix(tokens_per_s=f"{report.tokens / max(bar.format_dict['elapsed'], 1e-9):.0f}")
        bar.close()
        # The layout's index of every sentence is the one part that grows with the input (text, not vectors).
        sentence_to_index = {line: str(number) for number, line in enumerate(read_lines(input_path, EmbedReport()))}
        if "sentence_to_index" in out:
            del out["sentence_to_index"]
        out.create_dataset("sentence_to_index", data=[json.dumps(sentence_to_index)],
                           dtype=h5py.string_dtype())
        del out.attrs["lines_done"]
    os.replace(partial, output_path)
    for warning in report.warnings:
        log.warning(warning)
    return report
