"""Pre-training and domain adaptation of the biLM, as bilm-tf trains it: streaming corpus, vocabulary,
packed batches with carried state, sampled softmax, exact resume, DDP, export to the published layout.

Needs the ``train`` extra (safetensors for checkpoints, matplotlib for ``perplexity.png``); the names load on
first use, so ``elmo --help`` does not import PyTorch.
"""

from typing import TYPE_CHECKING

from elmo.lazy import lazy_exports

__all__ = [
    "Corpus",
    "CorpusError",
    "LanguageModel",
    "Perplexities",
    "TrainingOptions",
    "Vocabulary",
    "VocabularyError",
    "evaluate",
    "export_model",
    "grow_vocabulary",
    "load_language_model",
    "train",
    "unigram_perplexity",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "elmo.training.corpus": ("Corpus", "CorpusError"),
    "elmo.training.export": ("export_model", "grow_vocabulary", "load_language_model"),
    "elmo.training.language_model": ("LanguageModel",),
    "elmo.training.perplexity": ("Perplexities", "evaluate", "unigram_perplexity"),
    "elmo.training.trainer": ("TrainingOptions", "train"),
    "elmo.training.vocab": ("Vocabulary", "VocabularyError"),
}, extra="train")

if TYPE_CHECKING:
    from elmo.training.corpus import Corpus, CorpusError
    from elmo.training.export import export_model, grow_vocabulary, load_language_model
    from elmo.training.language_model import LanguageModel
    from elmo.training.perplexity import Perplexities, evaluate, unigram_perplexity
    from elmo.training.trainer import TrainingOptions, train
    from elmo.training.vocab import Vocabulary, VocabularyError
