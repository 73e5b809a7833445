"""AllenNLP 0.9's ELMo API on this package's biLM, for code written against ``allennlp.modules.elmo`` and
``allennlp.commands.elmo`` (both removed in AllenNLP 1.0): ``batch_to_ids``, ``Elmo`` and ``ElmoEmbedder``.

Arguments, shapes, dtypes and file layout are AllenNLP 0.9's. The numbers are too, with one difference made on
purpose: every sentence starts from a zero LSTM state. AllenNLP carried each batch row's state into the next
batch, so a sentence's vectors depended on what had been embedded before it. ``embed_file`` also cleans the text
it tokenizes as the rest of this package cleans text, which AllenNLP did not (docs/allennlp.md).
"""

import itertools
import json
import logging
import operator
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import SupportsIndex, TextIO, cast

import h5py
import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from elmo.bilm import BiLM
from elmo.characters import MAX_CHARACTERS_PER_TOKEN, batch_to_char_ids
from elmo.embed_job.job import check_output_path
from elmo.embed_job.source import check_text_file
from elmo.embedder import check_flags, checked_batch_size, layer_weights, mix_layers
from elmo.files import atomic_path
from elmo.layer_choice import NAMES, LayerName
from elmo.task_module import Elmo as TaskElmo
from elmo.tokenizers import BYTE_ORDER_MARK, CONTROL_CHARACTERS, clean_text
from elmo.weights import load_bilm

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 64  # AllenNLP's, for embed_sentences and embed_file
OUTPUT_FORMATS = NAMES  # AllenNLP's --all, --top, --average: the layer choices of those names
# Universal newlines, as open() reads a text file by default and AllenNLP's elmo command opened its input: an open
# file whose \r Python has already turned into \n reads as its path does only if a path's \r ends a line too.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINES_SHOWN = 10


def batch_to_ids(batch: Sequence[Sequence[str]]) -> torch.Tensor:
    """AllenNLP's name for ``batch_to_char_ids``: ``(batch, max_tokens, 50)`` int64 ids, padding tokens all 0."""
    return batch_to_char_ids(batch, MAX_CHARACTERS_PER_TOKEN)


def _load(options_file: str | Path, weight_file: str | Path) -> BiLM:
    """AllenNLP fetched URLs through its cache; here both must be local files, so a URL is refused by name."""
    for argument, value in (("options_file", options_file), ("weight_file", weight_file)):
        if str(value).startswith(("http://", "https://", "s3://")):
            raise ValueError(f"{argument} is the URL {value}; this package reads local files only: download it "
                             "and pass the path of the downloaded file")
    return load_bilm(options_file, weight_file)


def _device(cuda_device: SupportsIndex) -> torch.device:
    """AllenNLP's convention: -1 is the CPU, n >= 0 the n-th CUDA GPU. Any whole number is taken (a NumPy
    integer from a config, say), but not a bool, which would pick GPU 0 or 1 by accident."""
    try:
        index = None if isinstance(cuda_device, bool) else operator.index(cuda_device)
    except TypeError:
        index = None
    if index is None or index < -1:
        raise ValueError(f"cuda_device is {cuda_device!r}; expected -1 (the CPU) or the index of a CUDA GPU")
    if index == -1:
        return torch.device("cpu")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if index >= count:
        raise ValueError(f"cuda_device is {index} but this machine has {count} CUDA GPUs; pass -1 for the CPU")
    return torch.device("cuda", index)


