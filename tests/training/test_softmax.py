import math

import pytest
import torch
import torch.nn.functional as F

from elmo.training.softmax import (
    Candidates,
    full_softmax_nll,
    sample_log_uniform,
    sampled_softmax_nll,
)


def _problem(n_positions: int = 12, vocab_size: int = 30, dim: int = 7):
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(n_positions, dim, generator=generator, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(vocab_size, dim, generator=generator, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(vocab_size, generator=generator, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, vocab_size, (n_positions,), generator=generator)
    return hidden, weight, bias, targets


def test_sampled_softmax_equals_full_softmax_and_its_gradients_when_every_class_is_sampled():
    hidden, weight, bias, targets = _problem()
    candidates = sample_log_uniform(64, 30, torch.Generator().manual_seed(1))  # 64 >= 30: all classes, surely
    assert candidates.n_tries == 0 and torch.equal(candidates.ids, torch.arange(30))

    sampled = sampled_softmax_nll(hidden, targets, weight, bias, candidates)
    sampled_gradients = torch.autograd.grad(sampled.sum(), (hidden, weight, bias))
    full = full_softmax_nll(hidden, targets, weight, bias)
    full_gradients = torch.autograd.grad(full.sum(), (hidden, weight, bias))

    torch.testing.assert_close(sampled, full, rtol=1e-12, atol=1e-12)
    for got, expected in zip(sampled_gradients, full_gradients, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    # An independent check of the full loss itself: -log softmax at the target.
    logits = hidden @ weight.T + bias
    manual = -(logits.gather(1, targets[:, None]).squeeze(1) - torch.logsumexp(logits, 1))
    torch.testing.assert_close(full, manual)


def test_sampled_softmax_matches_its_definition_with_accidental_hits_removed():
    hidden, weight, bias, targets = _problem()
    candidates = sample_log_uniform(8, 30, torch.Generator().manual_seed(2))
    got = sampled_softmax_nll(hidden, targets, weight, bias, candidates)
    got, hidden, weight, bias = got.detach(), hidden.detach(), weight.detach(), bias.detach()
    p = lambda k: (math.log(k + 2) - math.log(k + 1)) / math.log(31)  # noqa: E731
    expected_count = lambda k: 1 - (1 - p(k)) ** candidates.n_tries  # noqa: E731
    for row in range(len(targets)):
        target = int(targets[row])
        true = float(hidden[row] @ weight[target] + bias[target]) - math.log(expected_count(target))
        terms = [true] + [float(hidden[row] @ weight[k] + bias[k]) - math.log(expected_count(k))
                          for k in candidates.ids.tolist() if k != target]
        assert math.isclose(float(got[row]), math.log(sum(math.exp(t) for t in terms)) - true, rel_tol=1e-5)


def test_log_uniform_sampler_draws_classes_with_zipf_probabilities():
    vocab_size, n_draws = 50, 20000
    generator = torch.Generator().manual_seed(3)
    counts = torch.zeros(vocab_size)
    for _ in range(n_draws):  # one distinct class = exactly one draw
        candidates = sample_log_uniform(1, vocab_size, generator)
        assert candidates.n_tries == 1
        counts[candidates.ids] += 1
    k = torch.arange(vocab_size, dtype=torch.float64)
    zipf = ((torch.log(k + 2) - torch.log(k + 1)) / math.log(vocab_size + 1)).float()
    torch.testing.assert_close(counts / n_draws, zipf, atol=0.01, rtol=0.0)
    # With one try and no repeat, the reported expected count is p itself.
    torch.testing.assert_close(candidates.log_expected_count(torch.arange(vocab_size)).exp(), zipf)


def test_log_uniform_sampler_returns_distinct_classes_in_first_draw_order():
    generator = torch.Generator().manual_seed(4)
    for _ in range(50):
        candidates = sample_log_uniform(20, 100, generator)
        assert len(set(candidates.ids.tolist())) == 20
        assert candidates.n_tries >= 20
        assert int(candidates.ids.min()) >= 0 and int(candidates.ids.max()) < 100


def test_candidates_without_repeats_report_n_times_p_as_tensorflow_does():
    candidates = Candidates(torch.tensor([0, 5, 9]), n_tries=3, vocab_size=100)
    p5 = (math.log(7) - math.log(6)) / math.log(101)
    assert math.isclose(float(candidates.log_expected_count(torch.tensor([5]))), math.log(3 * p5), rel_tol=1e-6)


def test_the_full_softmax_in_blocks_of_positions_equals_it_at_once(monkeypatch: pytest.MonkeyPatch):
    """Blocks of 7 positions (the last one short) against the whole batch in one product, and no positions at all."""
    import elmo.training.softmax as softmax

    hidden, weight, bias, targets = _problem()
    whole = F.cross_entropy(F.linear(hidden, weight, bias), targets, reduction="none")
    monkeypatch.setattr(softmax, "_FULL_SOFTMAX_BLOCK_BYTES", 7 * len(weight) * hidden.element_size())
    blocked = full_softmax_nll(hidden, targets, weight, bias)
    torch.testing.assert_close(blocked, whole, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(torch.autograd.grad(blocked.sum(), hidden)[0],
                               torch.autograd.grad(whole.sum(), hidden)[0], rtol=1e-12, atol=1e-12)
    assert full_softmax_nll(hidden[:0], targets[:0], weight, bias).shape == (0,)
