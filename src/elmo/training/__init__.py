"""Pre-training and domain adaptation of the biLM, as bilm-tf trains it: streaming corpus, vocabulary,
packed batches with carried state, sampled softmax, exact resume, DDP, export to the published layout."""

from elmo.training.corpus import Corpus, CorpusError
from elmo.training.export import export_model, grow_vocabulary, load_language_model
from elmo.training.language_model import LanguageModel
from elmo.training.trainer import Perplexities, TrainingOptions, evaluate, train, unigram_perplexity
from elmo.training.vocab import Vocabulary, VocabularyError

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
