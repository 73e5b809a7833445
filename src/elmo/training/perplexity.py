"""Held-out perplexity: the language model's with the full softmax (``elmo perplexity``, validation during
training), and the add-one unigram floor it has to beat."""

import math
from collections import Counter
from dataclasses import dataclass

import torch

from elmo.training.batches import Batcher
from elmo.training.corpus import Corpus
from elmo.training.language_model import LanguageModel
from elmo.training.vocab import Vocabulary

# Above this share of <UNK> targets a perplexity flatters the model: one class stands for every word the vocabulary
# lacks, so text it does not cover (another language, another tokenizer's splits) scores as easy text.
UNKNOWN_NOTED = 0.10


@dataclass
class Perplexities:
    forward: float
    backward: float
    average: float
    n_tokens: int
    n_unknown: int  # of the n_tokens targets, those the vocabulary maps to <UNK>

    @property
    def unknown_share(self) -> float:
        return self.n_unknown / self.n_tokens

    def unknown_note(self) -> str | None:
        """A warning when the share of ``<UNK>`` targets passes ``UNKNOWN_NOTED``, else None."""
        if self.unknown_share <= UNKNOWN_NOTED:
            return None
        return (f"{self.unknown_share:.1%} of the {self.n_tokens:,} tokens are <UNK> to the model's vocabulary, each "
                "scored as that one class: the perplexity flatters the model on this text (another language, or "
                "text split by another tokenizer?)")


def evaluate(model: LanguageModel, corpus: Corpus, vocab: Vocabulary, batch_size: int = 32,
             unroll_steps: int = 20, device: torch.device | None = None) -> Perplexities:
    """Full-softmax perplexity of every token of ``corpus``; ``average`` is ``exp`` of the mean of both
    directions' losses (bilm-tf's figure), the geometric mean of the two perplexities. Each ``<UNK>`` target is
    scored as that class (bilm-tf's rule), and ``n_unknown`` counts them."""
    device = device or torch.device("cpu")
    batcher = Batcher(corpus, vocab, range(batch_size), batch_size, unroll_steps, seed=0, max_epochs=1,
                      max_characters=model.config.char_cnn.max_characters_per_token, pad=True)
    was_training = model.training
    model.eval()
    state = model.bilm.zero_state(batch_size)
    nll_sums = torch.zeros(2, dtype=torch.float64)
    n_tokens = n_unknown = 0
    with torch.no_grad():
        while (inputs := batcher.next_batch()) is not None:
            output = model(inputs.to(device), state)
            nll_sums += output.nll_sums.double().cpu()
            n_tokens += output.n_targets
            n_unknown += int((inputs.forward_targets == vocab.unk_id).sum())
            state = output.state
    batcher.close()
    model.train(was_training)
    if n_tokens == 0:
        raise ValueError("the evaluation corpus holds no tokens")
    forward, backward = (nll_sums / n_tokens).tolist()
    return Perplexities(perplexity_of(forward), perplexity_of(backward), perplexity_of((forward + backward) / 2),
                        n_tokens, n_unknown)


def perplexity_of(mean_nll: float) -> float:
    """``math.exp`` of a mean negative log-likelihood, but ``inf`` where it would raise ``OverflowError`` (a
    diverging run's loss passes 709)."""
    try:
        return math.exp(mean_nll)
    except OverflowError:
        return math.inf


def unigram_perplexity(train_corpus: Corpus, eval_corpus: Corpus, vocab: Vocabulary) -> float:
    """Add-one unigram perplexity over the forward targets (words mapped by the vocabulary, then </S>): the
    floor a biLM has to beat on the same text."""
    counts: Counter[int] = Counter()
    for sentence in train_corpus.sentences():
        counts.update(vocab.token_id(token) for token in sentence)
        counts[vocab.eos_id] += 1
    total = sum(counts.values()) + len(vocab)
    nll, n_targets = 0.0, 0
    for sentence in eval_corpus.sentences():
        for target in [*(vocab.token_id(token) for token in sentence), vocab.eos_id]:
            nll -= math.log((counts[target] + 1) / total)
            n_targets += 1
    return math.exp(nll / n_targets)
