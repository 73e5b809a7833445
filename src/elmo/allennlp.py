"""AllenNLP 0.9's ELMo API on this package's biLM, for code written against ``allennlp.modules.elmo`` and
``allennlp.commands.elmo`` (both removed in AllenNLP 1.0): ``batch_to_ids``, ``Elmo`` and ``ElmoEmbedder``.

Arguments, shapes, dtypes and file layout are AllenNLP 0.9's. The numbers are too, with one difference made on
purpose: every sentence starts from a zero LSTM state. AllenNLP carried each batch row's state into the next
batch, so a sentence's vectors depended on what had been embedded before it (docs/allennlp.md).
"""

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal, TextIO, cast

import h5py
import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from elmo.bilm import BiLM
from elmo.characters import batch_to_char_ids
from elmo.embed_job.job import check_output_path
from elmo.embed_job.source import EmbedReport, check_text_file, read_lines
from elmo.embedder import layer_weights, mix_layers
from elmo.files import atomic_path
from elmo.task_module import Elmo as TaskElmo
from elmo.weights import load_bilm

DEFAULT_BATCH_SIZE = 64  # AllenNLP's, for embed_sentences and embed_file
OUTPUT_FORMATS = ("all", "top", "average")


def batch_to_ids(batch: Sequence[Sequence[str]]) -> torch.Tensor:
    """AllenNLP's name for ``batch_to_char_ids``: ``(batch, max_tokens, 50)`` int64 ids, padding tokens all 0."""
    for row, sentence in enumerate(batch):
        for position, token in enumerate(sentence):
            if not isinstance(token, str):
                raise TypeError(f"sentence {row}, token {position} is {token!r}; expected a string")
    return batch_to_char_ids(batch)


def _load(options_file: str | Path, weight_file: str | Path) -> BiLM:
    """AllenNLP fetched URLs through its cache; here both must be local files, so a URL is refused by name."""
    for argument, value in (("options_file", options_file), ("weight_file", weight_file)):
        if str(value).startswith(("http://", "https://", "s3://")):
            raise ValueError(f"{argument} is the URL {value}; this package reads local files only: download it "
                             "and pass the path of the downloaded file")
    return load_bilm(options_file, weight_file)


def _device(cuda_device: int) -> torch.device:
    """AllenNLP's convention: -1 is the CPU, n >= 0 the n-th CUDA GPU."""
    if isinstance(cuda_device, bool) or not isinstance(cuda_device, int) or cuda_device < -1:
        raise ValueError(f"cuda_device is {cuda_device!r}; expected -1 (the CPU) or the index of a CUDA GPU")
    if cuda_device == -1:
        return torch.device("cpu")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if cuda_device >= count:
        raise ValueError(f"cuda_device is {cuda_device} but this machine has {count} CUDA GPUs; pass -1 for the CPU")
    return torch.device("cuda", cuda_device)