class ElmoEmbedder:
    """Sentences (token lists) -> numpy arrays ``(n_layers, T, 2P)``: ``(3, T, 1024)`` for the original model,
    layer 0 the character CNN's token vector twice, layers 1 and 2 ``[forward, backward]`` LSTM outputs.

    ``cuda_device``: -1 for the CPU, else the index of the CUDA GPU to run on.
    """

    def __init__(self, options_file: str | Path, weight_file: str | Path, cuda_device: SupportsIndex = -1) -> None:
        self.device = _device(cuda_device)
        self.bilm = _load(options_file, weight_file).to(self.device)

    @torch.no_grad()
    def batch_to_embeddings(self, batch: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(activations (batch, n_layers, T, 2P), mask (batch, T) int64)`` on the model's device, zeros at
        padding. Tokens are cut to the model's ``max_characters_per_token`` (AllenNLP's models: 50). The activations
        are contiguous, as AllenNLP's ``torch.cat`` made them, so ``view`` works on them as it did."""
        char_ids = batch_to_char_ids(batch, self.bilm.config.char_cnn.max_characters_per_token)
        output, _ = self.bilm(char_ids.to(self.device))
        return output.layers.transpose(0, 1).contiguous(), output.mask.long()

    def embed_sentence(self, sentence: Sequence[str]) -> np.ndarray:
        """One sentence's layers ``(n_layers, T, 2P)`` float32."""
        return self.embed_batch([sentence])[0]

    def embed_batch(self, batch: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Each sentence's layers ``(n_layers, T_i, 2P)``, trimmed to its own length ``T_i``, in input order. Each
        is a copy: a view would keep the whole padded batch alive, its longest sentence's length for every row."""
        activations, mask = self.batch_to_embeddings(batch)
        layer_vectors = activations.cpu().numpy()
        return [layer_vectors[row, :, :length].copy() for row, length in enumerate(mask.sum(dim=1).tolist())]

    def embed_sentences(
        self, sentences: Iterable[Sequence[str]], batch_size: int = DEFAULT_BATCH_SIZE
    ) -> Iterator[np.ndarray]:
        """``embed_batch`` over ``batch_size`` sentences at a time, yielding one array per sentence."""
        return self._embed_sentences(iter(sentences), checked_batch_size(batch_size))

    def _embed_sentences(self, sentences: Iterator[Sequence[str]], batch_size: int) -> Iterator[np.ndarray]:
        while batch := list(itertools.islice(sentences, batch_size)):
            yield from self.embed_batch(batch)

    def embed_file(
        self,
        input_file: str | Path | TextIO,
        output_file_path: str | Path,
        output_format: str = "all",
        batch_size: int = DEFAULT_BATCH_SIZE,
        forget_sentences: bool = False,
        use_sentence_keys: bool = False,
    ) -> None:
        r"""One whitespace-tokenized sentence a line -> HDF5, as AllenNLP's ``elmo`` command wrote it.

        ``input_file`` is a path or an open text file (left open), read alike: lines end at ``\n``, ``\r\n`` or
        ``\r``; a byte-order mark at a line's start is dropped and control characters become spaces (logged),
        as ``elmo embed`` reads them; a NUL or a lone surrogate is refused, naming the line. Each line (stripped)
        gets a float32 dataset: ``(n_layers, T, 2P)`` for ``all``, ``(T, 2P)`` for ``top`` (the last layer) or
        ``average`` (the mean of the layers), of its words once cleaned as the embedder cleans raw text
        (``clean_text``: invisible formatting deleted, composed). It is named by its 0-based line number as a
        string, or by the sentence itself with ``use_sentence_keys``. Unless ``forget_sentences`` or
        ``use_sentence_keys``, a one-element string dataset ``sentence_to_index`` holds the JSON
        ``{sentence: "line number"}``. Names and keys are the lines as read, not cleaned, so that a caller finds
        its own line. The input is checked whole before any work, and the file appears at ``output_file_path``
        only when complete.
        """
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"output_format is {output_format!r}; expected one of {', '.join(OUTPUT_FORMATS)}")
        check_flags({"forget_sentences": forget_sentences, "use_sentence_keys": use_sentence_keys})
        batch_size = checked_batch_size(batch_size)
        sentences = _read_sentences(input_file)
        if use_sentence_keys:
            _check_sentence_keys(sentences)
        check_output_path(output_file_path)
        # output_format is one of OUTPUT_FORMATS (checked above), each of them a layer choice
        weights = layer_weights(cast(LayerName, output_format), self.bilm.config.n_output_layers)
        keys = sentences if use_sentence_keys else [str(number) for number in range(len(sentences))]
        embedded = self.embed_sentences((clean_text(sentence).split() for sentence in sentences), batch_size)
        with atomic_path(Path(output_file_path)) as temporary, h5py.File(temporary, "w") as out:
            for key, layers in tqdm(zip(keys, embedded, strict=True), total=len(keys), disable=None):
                out.create_dataset(key, data=mix_layers(layers, weights), dtype="float32")
            if not (forget_sentences or use_sentence_keys):
                sentence_to_index = json.dumps(dict(zip(sentences, keys, strict=True)))
                out.create_dataset("sentence_to_index", data=[sentence_to_index], dtype=h5py.string_dtype())


