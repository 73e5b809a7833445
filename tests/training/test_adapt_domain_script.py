"""``scripts/adapt_domain.py``'s perplexity over a reference vocabulary: for a model whose softmax was only
grown (``grow_vocabulary``: old words keep their probabilities, ``<UNK>`` and the added words share ``<UNK>``'s),
the reference figure must equal the general model's own perplexity, whatever order the grown vocabulary has."""

import importlib.util
from pathlib import Path

import pytest
import torch
from training_helpers import MICRO_CONFIG, write_synthetic_corpus

from elmo.training import Corpus, Vocabulary
from elmo.training.export import grow_vocabulary
from elmo.training.language_model import LanguageModel

SCRIPT = Path(__file__).parents[2] / "scripts" / "adapt_domain.py"
_spec = importlib.util.spec_from_file_location("adapt_domain", SCRIPT)
assert _spec is not None and _spec.loader is not None
adapt_domain = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(adapt_domain)


def test_reference_perplexity_of_a_grown_model_is_the_general_models_own(tmp_path: Path):
    text = write_synthetic_corpus(tmp_path / "text.txt", 60, seed=3)
    counts = Corpus([str(text)]).count_tokens()
    general_vocab = Vocabulary.from_counts(counts, max_size=15)  # the text's rarer words are <UNK> to it
    torch.manual_seed(0)
    general = LanguageModel(MICRO_CONFIG, len(general_vocab))
    with torch.no_grad():
        general.softmax_bias.normal_()
    grown_vocab = general_vocab.adapted_to([token for token, _ in reversed(counts.most_common())])
    assert len(grown_vocab) > len(general_vocab) and grown_vocab.tokens[3:] != general_vocab.tokens[3:]
    grown = grow_vocabulary(general, general_vocab, grown_vocab)

    corpus = Corpus([str(text)])
    own = adapt_domain.perplexities(general, general_vocab, general_vocab, corpus, batch_size=4)
    adapted = adapt_domain.perplexities(grown, grown_vocab, general_vocab, corpus, batch_size=4)
    assert own["reference"] == own["own"]
    assert adapted["targets_beyond_reference"] > 0 and own["targets_beyond_reference"] == 0
    for direction in ("forward", "backward", "average"):
        assert adapted["reference"][direction] == pytest.approx(own["own"][direction], rel=1e-5)
    assert adapted["own"]["average"] != pytest.approx(own["own"]["average"], rel=1e-3)
