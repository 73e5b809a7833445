"""oneDNN's products on reordered weights give F.linear's results, and only run where no gradient is needed; where
PyTorch lacks a private API they use, the public products run and give the same results."""

import copy
import io

import pytest
import torch
import torch.nn.functional as F

from elmo import BiLM, BiLMConfig, batch_to_char_ids, load_bilm
from elmo.modules import prepacked, weight_changes
from elmo.modules.bidirectional import Kernel, pick_kernel, run_directions
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


def test_a_model_cast_away_from_cpu_float32_lets_its_reordered_copies_and_old_weights_go():
    """The cache held the float32 weights (its key) and their reordered copy for the model's life after .half()
    or .to("cuda"): about twice the model's float32 size for nothing."""
    module = torch.nn.Linear(64, 256)
    cache = PrepackedWeight()
    with torch.no_grad():
        linear(torch.randn(3, 64), module.weight, module.bias, cache)
        assert cache.packed is not None
        module.bfloat16()
        inputs = torch.randn(3, 64).bfloat16()
        torch.testing.assert_close(linear(inputs, module.weight, module.bias, cache),
                                   F.linear(inputs, module.weight, module.bias))
    assert cache.packed is None and cache.key is None


def test_an_in_place_update_of_the_weight_is_seen():
    weight, inputs = torch.randn(32, 16), torch.randn(3, 16)
    cache = PrepackedWeight()
    with torch.no_grad():
        before = linear(inputs, weight, None, cache)
        weight.mul_(2.0)
        after = linear(inputs, weight, None, cache)
    torch.testing.assert_close(after, 2.0 * before, rtol=1e-6, atol=1e-6)


def test_a_replaced_weight_never_takes_the_key_of_the_one_it_replaced():
    """A freed tensor's memory goes to the next one of its size, at the same address and update count: two
    ``load_state_dict(assign=True)`` between forwards gave the first weights' reordered copy (0.40 off)."""
    weight, inputs = torch.randn(64, 32), torch.randn(3, 32)
    cache = PrepackedWeight()
    with torch.no_grad():
        linear(inputs, weight, None, cache)
        for _ in range(20):
            del weight
            weight = torch.randn(64, 32)
            torch.testing.assert_close(linear(inputs, weight, None, cache), F.linear(inputs, weight), rtol=1e-6,
                                       atol=1e-5)


@pytest.mark.parametrize("optimizer", ["adam", "adagrad"])
def test_a_fused_optimizers_step_is_seen(optimizer):
    """The fused optimizers update their parameters without counting it in ``_version``: before the fix, every
    validation of an ``elmo train`` run but the first of each process ran on the weights of that first one."""
    layer = torch.nn.Linear(16, 32)
    inputs = torch.randn(3, 16)
    cache = PrepackedWeight()
    make = torch.optim.Adam if optimizer == "adam" else torch.optim.Adagrad
    step = make(layer.parameters(), lr=0.1, fused=True)
    with torch.no_grad():
        linear(inputs, layer.weight, layer.bias, cache)
    layer(inputs).square().sum().backward()
    step.step()
    with torch.no_grad():
        after = linear(inputs, layer.weight, layer.bias, cache)
    torch.testing.assert_close(after, F.linear(inputs, layer.weight, layer.bias).detach(), rtol=1e-6, atol=1e-6)


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


def _fixture_layers(fixture_dir, fixture_sentences) -> tuple[torch.Tensor, BiLM]:
    """Every layer of the fixture's sentences from a fresh copy of its model under no_grad, and the model."""
    bilm = load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")
    with torch.no_grad():
        output, _ = bilm(batch_to_char_ids(fixture_sentences))
    return output.layers, bilm


def _cached_copies(bilm: BiLM) -> list[torch.Tensor | None]:
    """The reordered copy held by every PrepackedWeight of ``bilm`` (None where none was made)."""
    return [cache.packed for module in bilm.modules() for cache in vars(module).values()
            if isinstance(cache, PrepackedWeight)]


