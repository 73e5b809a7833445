import numpy as np
import pytest
import torch

from elmo.modules.scalar_mix import ScalarMix


def _layers_and_mask():
    generator = torch.Generator().manual_seed(0)
    layers = torch.randn(3, 2, 4, 5, generator=generator, dtype=torch.float64)
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    return layers, mask


def test_mix_and_its_gradients_equal_the_hand_computation():
    layers, _ = _layers_and_mask()
    s, gamma = [0.3, -0.2, 1.1], 1.7
    mix = ScalarMix(3, s, gamma).double()
    output = mix(layers)

    s, gamma = mix.scalars.detach().numpy(), mix.gamma.item()  # the float32-rounded values it holds
    w = np.exp(s) / np.exp(s).sum()
    h = layers.numpy()
    expected = gamma * (w[0] * h[0] + w[1] * h[1] + w[2] * h[2])
    np.testing.assert_allclose(output.detach().numpy(), expected, rtol=1e-12, atol=1e-12)

    output.sum().backward()
    # d/dgamma sum(out) = sum_j w_j sum(h_j);  d/ds_k = gamma * w_k * (sum(h_k) - sum_j w_j sum(h_j))
    totals = h.reshape(3, -1).sum(axis=1)
    mixed_total = (w * totals).sum()
    np.testing.assert_allclose(mix.gamma.grad.item(), mixed_total, rtol=1e-12)
    np.testing.assert_allclose(mix.scalars.grad.numpy(), gamma * w * (totals - mixed_total), rtol=1e-10)


def test_layer_norm_uses_only_the_unmasked_tokens():
    layers, mask = _layers_and_mask()
    layers_with_junk = layers.clone()
    layers_with_junk[:, ~mask] = 1e6  # padding must not move the statistics
    mix = ScalarMix(3, layer_norm=True).double()
    output = mix(layers_with_junk, mask)
    h = layers.numpy()
    expected = np.zeros_like(h[0])
    for j in range(3):
        real = h[j][mask.numpy()]
        expected += (h[j] - real.mean()) / np.sqrt(real.var() + 1e-12) / 3
    np.testing.assert_allclose(output.detach().numpy()[mask.numpy()], expected[mask.numpy()], rtol=1e-9)
    assert (output[~mask] == 0).all()  # padding comes out as zeros, as AllenNLP's Elmo returned it


def test_layer_norm_of_a_batch_without_real_tokens_is_zeros_not_nan():
    layers, mask = _layers_and_mask()
    output = ScalarMix(3, layer_norm=True).double()(layers, torch.zeros_like(mask))
    assert (output == 0).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_layer_norm_in_half_precision_equals_float32_within_its_rounding(dtype):
    generator = torch.Generator().manual_seed(0)
    layers = torch.randn(3, 4, 30, 1024, generator=generator) * 3 + 1  # 120 tokens x 1,024 > float16's 65,504
    mask = torch.ones(4, 30, dtype=torch.bool)
    mask[1, 20:] = False
    mix = ScalarMix(3, layer_norm=True)
    expected = mix(layers, mask)
    output = mix(layers.to(dtype), mask)
    assert output.dtype == dtype
    tolerance = 1e-2 if dtype == torch.float16 else 6e-2  # bfloat16 keeps 8 bits of mantissa
    np.testing.assert_allclose(output.float().detach().numpy(), expected.detach().numpy(), atol=tolerance)


def test_untrainable_mix_gets_no_gradient_and_wrong_sizes_are_refused():
    layers, _ = _layers_and_mask()
    mix = ScalarMix(3, [0.0, 0.0, 1.0], trainable=False).double()
    assert not any(p.requires_grad for p in mix.parameters())
    with pytest.raises(ValueError, match="got 2 layers; this mix has 3"):
        mix(layers[:2])
    with pytest.raises(ValueError, match="initial_scalars has 2 values"):
        ScalarMix(3, [0.0, 1.0])
    whole = ScalarMix(3, [0, 0, 1])  # whole numbers, as AllenNLP takes them, are the same weights
    torch.testing.assert_close(whole(layers.float()), ScalarMix(3, [0.0, 0.0, 1.0])(layers.float()))


def test_regularization_is_l2_times_the_squared_distance_from_an_even_average_and_its_gradient():
    s = [0.3, -0.2, 1.1]
    mix = ScalarMix(3, s, l2=1e-3).double()
    term = mix.regularization()
    w = np.exp(mix.scalars.detach().numpy())
    w /= w.sum()
    np.testing.assert_allclose(term.item(), 1e-3 * ((w - 1 / 3) ** 2).sum(), rtol=1e-12)
    term.backward()
    # d/ds_k sum_j (w_j - 1/3)^2 = sum_j 2 (w_j - 1/3) w_j (delta_jk - w_k)
    d = 2 * (w - 1 / 3)
    np.testing.assert_allclose(mix.scalars.grad.numpy(), 1e-3 * w * (d - (d * w).sum()), rtol=1e-10)
    assert ScalarMix(3, s).regularization().item() == 0.0  # l2 defaults to 0
    assert ScalarMix(3, s, trainable=False, l2=1.0).regularization().item() == 0.0  # fixed weights: nothing to pull
