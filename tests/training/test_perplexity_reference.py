"""``evaluate``'s perplexities against a float64 computation that shares only the weights with it: the
NumPy biLM of ``float64_reference.py`` reads each direction's whole token stream in one pass from a zero
state (as ``evaluate`` reads it in batches, carrying the state from batch to batch), and a plain softmax
scores every target over the whole vocabulary."""

from pathlib import Path

import numpy as np
import pytest
import torch
from float64_reference import Reference
from training_helpers import MICRO_CONFIG

from elmo.characters import BOS_TOKEN, EOS_TOKEN
from elmo.training.corpus import Corpus
from elmo.training.language_model import LanguageModel, initialize_like_bilm_tf
from elmo.training.perplexity import evaluate
from elmo.training.vocab import UNK_TOKEN, Vocabulary
from elmo.weights import save_bilm

# Sentences of 1 to 12 tokens, so 4-step batches end inside sentences and between them; "zebra" is left out
# of the vocabulary, so an <UNK> target is scored too.
LINES = ["the cat sees the dog .", "a bird", "the old horse follows the small red fish in the river .",
         "zebra", "the teacher likes the city ."]


def _model(tmp_path: Path) -> tuple[LanguageModel, Vocabulary, Reference]:
    """A micro language model with weights large enough that the state carries far, and the float64 reference
    of its biLM (written in the published layout, read back)."""
    words = sorted({word for line in LINES for word in line.split()} - {"zebra"})
    vocab = Vocabulary([BOS_TOKEN, EOS_TOKEN, UNK_TOKEN, *words])
    torch.manual_seed(0)
    model = LanguageModel(MICRO_CONFIG, len(vocab))
    initialize_like_bilm_tf(model)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.3)
    save_bilm(model.bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")  # float32, as the model holds
    reference = Reference.from_files(tmp_path / "options.json", tmp_path / "weights.hdf5")
    return model, vocab, reference


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    return path


def _stream_nlls(model: LanguageModel, vocab: Vocabulary, reference: Reference, direction: int) -> np.ndarray:
    """Every target's negative log-likelihood in one direction, its LSTM stack reading the whole stream in one
    pass from a zero state. Forward the stream reads ``<S> w1 .. wn`` for each sentence in turn and predicts
    ``w1 .. wn </S>``; backward it reads ``</S> wn .. w1`` and predicts ``wn .. w1 <S>``. The sentences follow
    each other in one stream, so the state carries from one to the next, as bilm-tf's does."""
    start, end = (BOS_TOKEN, EOS_TOKEN) if direction == 0 else (EOS_TOKEN, BOS_TOKEN)
    inputs, targets = [], []
    for line in LINES:
        words = line.split() if direction == 0 else line.split()[::-1]
        inputs += [start, *words]
        targets += [*words, end]
    lstm = reference.lstm
    zero = [(np.zeros(lstm["projection_dim"]), np.zeros(lstm["dim"])) for _ in range(lstm["n_layers"])]
    vectors = {token: reference.token_vector(token) for token in set(inputs)}
    layers, _ = reference.run_direction([vectors[token] for token in inputs], direction, zero)
    weight = model.softmax_weight.detach().double().numpy()
    bias = model.softmax_bias.detach().double().numpy()
    logits = np.array(layers[-1]) @ weight.T + bias  # (steps, vocabulary)
    largest = logits.max(axis=1)
    log_normalizers = np.log(np.exp(logits - largest[:, None]).sum(axis=1)) + largest
    target_ids = [vocab.token_id(token) for token in targets]
    return log_normalizers - logits[np.arange(len(targets)), target_ids]


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float64, 1e-9), (torch.float32, 1e-6)])
def test_evaluate_equals_a_float64_full_softmax_over_the_state_carrying_token_stream(tmp_path: Path,
                                                                                    dtype: torch.dtype,
                                                                                    tolerance: float):
    model, vocab, reference = _model(tmp_path)
    model = model.to(dtype)  # the same values: the float32 weights, widened or not
    forward_nlls, backward_nlls = (_stream_nlls(model, vocab, reference, direction) for direction in (0, 1))
    n_targets = sum(len(line.split()) + 1 for line in LINES)
    assert len(forward_nlls) == len(backward_nlls) == n_targets

    figures = evaluate(model, Corpus([str(_corpus(tmp_path))]), vocab, batch_size=1, unroll_steps=4)
    assert figures.n_tokens == n_targets
    words = [word for line in LINES for word in line.split()]
    assert figures.n_unknown == sum(vocab.token_id(word) == vocab.unk_id for word in words) == 1
    assert figures.forward == pytest.approx(np.exp(forward_nlls.mean()), rel=tolerance)
    assert figures.backward == pytest.approx(np.exp(backward_nlls.mean()), rel=tolerance)
    # documented: exp of the mean of both directions' losses, the geometric mean of the two perplexities
    all_nlls = np.concatenate([forward_nlls, backward_nlls])
    assert figures.average == pytest.approx(np.exp(all_nlls.mean()), rel=tolerance)
    assert figures.average == pytest.approx(np.sqrt(figures.forward * figures.backward), rel=1e-12)
