"""Task models on ELMo features: a BiLSTM-CRF sequence tagger and a BiLSTM sentence classifier over the
task-learned scalar mix of the biLM's layers (optionally with static word vectors), trained on layers cached
once in HDF5, with the static-vector baselines on the same model and the per-layer probes.

``elmo task train`` / ``elmo task predict`` (``elmo.tasks.commands``) are the command-line face;
``elmo.tasks.pipeline.train_and_test`` is what they and ``scripts/run_tasks.py`` call. Needs the ``tasks``
extra (pytorch-crf, seqeval, ...), checked when a name is first used.
"""

from typing import TYPE_CHECKING

from elmo.lazy import lazy_exports

__all__ = [
    "Batch",
    "Example",
    "SentenceClassifier",
    "SequenceTagger",
    "TaskSpec",
    "TokenFeatures",
    "TrainOptions",
    "fit",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "elmo.tasks.classifier": ("SentenceClassifier",),
    "elmo.tasks.data": ("Example",),
    "elmo.tasks.inputs": ("Batch", "TokenFeatures"),
    "elmo.tasks.spec": ("TaskSpec",),
    "elmo.tasks.tagger": ("SequenceTagger",),
    "elmo.tasks.options": ("TrainOptions",),
    "elmo.tasks.train": ("fit",),
}, extra="tasks")

if TYPE_CHECKING:
    from elmo.tasks.classifier import SentenceClassifier
    from elmo.tasks.data import Example
    from elmo.tasks.inputs import Batch, TokenFeatures
    from elmo.tasks.options import TrainOptions
    from elmo.tasks.spec import TaskSpec
    from elmo.tasks.tagger import SequenceTagger
    from elmo.tasks.train import fit