def _assert_equal_to_float32_rounding(got: torch.Tensor, expected: torch.Tensor) -> None:
    """Two float32 computations, each within 16 eps of the largest magnitude from the float64 result
    (``tests/test_fast_path_reference.py``), are within 32 eps of each other."""
    tolerance = 32 * torch.finfo(torch.float32).eps * float(expected.abs().max())
    torch.testing.assert_close(got, expected, rtol=0, atol=tolerance)


@pytest.mark.parametrize("module, flag", [(prepacked, "HAS_ONEDNN"), (weight_changes, "HAS_VERSION_COUNTER")])
def test_without_a_private_api_inference_runs_on_public_products_to_float32_rounding(monkeypatch, module, flag,
                                                                                      fixture_dir, fixture_sentences):
    """As on a PyTorch that lacks oneDNN's private operators, or ``Tensor._version``: no copy is made, every
    product is ``F.linear``'s (or Conv1d's, or the blocked step products), and the layers stay the fast path's.
    Measured, for either flag: 6.0e-7 on values up to 7.1 (0.7 eps of it)."""
    fast, fast_bilm = _fixture_layers(fixture_dir, fixture_sentences)
    assert all(copy is not None for copy in _cached_copies(fast_bilm))
    monkeypatch.setattr(module, flag, False)
    fallback, fallback_bilm = _fixture_layers(fixture_dir, fixture_sentences)
    assert all(copy is None for copy in _cached_copies(fallback_bilm))
    _assert_equal_to_float32_rounding(fallback, fast)


def test_without_onednns_private_operators_the_paired_training_kernel_keeps_its_outputs_and_gradients(monkeypatch,
                                                                                                       fixture_dir):
    """The paired kernel's products as batched ``bmm`` instead of oneDNN's, the fixture model's weights doubled so
    that its projection clip fires. Measured: the same outputs, gradients within 9.4 eps of the largest entry."""
    # Its own model: the shared fixture may hold oneDNN's opaque weight copies, which deepcopy cannot copy.
    bilm = load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")
    stacks = [bilm.forward_lstm, bilm.backward_lstm]
    with torch.no_grad():
        for parameter in (p for stack in stacks for p in stack.parameters()):
            parameter.mul_(2.0)
    lstm = bilm.config.lstm
    n_rows, n_steps = 4, 9
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(2, n_rows * n_steps, lstm.projection_dim, generator=generator)
    h0 = torch.zeros(2, lstm.n_layers, n_rows, lstm.projection_dim)
    c0 = torch.zeros(2, lstm.n_layers, n_rows, lstm.dim)
    upstream = torch.randn(inputs.shape, generator=generator)

    def outputs_and_gradients():
        leaf = inputs.clone().requires_grad_()
        assert pick_kernel(stacks[0], leaf, [n_rows] * n_steps, None) is Kernel.PAIRED
        layers = run_directions(*stacks, leaf, [n_rows] * n_steps, h0, c0).layers
        assert (layers[0].abs() == lstm.proj_clip).any()  # clipped values (layers >= 1 add their input)
        top = layers[-1]
        return [top.detach(), *torch.autograd.grad((top * upstream).sum(), [leaf, *stacks[0].parameters()])]

    fast = outputs_and_gradients()
    monkeypatch.setattr(prepacked, "HAS_ONEDNN", False)
    assert not prepacked.can_reorder(inputs)
    for got, expected in zip(outputs_and_gradients(), fast, strict=True):
        _assert_equal_to_float32_rounding(got, expected)


def test_a_used_bilm_can_be_deep_copied_and_pickled_and_the_copies_give_its_layers(fixture_dir, fixture_sentences):
    """oneDNN's reordered tensors can be neither copied nor pickled: copies start without them."""
    layers, bilm = _fixture_layers(fixture_dir, fixture_sentences)
    assert any(packed is not None for packed in _cached_copies(bilm))
    buffer = io.BytesIO()
    torch.save(bilm, buffer)
    buffer.seek(0)
    for copied in (copy.deepcopy(bilm), torch.load(buffer, weights_only=False)):
        assert all(packed is None for packed in _cached_copies(copied))
        with torch.no_grad():
            torch.testing.assert_close(copied(batch_to_char_ids(fixture_sentences))[0].layers, layers, rtol=0, atol=0)
