"""A trained task model on disk: ``task.json`` (what it reads and predicts), ``model.safetensors`` and
``metrics.json``, written together as one directory (``TaskSpec.save``), beside which ``elmo task train`` keeps
its default feature cache (``features/``).

``TaskSpec`` is everything needed to rebuild the model and feed it the same inputs at prediction time: the
kind, the label names, which ELMo representation and which static vectors it reads, and how text is turned
into words (the biLM's tokenizer, or jieba over characters for character tagging).
"""

import json
import os
import shutil
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save
from torch import nn

from elmo.files import (
    check_not_a_link,
    entries_besides,
    new_partial_directory,
    publish_directory,
    remove_partial_directories_of,
    write_bytes_atomic,
    write_text_atomic,
)
from elmo.tasks.classifier import SentenceClassifier
from elmo.tasks.data import TASK_KINDS, TaskKind
from elmo.tasks.encoders import BILSTM, EncoderChoice
from elmo.tasks.inputs import ElmoMode, TokenFeatures
from elmo.tasks.options import DROPOUT, HIDDEN, MAX_ANSWER_TOKENS, MIX_L2, EncoderKind
from elmo.tasks.qa_model import SpanQA
from elmo.tasks.tagger import SequenceTagger
from elmo.windows import EARLIER_DEFAULTS, MAX_WINDOW_TOKENS, WINDOW_CONTEXT

if TYPE_CHECKING:
    from elmo.embedder import Embedder

TaskModel = TypeVar("TaskModel", bound=nn.Module)

SPEC_FILE = "task.json"
WEIGHTS_FILE = "model.safetensors"
METRICS_FILE = "metrics.json"
FEATURES_DIR = "features"  # `elmo task train`'s default feature cache, kept when the model beside it is replaced
TASK_MODEL_ENTRIES = frozenset({SPEC_FILE, WEIGHTS_FILE, METRICS_FILE, FEATURES_DIR})