def _read_sentences(input_file: str | Path | TextIO) -> list[str]:
    """Every line as ``elmo embed`` reads it, a byte-order mark at its start dropped and control characters as
    spaces, and stripped: the sentence that keys its dataset. The same whether ``input_file`` is a path or an open
    file, so that one file gets one set of tokens, vectors and keys. A path is first checked to be UTF-8 text
    (``check_text_file``); an open file's NUL or lone surrogate, which a path's check would have refused, is
    refused too. A line with no words once cleaned (``clean_text``) is refused, as AllenNLP refused an empty
    line (its dataset would hold no tokens)."""
    if isinstance(input_file, str | Path):
        name = str(input_file)
        text = check_text_file(input_file).path.read_text(encoding="utf-8")
    else:
        name = getattr(input_file, "name", "the open input file")
        text = input_file.read()
        if not isinstance(text, str):
            raise TypeError(f"{name} is open in binary mode; open it as text (encoding='utf-8')")
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":  # the break ending the last line
        lines.pop()
    if not lines:
        raise ValueError(f"{name} holds no lines; expected one sentence a line")
    for number, line in enumerate(lines):
        _refuse_non_text(name, number, line)
    replaced = [number for number, line in enumerate(lines) if CONTROL_CHARACTERS.search(line.strip())]
    if replaced:
        log.warning("%s: control characters replaced by spaces in %d lines (counting from 0: %s)", name,
                    len(replaced), _shown(replaced))
    sentences = [CONTROL_CHARACTERS.sub(" ", line.removeprefix(BYTE_ORDER_MARK)).strip() for line in lines]
    blank = [number for number, sentence in enumerate(sentences) if not clean_text(sentence).strip()]
    if blank:
        raise ValueError(f"the input has {len(blank)} empty lines (counting from 0: {_shown(blank)}), holding no "
                         "more than white space, control characters and invisible formatting; remove them")
    return sentences


def _refuse_non_text(name: str, number: int, line: str) -> None:
    """ValueError for what no UTF-8 text file holds and no dataset or key could keep: a NUL (HDF5 would cut a key
    there) or a lone surrogate (UTF-8 cannot encode it: an open file read with ``errors="surrogateescape"``)."""
    if "\0" in line:
        raise ValueError(f"{name}: line {number} (counting from 0) holds a NUL character; expected text (is the "
                         "file binary or UTF-16?)")
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as error:
        surrogate = ord(line[error.start])
        raise ValueError(f"{name}: line {number} (counting from 0) holds the lone surrogate U+{surrogate:04X} (half "
                         "a character); expected text that UTF-8 can hold") from None


def _shown(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers[:_LINES_SHOWN])) + (", ..." if len(numbers) > _LINES_SHOWN else "")


def _check_sentence_keys(sentences: list[str]) -> None:
    """Sentences as HDF5 dataset names: each once, and none that HDF5 would read as a path (a NUL or a lone
    surrogate, which no name can hold, was refused on reading)."""
    first_line: dict[str, int] = {}
    for number, sentence in enumerate(sentences):
        if "/" in sentence or sentence == ".":
            raise ValueError(f"line {number} ({sentence!r}) cannot name an HDF5 dataset ('/' separates groups, "
                             "'.' is the file itself); use line numbers as keys (use_sentence_keys=False)")
        if sentence in first_line:
            raise ValueError(f"lines {first_line[sentence]} and {number} hold the same sentence, which can key one "
                             "dataset only; use line numbers as keys (use_sentence_keys=False)")
        first_line[sentence] = number


