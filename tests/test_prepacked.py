"""oneDNN's products on reordered weights give F.linear's results, and only run where no gradient is needed."""

import pytest
import torch
import torch.nn.functional as F

from elmo import BiLM, BiLMConfig, batch_to_char_ids
from elmo.modules.prepacked import HAS_ONEDNN, PrepackedWeight, linear

pytestmark = pytest.mark.skipif(not HAS_ONEDNN, reason="this PyTorch build has no oneDNN")


@pytest.mark.parametrize(("rows", "n_in", "n_out"), [(1, 64, 256), (7, 128, 1024), (300, 96, 40), (32, 512, 2048)])
def test_the_reordered_product_equals_linear_in_float64_to_float32_rounding(rows, n_in, n_out):
    torch.manual_seed(rows)
    inputs, weight, bias = torch.randn(rows, n_in), torch.randn(n_out, n_in), torch.randn(n_out)
    expected = F.linear(inputs.double(), weight.double(), bias.double())
    cache = PrepackedWeight()
    with torch.no_grad():
        got = linear(inputs, weight, bias, cache)
    assert cache.key is not None  # it ran from the reordered copy
    scale = float(inputs.abs().max() * weight.abs().max()) * n_in
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=1e-6 * scale)
    torch.testing.assert_close(got, F.linear(inputs, weight, bias), rtol=0, atol=1e-6 * scale)


def test_with_a_gradient_wanted_it_is_f_linear_with_its_gradients():
    weight = torch.randn(16, 8, requires_grad=True)
    inputs = torch.randn(4, 8)
    cache = PrepackedWeight()
    output = linear(inputs, weight, None, cache)
    assert cache.key is None
    output.sum().backward()
    torch.testing.assert_close(weight.grad, inputs.sum(0).expand(16, 8))
    frozen = weight.detach()
    assert linear(inputs, frozen, None, cache).requires_grad is False
    assert cache.key is not None  # a frozen weight with inputs needing no gradient: reordered, grad mode or not
    assert linear(inputs.requires_grad_(), frozen, None, PrepackedWeight()).requires_grad  # inputs need one


def test_an_in_place_update_of_the_weight_is_seen():
    weight, inputs = torch.randn(32, 16), torch.randn(3, 16)
    cache = PrepackedWeight()
    with torch.no_grad():
        before = linear(inputs, weight, None, cache)
        weight.mul_(2.0)
        after = linear(inputs, weight, None, cache)
    torch.testing.assert_close(after, 2.0 * before, rtol=1e-6, atol=1e-6)


def test_the_bilm_under_no_grad_equals_the_bilm_with_autograd():
    """The whole model: reordered weights everywhere (no_grad) against F.linear and block products (autograd)."""
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig.preset("small"))
    with torch.no_grad():
        for parameter in bilm.parameters():
            parameter.normal_(0.0, 0.05)
    char_ids = batch_to_char_ids([["The", "bank", "of", "the", "river", "."], ["Money", "talks"] * 9, ["A"]])
    with torch.no_grad():
        fast, _ = bilm(char_ids)
    plain, _ = bilm(char_ids)
    assert bilm.forward_lstm.layers[1]._prepacked_recurrent.key is not None
    assert bilm.token_encoder.highways[0]._prepacked_carry.key is not None
    torch.testing.assert_close(fast.layers, plain.layers.detach(), rtol=0, atol=1e-5)


def test_the_filters_as_one_product_equal_conv1d_and_follow_a_changed_filter():
    """Every width of filter (1 to 7 here) over 50 characters; the narrow ones must skip the windows past the end.
    700 tokens: several passes of 256 tokens, each in blocks of 32, against one Conv1d pass over all."""
    torch.manual_seed(1)
    encoder = BiLM(BiLMConfig.preset("small")).token_encoder
    words = ["a", "bank", "Flussufer", "小米手机", "x" * 60, "", "antidisestablishmentarianism"] * 100
    char_ids = batch_to_char_ids([words])[0]
    for _ in range(2):  # the second round after an in-place change to one filter, which must repack the weight
        with torch.no_grad():
            fast = encoder(char_ids)
        assert encoder._prepacked_filters.key is not None
        plain = encoder(char_ids)  # autograd on: Conv1d
        torch.testing.assert_close(fast, plain.detach(), rtol=0, atol=1e-5)
        with torch.no_grad():
            encoder.convolutions[0].weight.mul_(-3.0)