class ElmoEmbedder:
    """Sentences (token lists) -> numpy arrays ``(n_layers, T, 2P)``: ``(3, T, 1024)`` for the original model,
    layer 0 the character CNN's token vector twice, layers 1 and 2 ``[forward, backward]`` LSTM outputs.

    ``cuda_device``: -1 for the CPU, else the index of the CUDA GPU to run on.
    """

    def __init__(self, options_file: str | Path, weight_file: str | Path, cuda_device: int = -1) -> None:
        self.device = _device(cuda_device)
        self.bilm = _load(options_file, weight_file).to(self.device)

    @torch.no_grad()
    def batch_to_embeddings(self, batch: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(activations (batch, n_layers, T, 2P), mask (batch, T) int64)`` on the model's device, zeros at
        padding."""
        output, _ = self.bilm(batch_to_ids(batch).to(self.device))
        return output.layers.transpose(0, 1), output.mask.long()

    def embed_sentence(self, sentence: Sequence[str]) -> np.ndarray:
        """One sentence's layers ``(n_layers, T, 2P)`` float32."""
        return self.embed_batch([sentence])[0]

    def embed_batch(self, batch: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Each sentence's layers ``(n_layers, T_i, 2P)``, trimmed to its own length ``T_i``, in input order."""
        activations, mask = self.batch_to_embeddings(batch)
        layer_vectors = activations.cpu().numpy()
        return [layer_vectors[row, :, :length] for row, length in enumerate(mask.sum(dim=1).tolist())]

    def embed_sentences(
        self, sentences: Iterable[Sequence[str]], batch_size: int = DEFAULT_BATCH_SIZE
    ) -> Iterator[np.ndarray]:
        """``embed_batch`` over ``batch_size`` sentences at a time, yielding one array per sentence."""
        _check_batch_size(batch_size)
        return self._embed_sentences(iter(sentences), batch_size)

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
        """One whitespace-tokenized sentence a line -> HDF5, as AllenNLP's ``elmo`` command wrote it.

        Each line (stripped) gets a float32 dataset: ``(n_layers, T, 2P)`` for ``all``, ``(T, 2P)`` for ``top``
        (the last layer) or ``average`` (the mean of the layers). It is named by its 0-based line number as a
        string, or by the sentence itself with ``use_sentence_keys``. Unless ``forget_sentences`` or
        ``use_sentence_keys``, a one-element string dataset ``sentence_to_index`` holds the JSON
        ``{sentence: "line number"}``. ``input_file`` is a path or an open text file (left open). The input is
        checked whole before any work, and the file appears at ``output_file_path`` only when complete.
        """
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"output_format is {output_format!r}; expected one of {', '.join(OUTPUT_FORMATS)}")
        _check_batch_size(batch_size)
        sentences = _read_sentences(input_file)
        if use_sentence_keys:
            _check_sentence_keys(sentences)
        check_output_path(output_file_path)
        # output_format is one of OUTPUT_FORMATS (checked above), each of them a layer choice
        weights = layer_weights(cast(Literal["all", "top", "average"], output_format), self.bilm.config.n_output_layers)
        keys = sentences if use_sentence_keys else [str(number) for number in range(len(sentences))]
        embedded = self.embed_sentences((sentence.split() for sentence in sentences), batch_size)
        with atomic_path(Path(output_file_path)) as temporary, h5py.File(temporary, "w") as out:
            for key, layers in tqdm(zip(keys, embedded, strict=True), total=len(keys), disable=None):
                out.create_dataset(key, data=mix_layers(layers, weights), dtype="float32")
            if not (forget_sentences or use_sentence_keys):
                sentence_to_index = json.dumps(dict(zip(sentences, keys, strict=True)))
                out.create_dataset("sentence_to_index", data=[sentence_to_index], dtype=h5py.string_dtype())


def _check_batch_size(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size is {batch_size!r}; expected a whole number, at least 1")


def _read_sentences(input_file: str | Path | TextIO) -> list[str]:
    """Every line, stripped. A path is first checked to be UTF-8 text and read as ``elmo embed`` reads it (lines
    end at ``\n`` only, a byte-order mark dropped); an empty line is refused, as AllenNLP refused it (its dataset
    would hold no tokens)."""
    if isinstance(input_file, str | Path):
        sentences = [line.strip() for line in read_lines(check_text_file(input_file).path, EmbedReport())]
    else:
        sentences = [line.strip() for line in input_file]
    if not sentences:
        raise ValueError(f"{getattr(input_file, 'name', input_file)} holds no lines; expected one sentence a line")
    blank = [number for number, sentence in enumerate(sentences) if not sentence]
    if blank:
        shown = ", ".join(map(str, blank[:10])) + (", ..." if len(blank) > 10 else "")
        raise ValueError(f"the input has {len(blank)} empty lines (counting from 0: {shown}); remove them")
    return sentences


def _check_sentence_keys(sentences: list[str]) -> None:
    """Sentences as HDF5 dataset names: each once, and none that HDF5 would read as a path."""
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
    them. The task-model module ``elmo.Elmo`` does the work, mixing with the boundaries as AllenNLP did; this class
    speaks AllenNLP's arguments and output and removes the boundaries.
    """

    def __init__(
        self,
        options_file: str | Path,
        weight_file: str | Path,
        num_output_representations: int,
        requires_grad: bool = False,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
        keep_sentence_boundaries: bool = False,
        scalar_mix_parameters: Sequence[float] | None = None,
    ) -> None:
        super().__init__()
        if isinstance(num_output_representations, bool) or not isinstance(num_output_representations, int) \
                or num_output_representations < 1:
            raise ValueError(f"num_output_representations is {num_output_representations!r}; expected at least 1")
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