def check_task_model_target(out: str | Path, option: str = "the output") -> Path:
    """``out`` if a task model may replace it: new, empty, or a task model directory (``TASK_MODEL_ENTRIES``
    only), and not a symbolic link (``check_not_a_link``); ValueError otherwise, before any work, as ``save``
    replaces the whole directory and would delete anything else in it."""
    out = Path(out)
    check_not_a_link(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{option} {out} is a file; expected a directory (a new path, or a task model to replace)")
    others = entries_besides(out, TASK_MODEL_ENTRIES)
    if others:
        raise ValueError(f"{option} {out} holds files other than a task model's ({', '.join(others[:5])}), which "
                         "saving the model would delete (the directory is replaced whole): give a new or empty "
                         "directory, or a task model to replace")
    return out


@dataclass(frozen=True)
class TaskSpec:
    """- ``labels``: tag names (tagger, BIO) or class names (classifier), in id order.
    - ``elmo``: ``mix``, ``top`` or None; ``model``: the biLM (directory or shipped name) when ELMo is read.
    - ``static``: ``glove`` or a StaticVectors ``.npz`` path (absolute), and ``static_dim``; None for no static
      vectors. ``static_sha256``: the file's sha256 when the model was trained, checked before prediction reads
      it (``pipeline.load_static``); None for GloVe, or a task.json written before it was recorded (not checked).
    - ``segment``: ``jieba`` when tokens are characters that the biLM reads as jieba words (``positions``
      then adds each character's place in its word).
    - ``max_words``: classification texts are cut to this many words.
    - ``fine_tune``: the biLM is part of the task model and trained with it (its weights are saved in
      ``model.safetensors``); otherwise it is frozen and its layers are read from a cache.
    - ``max_answer_tokens``, ``passage_only``: a QA model's span length cap and its passage-only diagnostic
      (``elmo.tasks.qa_model``); a QA model has no labels.
    - ``encoder``: ``bilstm`` or ``transformer`` (``elmo.tasks.encoders``), with the Transformer's
      ``encoder_layers`` and ``encoder_heads``; a task.json written before the choice existed reads as bilstm.
    - ``max_window_tokens``, ``window_context``: the windows the embedder cut long texts into when the features
      were read (``elmo.windows``), so prediction reads them alike; None: the defaults (a spec made in code). A
      task.json that reads ELMo and was written before they were recorded reads ``elmo.windows.EARLIER_DEFAULTS``,
      the defaults then.
    - ``bilm_fingerprint``: ``elmo.fingerprint`` of the frozen biLM whose layers the model was trained on. A
      shipped name (``en``) may hold other weights after an upgrade, and a model fed another biLM's layers
      predicts nonsense without an error, so ``load_embedder`` refuses another biLM. None: no frozen ELMo, or a
      task.json written before the fingerprint was recorded (not checked).
    """

    kind: TaskKind
    labels: tuple[str, ...]
    elmo: ElmoMode | None
    model: str | None
    n_layers: int = 0
    elmo_dim: int = 0
    static: str | None = None
    static_dim: int = 0
    segment: str | None = None
    positions: bool = False
    max_words: int | None = None
    hidden: int = HIDDEN
    dropout: float = DROPOUT
    mix_l2: float = MIX_L2
    fine_tune: bool = False
    max_answer_tokens: int = MAX_ANSWER_TOKENS
    passage_only: bool = False
    # Flat in task.json (a file written before the choice existed reads as the BiLSTM); the defaults are those of
    # elmo.tasks.options.
    encoder: EncoderKind = BILSTM.kind
    encoder_layers: int = BILSTM.layers
    encoder_heads: int = BILSTM.heads
    bilm_fingerprint: str | None = None
    static_sha256: str | None = None
    max_window_tokens: int | None = None
    window_context: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in TASK_KINDS:
            raise ValueError(f"task kind {self.kind!r}; expected one of {', '.join(TASK_KINDS)}")
        EncoderChoice(self.encoder, self.encoder_layers, self.encoder_heads)  # an unknown encoder fails here
        if self.elmo is not None and not (self.model and self.n_layers and self.elmo_dim):
            raise ValueError("a task model that reads ELMo needs the biLM (model, n_layers, elmo_dim)")

    @property
    def encoder_choice(self) -> EncoderChoice:
        return EncoderChoice(self.encoder, self.encoder_layers, self.encoder_heads)

    @property
    def bilm_model(self) -> str:
        """``model``, for the code that reads ELMo (``__post_init__`` makes sure such a spec names one)."""
        if self.model is None:
            raise ValueError("this task model reads no ELMo: its spec names no biLM model")
        return self.model

    def load_embedder(self) -> "Embedder":
        """The biLM whose layers this model reads, over words already split (whitespace); refused when its
        weights are not those the model was trained on."""
        from elmo.embedder import Embedder

        embedder = Embedder.load(
            self.bilm_model, tokenizer="whitespace",
            max_window_tokens=MAX_WINDOW_TOKENS if self.max_window_tokens is None else self.max_window_tokens,
            window_context=WINDOW_CONTEXT if self.window_context is None else self.window_context)
        if self.bilm_fingerprint is not None and embedder.fingerprint != self.bilm_fingerprint:
            raise ValueError(
                f"this task model was trained on the layers of another biLM than the one {self.bilm_model!r} "
                f"names now (fingerprint {self.bilm_fingerprint[:12]}..., found {embedder.fingerprint[:12]}...; "
                "a shipped model upgraded with the package?): train the task model again on this biLM, or point "
                "\"model\" in its task.json at a directory with the weights it was trained on")
        return embedder

    def build(self) -> SequenceTagger | SentenceClassifier | SpanQA:
        return self.build_qa() if self.kind == "qa" else self.build_labeller()

    def build_labeller(self) -> SequenceTagger | SentenceClassifier:
        """``build`` for a tagger or classifier spec, typed as the models it returns."""
        if self.kind == "qa":
            raise ValueError("build_labeller on a qa spec; expected a tagger or classifier spec")
        model_class = SequenceTagger if self.kind == "tagger" else SentenceClassifier
        return model_class(self._features(), len(self.labels), self.hidden, self.dropout, self.encoder_choice)

    def build_qa(self) -> SpanQA:
        """``build`` for a QA spec, typed as the span model it returns."""
        if self.kind != "qa":
            raise ValueError(f"build_qa on a {self.kind} spec; expected a qa spec")
        return SpanQA(self._features(), self.hidden, self.dropout, self.max_answer_tokens, not self.passage_only,
                      self.encoder_choice)

    def _features(self) -> TokenFeatures:
        bilm = None
        if self.fine_tune:
            from elmo.model_dir import ModelDir

            bilm = ModelDir.find(self.model or "").load_bilm()
        return TokenFeatures(self.elmo, self.n_layers, self.elmo_dim, self.static_dim, self.positions,
                             self.dropout, self.mix_l2, bilm)

    def save(self, model: nn.Module, out: str | Path, metrics: dict | None = None) -> Path:
        """``task.json``, ``model.safetensors`` and ``metrics.json``, written beside ``out`` and put in its place
        whole (``publish_directory``): a failed or killed save leaves the old model or the new one, never one's
        weights beside the other's spec (which failed to load, or loaded weights of another shape). A feature
        cache in ``out`` (``FEATURES_DIR``) is moved into the new directory; a kill in that moment loses it (a
        cache: it is embedded again; the next save deletes what a killed one left beside ``out``). ValueError
        before anything is written when ``out`` holds other files (``check_task_model_target``)."""
        out = check_task_model_target(out)
        metrics = metrics or {}
        remove_partial_directories_of(out)  # what a killed save left beside it
        partial = new_partial_directory(out)
        cache, cache_aside = out / FEATURES_DIR, None
        try:
            write_bytes_atomic(partial / WEIGHTS_FILE, save({name: tensor.contiguous()
                                                             for name, tensor in model.state_dict().items()}))
            write_text_atomic(partial / SPEC_FILE, json.dumps({**asdict(self), "metrics": metrics}, indent=2,
                                                              ensure_ascii=False) + "\n")
            write_text_atomic(partial / METRICS_FILE, json.dumps(metrics, indent=2) + "\n")
            if cache.is_dir():  # publish_directory takes files only, so the cache waits beside
                cache_aside = new_partial_directory(out)
                os.replace(cache, cache_aside)
            publish_directory(partial, out)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            if cache_aside is not None:
                if cache.exists():  # the move aside itself failed: its empty directory goes
                    cache_aside.rmdir()
                else:
                    os.replace(cache_aside, cache)
            raise
        if cache_aside is not None:
            os.replace(cache_aside, cache)
        return out

    @classmethod
    def read(cls, directory: str | Path) -> "TaskSpec":
        """The spec in ``directory``'s ``task.json``, without building the model: what prediction needs to read
        its input, which is checked before the weights load. ValueError naming the file when it is no spec."""
        directory = Path(directory)
        spec_file = directory / SPEC_FILE
        if not directory.is_dir():
            raise FileNotFoundError(f"{directory}: no such task model directory (written by `elmo task train`)")
        if not spec_file.is_file():
            raise FileNotFoundError(f"{directory} holds no {SPEC_FILE}; is it a task model written by "
                                    "`elmo task train`?")
        try:
            values = json.loads(spec_file.read_text(encoding="utf-8"))
            known = {field.name for field in fields(cls)}
            values = {name: value for name, value in values.items() if name in known}
            values["labels"] = tuple(values["labels"])
            if values.get("elmo") is not None and "max_window_tokens" not in values:
                values.update(EARLIER_DEFAULTS)  # written before the windows were recorded
            return cls(**values)
        except (AttributeError, KeyError, TypeError, ValueError) as error:  # ValueError: bad JSON or UTF-8 too
            raise ValueError(f"{spec_file} is not a task model's spec ({type(error).__name__}: {error}); train "
                             "the model again") from None

    def load_weights(self, directory: str | Path, model: TaskModel) -> TaskModel:
        """``model``, as this spec builds it (``build_qa``, ``build_labeller``), given the weights in
        ``directory``'s ``model.safetensors`` and put in eval mode. ValueError naming the directory when the file is
        missing, cut short or of another model (weights a run wrote beside an older ``task.json``): the traceback
        from torch or safetensors named neither."""
        weights_file = Path(directory) / WEIGHTS_FILE
        if not weights_file.is_file():
            raise FileNotFoundError(f"{Path(directory)} holds no {WEIGHTS_FILE}; train the task model again")
        try:
            model.load_state_dict(_current_layout(load_file(str(weights_file)), model))
        except (SafetensorError, RuntimeError) as error:
            # torch's first line only says "Error(s) in loading state_dict"; the second names a tensor and shapes
            reason = " ".join(line.strip() for line in str(error).splitlines()[:2]) or type(error).__name__
            raise ValueError(f"{Path(directory)}: {WEIGHTS_FILE} does not hold the model {SPEC_FILE} describes "
                             f"({reason}); is it cut short, or from another run? Train the task model again"
                             ) from None
        return model.eval()

    @classmethod
    def load(cls, directory: str | Path) -> tuple["TaskSpec", SequenceTagger | SentenceClassifier | SpanQA]:
        spec = cls.read(directory)
        return spec, spec.load_weights(directory, spec.build())


def _current_layout(saved: dict[str, torch.Tensor], model: nn.Module) -> dict[str, torch.Tensor]:
    """A fine-tuned task model saved before its features ran the public ``Elmo`` layer kept the biLM under
    ``features.bilm.`` and the mix under ``features.mix.``; both now live under ``features.elmo_layer.``, and a
    top-layer model's fixed mix (which it did not save) is the one the rebuilt model holds."""
    if not any(name.startswith("features.bilm.") for name in saved):
        return saved
    moved = {}
    for name, tensor in saved.items():
        if name.startswith("features.bilm."):
            name = "features.elmo_layer." + name.removeprefix("features.")
        elif name.startswith("features.mix."):
            name = "features.elmo_layer.mixes.0." + name.removeprefix("features.mix.")
        moved[name] = tensor
    for name, tensor in model.state_dict().items():
        if name.startswith("features.elmo_layer.mixes.0.") and name not in moved:
            moved[name] = tensor
    return moved
