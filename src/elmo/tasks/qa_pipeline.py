"""From QA examples to a trained, tested span model, and from a trained one to answers: the steps that
``elmo task train qa`` / ``elmo task predict`` take.

Questions and passages are embedded separately (each its own biLM sentence) and cached like every other
task's features. Training follows ``elmo.tasks.train``: seeded Adam, gradient clipping, the parameters of
the best dev epoch kept (dev token F1), the test split scored once.
"""

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from elmo.static_vectors import StaticVectors
from elmo.tasks.data import Example
from elmo.tasks.inputs import Item, collate, make_items
from elmo.tasks.options import TrainOptions
from elmo.tasks.pipeline import embed_examples, require_examples
from elmo.tasks.qa_data import QAExample
from elmo.tasks.qa_metrics import score_answers
from elmo.tasks.qa_model import QABatch, SpanQA
from elmo.tasks.spec import TaskSpec
from elmo.tasks.train import FitResult, fit, seed_everything

if TYPE_CHECKING:
    from elmo.embedder import Embedder

QA_PARTS = ("question", "passage")


@dataclass(frozen=True)
class QAItem:
    question: Item
    passage: Item
    span: tuple[int, int]


def as_sentences(examples: Sequence[QAExample]) -> dict[str, list[Example]]:
    """The questions and the passages, each as biLM sentences."""
    return {"question": [Example.of_words(example.question_words) for example in examples],
            "passage": [Example.of_words(example.passage_words) for example in examples]}


def embed_qa(embedder: "Embedder", splits: Mapping[str, Sequence[QAExample]], cache_dir: str | Path,
             progress: bool = False) -> dict[str, dict[str, list[np.ndarray]]]:
    """Every biLM layer of each split's questions and passages, cached as ``{split}-{part}.h5``."""
    sentences = {f"{name}-{part}": part_sentences for name, examples in splits.items()
                 for part, part_sentences in as_sentences(examples).items()}
    layers = embed_examples(embedder, sentences, cache_dir, progress=progress)
    return {name: {part: layers[f"{name}-{part}"] for part in QA_PARTS} for name in splits}


def qa_items(spec: TaskSpec, examples: Sequence[QAExample], layers: dict[str, list[np.ndarray]] | None,
             static: StaticVectors | None, with_targets: bool = True) -> list[QAItem]:
    if spec.elmo is not None and layers is None:
        raise ValueError("this QA model reads ELMo layers; give the examples' cached layers")
    if with_targets:
        missing = [example.key for example in examples if example.span is None]
        if missing:
            raise ValueError(f"{len(missing)} questions have no answer inside their passage (first: {missing[0]!r})")
    parts = {}
    for part, sentences in as_sentences(examples).items():
        parts[part] = make_items(sentences, None if layers is None or spec.elmo is None else layers[part],
                                 static if spec.static_dim else None, False, [0] * len(sentences))
    return [QAItem(question, passage, example.span if with_targets and example.span else (0, 0))
            for question, passage, example in zip(parts["question"], parts["passage"], examples, strict=True)]


def collate_qa(items: Sequence[QAItem]) -> QABatch:
    return QABatch(collate([item.question for item in items]), collate([item.passage for item in items]),
                   torch.tensor([item.span[0] for item in items]), torch.tensor([item.span[1] for item in items]))


def predict_spans(model: SpanQA, items: Sequence[QAItem], batch_size: int = 64) -> list[tuple[int, int]]:
    model.eval()
    spans: list[tuple[int, int]] = []
    with torch.no_grad():
        for start in range(0, len(items), batch_size):
            spans += model.decode(collate_qa(items[start:start + batch_size]))
    return spans


def score_spans(model: SpanQA, items: Sequence[QAItem], examples: Sequence[QAExample]) -> dict[str, float]:
    """Exact match and F1 (percent) of the model's answers against every gold answer."""
    answers = {example.key: example.answer_text(*span)
               for example, span in zip(examples, predict_spans(model, items), strict=True)}
    return score_answers(answers, {example.key: example.answers for example in examples})


def fit_qa(model: SpanQA, train_items: Sequence[QAItem], dev_items: Sequence[QAItem],
           dev_examples: Sequence[QAExample], options: TrainOptions) -> FitResult:
    """Trains ``model`` in place, early-stopped on dev F1; it ends with its best dev epoch's parameters."""
    return fit(model, train_items, dev_items, lambda trained, items: score_spans(trained, items, dev_examples)["f1"],
               options, batch_of=collate_qa)


def train_and_test_qa(spec: TaskSpec, splits: Mapping[str, Sequence[QAExample]],
                      layers: dict[str, dict[str, list[np.ndarray]]] | None, static: StaticVectors | None,
                      options: TrainOptions) -> tuple[SpanQA, dict]:
    """Fits on ``train`` (early stopping on ``dev`` F1), scores ``test`` once; the summary holds dev F1 and
    test exact match and F1 (percent), epochs, seconds and the learned mixing weights."""
    require_examples(splits)
    seed_everything(options.seed)
    model = spec.build_qa()
    items = {name: qa_items(spec, examples, None if layers is None else layers[name], static)
             for name, examples in splits.items()}
    result = fit_qa(model, items["train"], items["dev"], splits["dev"], options)
    test = score_spans(model, items["test"], splits["test"])
    summary = {"metric": "f1", "dev": result.best_dev, "test": test["f1"], "test_exact_match": test["exact_match"],
               "best_epoch": result.best_epoch, "epochs_run": result.epochs_run, "seconds": result.seconds,
               "mix_weights": model.features.mix_weights(), "seed": options.seed,
               "sizes": {name: len(examples) for name, examples in splits.items()}, "options": asdict(options)}
    return model, summary


def answer_questions(spec: TaskSpec, model: SpanQA, examples: Sequence[QAExample], static: StaticVectors | None,
                     batch_size: int = 64) -> list[str]:
    """The answer text of each question, embedding questions and passages on the fly."""
    layers = None
    if spec.elmo is not None:
        embedder = spec.load_embedder()
        layers = {part: [array.astype(np.float16) for array in
                         embedder.iter_embed([list(s.words) for s in sentences], "all", batch_size)]
                  for part, sentences in as_sentences(examples).items()}
    items = qa_items(spec, examples, layers, static, with_targets=False)
    return [example.answer_text(*span)
            for example, span in zip(examples, predict_spans(model, items, batch_size), strict=True)]
