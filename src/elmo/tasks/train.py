"""Training a task model: seeded, Adam, early stopping on the dev split, and the metrics of the paper's tasks.

``fit`` keeps the parameters of the epoch with the best dev score and stops after ``patience`` epochs
without a better one; the test split is scored once, with those parameters. Tagging is scored by entity F1
(seqeval, CoNLL rules: an entity counts only with exact span and type), classification by accuracy.
"""

import copy
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from elmo.tasks.classifier import SentenceClassifier
from elmo.tasks.data import Example, entity_types
from elmo.tasks.inputs import Item, collate, make_items
from elmo.tasks.options import TrainOptions
from elmo.tasks.spec import TaskSpec
from elmo.tasks.tagger import SequenceTagger

# The task models that fit, predict and the scorers train and read (QA has its own loop: qa_pipeline).
Labeller = SequenceTagger | SentenceClassifier


@dataclass
class FitResult:
    best_dev: float
    best_epoch: int
    epochs_run: int
    seconds: float
    dev_history: list[float] = field(default_factory=list)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def predict(model: Labeller, items: Sequence[Item], batch_size: int = 64) -> list:
    """Decoded ids per item (tag id lists for a tagger, one label id for a classifier), in item order."""
    model.eval()
    predictions: list = []
    with torch.no_grad():
        for start in range(0, len(items), batch_size):
            predictions += model.decode(collate(items[start:start + batch_size]))
    return predictions


def entity_f1(model: Labeller, items: Sequence[Item], tags: Sequence[str]) -> float:
    from seqeval.metrics import f1_score  # imports scikit-learn: only when a tagger is scored

    gold = [[tags[i] for i in torch.as_tensor(item.target).tolist()] for item in items]  # a tagger's targets
    guessed = [[tags[i] for i in ids] for ids in predict(model, items)]
    return float(f1_score(gold, guessed))


def accuracy(model: Labeller, items: Sequence[Item]) -> float:
    guessed = predict(model, items)
    return sum(int(guess == item.target) for guess, item in zip(guessed, items, strict=True)) / len(items)


def scorer(spec: TaskSpec) -> tuple[str, Callable[[Labeller, Sequence[Item]], float]]:
    """The task's metric name and function."""
    if spec.kind == "tagger":
        return "entity-f1", lambda model, items: entity_f1(model, items, spec.labels)
    return "accuracy", accuracy


def fit(model: Any, train_items: Sequence[Any], dev_items: Sequence[Any], score: Callable[[Any, Sequence[Any]], float],
        options: TrainOptions, batch_of: Callable[[list[Any]], Any] = collate) -> FitResult:
    """Trains ``model`` (anything with ``loss(batch)``: a labeller, or a QA model with its own ``batch_of``) in
    place; it ends with the parameters of its best dev epoch."""
    if not train_items or not dev_items:
        raise ValueError(f"training needs examples in both splits; got {len(train_items)} train, "
                         f"{len(dev_items)} dev")
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(options.seed)
    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.Adam(parameters, lr=options.learning_rate)
    best_dev, best_epoch, best_state = float("-inf"), 0, copy.deepcopy(model.state_dict())
    history: list[float] = []
    for epoch in range(1, options.max_epochs + 1):
        model.train()
        order = torch.randperm(len(train_items), generator=generator).tolist()
        for start in range(0, len(order), options.batch_size):
            batch = batch_of([train_items[i] for i in order[start:start + options.batch_size]])
            optimizer.zero_grad()
            model.loss(batch).backward()
            nn.utils.clip_grad_norm_(parameters, options.clip_norm)
            optimizer.step()
        dev = score(model, dev_items)
        history.append(dev)
        if dev > best_dev:
            best_dev, best_epoch, best_state = dev, epoch, copy.deepcopy(model.state_dict())
        elif epoch - best_epoch >= options.patience and epoch >= options.min_epochs:
            break
    model.load_state_dict(best_state)
    model.eval()
    return FitResult(best_dev, best_epoch, len(history), time.perf_counter() - started, history)


def targets_of(spec: TaskSpec, examples: Sequence[Example]) -> list[torch.Tensor | int]:
    """Tag-id tensors or label ids; ValueError naming a label the spec does not know."""
    index = {label: i for i, label in enumerate(spec.labels)}

    def lookup(label: str, example: Example) -> int:
        if label not in index:
            raise ValueError(f"label {label!r} of example {example.key[:60]!r} is not among the task's "
                             f"{len(index)} labels ({', '.join(spec.labels[:12])}...)")
        return index[label]

    if spec.kind == "tagger":
        return [torch.tensor([lookup(tag, example) for tag in example.tags or ()]) for example in examples]
    return [lookup(example.label or "", example) for example in examples]


def items_for(spec: TaskSpec, examples: Sequence[Example], layers: Sequence[np.ndarray] | None, static,
              with_targets: bool = True) -> list[Item]:
    """The model inputs of ``examples`` (``layers``: their cached biLM layers, needed when the spec reads
    ELMo; ``static``: the spec's StaticVectors, or None)."""
    if spec.elmo is not None and layers is None and not spec.fine_tune:
        raise ValueError("this task model reads ELMo layers; give the examples' cached layers")
    if with_targets:
        targets = targets_of(spec, examples)
    else:
        targets = [torch.zeros(len(example.tokens), dtype=torch.long) if spec.kind == "tagger" else 0
                   for example in examples]
    return make_items(examples, layers if spec.elmo is not None and not spec.fine_tune else None,
                      static if spec.static_dim else None, spec.positions, targets, spec.fine_tune)


def labels_of(kind: str, *splits: Sequence[Example]) -> tuple[str, ...]:
    """A tagger's tags: ``O``, then ``B-T`` and ``I-T`` for each entity type ``T`` of the given splits, the types
    sorted; both, whichever the splits hold, so that a model trained where every entity of a type is one token
    can still tag a longer one. A classifier's classes, sorted. A model's labels are those of its train split
    alone (``elmo task train`` refuses a dev or test entity type or class that train lacks)."""
    if kind == "tagger":
        types = entity_types(tag for examples in splits for example in examples for tag in example.tags or ())
        return ("O", *(f"{prefix}-{entity}" for entity in types for prefix in ("B", "I")))
    return tuple(sorted({example.label or "" for examples in splits for example in examples}))