class Elmo(nn.Module):
    """AllenNLP 0.9's ``Elmo``: ``forward(character_ids (..., T, 50))`` from ``batch_to_ids`` ->
    ``{"elmo_representations": K tensors (..., T, 2P), "mask": (..., T) int64}``, without ``<S>``/``</S>``
    unless ``keep_sentence_boundaries`` (then ``T + 2`` positions: ``<S>`` first, ``</S>`` after a row's tokens).

    Each of the ``num_output_representations`` (K) is its own scalar mix ``gamma * sum_j softmax(s)_j h_j`` of the
    biLM's layers, followed by ``dropout``. ``requires_grad`` lets gradients reach the biLM (by default only the
    mixes train); ``do_layer_norm`` normalizes each layer before mixing, over the batch's tokens and boundaries as
    AllenNLP did; ``scalar_mix_parameters`` fixes the pre-softmax ``s`` (with ``gamma`` 1) instead of learning
    them. The arguments take AllenNLP's places, so a call that passes them by position means what it meant there;
    ``vocab_to_cache`` and ``module`` are refused unless None. The task-model module ``elmo.Elmo`` does the work,
    mixing with the boundaries as AllenNLP did; this class speaks AllenNLP's arguments and output and removes the
    boundaries.
    """

    def __init__(
        self,
        options_file: str | Path,
        weight_file: str | Path,
        num_output_representations: int,
        requires_grad: bool = False,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
        vocab_to_cache: Sequence[str] | None = None,
        keep_sentence_boundaries: bool = False,
        scalar_mix_parameters: Sequence[float] | None = None,
        module: nn.Module | None = None,
    ) -> None:
        super().__init__()
        try:  # any whole number, as AllenNLP's range(n) took (a NumPy integer from a config), but not a bool
            outputs = None if isinstance(num_output_representations, bool) else \
                operator.index(num_output_representations)
        except TypeError:
            outputs = None
        if outputs is None or outputs < 1:
            raise ValueError(f"num_output_representations is {num_output_representations!r}; expected a whole "
                             "number of at least 1")
        num_output_representations = outputs
        check_flags({"requires_grad": requires_grad, "do_layer_norm": do_layer_norm,
                     "keep_sentence_boundaries": keep_sentence_boundaries})
        if vocab_to_cache:  # AllenNLP read an empty list as None too
            raise ValueError("vocab_to_cache is not supported: pass character ids from batch_to_ids (the biLM "
                             "caches each distinct token's character-CNN vector itself)")
        if module is not None:
            raise ValueError("module is not supported: give the options_file and weight_file of the biLM to load")
        bilm = _load(options_file, weight_file)
        fixed_weights = None
        if scalar_mix_parameters is not None:
            fixed_weights = _softmax(scalar_mix_parameters, bilm.config.n_output_layers)
        self.keep_sentence_boundaries = keep_sentence_boundaries
        self.elmo = TaskElmo(bilm, n_mixes=num_output_representations, dropout=dropout, layer_norm=do_layer_norm,
                             fine_tune=requires_grad, fixed_weights=fixed_weights, keep_boundaries=True)

    def get_output_dim(self) -> int:
        """2P: the width of each representation (1024 for the original model)."""
        return self.elmo.bilm.config.output_dim

    def forward(self, inputs: torch.Tensor) -> dict[str, list[torch.Tensor] | torch.Tensor]:
        if inputs.dim() < 3:
            raise ValueError(f"inputs has shape {tuple(inputs.shape)}; expected (batch, timesteps, 50) character "
                             "ids from batch_to_ids")
        leading = inputs.shape[:-2]
        mixes, mask = self.elmo(inputs.flatten(0, -3))  # reshape(-1, ...) cannot size a batch of no timesteps
        if not self.keep_sentence_boundaries:
            mixes, mask = [_remove_boundaries(mix, mask) for mix in mixes], mask[:, 2:]
        return {
            "elmo_representations": [mix.reshape(*leading, *mix.shape[1:]) for mix in mixes],
            "mask": mask.long().reshape(*leading, mask.shape[1]),
        }


def _remove_boundaries(mix: torch.Tensor, bounded_mask: torch.Tensor) -> torch.Tensor:
    """``(batch, T + 2, D)`` with ``<S>`` at 0 and ``</S>`` after each row's tokens -> ``(batch, T, D)``, the
    tokens only, zeros after them (where each ``</S>`` moved)."""
    tokens = bounded_mask[:, 2:]  # row of n tokens: n + 2 bounded positions, so its first n here
    return mix[:, 1:-1] * tokens[:, :, None].to(mix.dtype)


def _softmax(scalars: Sequence[float], n_layers: int) -> list[float]:
    """The layer weights that AllenNLP's fixed pre-softmax ``scalar_mix_parameters`` give."""
    values = torch.tensor([float(value) for value in scalars], dtype=torch.float64)
    if values.shape != (n_layers,) or not torch.isfinite(values).all():
        raise ValueError(f"scalar_mix_parameters must be {n_layers} finite numbers, one per biLM layer; got "
                         f"{list(scalars)}")
    return torch.softmax(values, dim=0).tolist()
