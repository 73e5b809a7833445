import json

import numpy as np
import pytest
import torch

from elmo import batch_to_char_ids
from elmo.task_module import Elmo


@pytest.fixture
def char_ids(fixture_dir):
    sentences = json.loads((fixture_dir / "sentences.json").read_text())[0][:4]
    return batch_to_char_ids([s.split() for s in sentences])


def test_each_mix_is_gamma_times_softmax_weighted_layers(fixture_dir, char_ids):
    elmo = Elmo.from_model(str(fixture_dir), n_mixes=2, dropout=0.0)
    with torch.no_grad():
        elmo.mixes[1].scalars.copy_(torch.tensor([1.0, 0.0, -1.0]))
        elmo.mixes[1].gamma.fill_(0.5)
        result = elmo(char_ids)
        layers = elmo.bilm(char_ids)[0].layers
    assert len(result.mixes) == 2
    np.testing.assert_allclose(result.mixes[0].numpy(), layers.mean(0).numpy(), atol=1e-6)
    w = torch.softmax(torch.tensor([1.0, 0.0, -1.0]), 0)
    expected = 0.5 * torch.einsum("l,lbtd->btd", w, layers)
    np.testing.assert_allclose(result.mixes[1].numpy(), expected.numpy(), atol=1e-6)
    assert torch.equal(result.mask, (char_ids > 0).any(-1))


def test_frozen_bilm_gets_no_gradient_but_the_mix_does(fixture_dir, char_ids):
    elmo = Elmo.from_model(str(fixture_dir)).train()
    assert not elmo.bilm.training  # a frozen biLM stays in eval mode
    elmo(char_ids).mixes[0].sum().backward()
    assert all(p.grad is None for p in elmo.bilm.parameters())
    assert elmo.mixes[0].scalars.grad is not None and elmo.mixes[0].scalars.grad.abs().sum() > 0


def test_fine_tuning_lets_gradients_reach_the_bilm(fixture_dir, char_ids):
    elmo = Elmo.from_model(str(fixture_dir), fine_tune=True, dropout=0.0)
    elmo(char_ids).mixes[0].sum().backward()
    assert elmo.bilm.token_encoder.char_embeddings.grad.abs().sum() > 0
    assert elmo.bilm.forward_lstm.layers[1].recurrent_weight.grad.abs().sum() > 0


def test_fixed_weights_are_used_as_given_and_not_trained(fixture_dir, char_ids):
    elmo = Elmo.from_model(str(fixture_dir), fixed_weights=[0.0, 1.0, 3.0], dropout=0.0)
    assert not any(p.requires_grad for p in elmo.parameters())
    with torch.no_grad():
        mixed = elmo(char_ids).mixes[0]
        layers = elmo.bilm(char_ids)[0].layers
    np.testing.assert_allclose(mixed.numpy(), (0.25 * layers[1] + 0.75 * layers[2]).numpy(), atol=1e-6)
    for weights in ([1.0, -1.0, 1.0], [float("nan"), 1.0, 1.0], [float("inf"), 1.0, 1.0]):  # NaN made every mix NaN
        with pytest.raises(ValueError, match="fixed_weights must be 3 finite non-negative"):
            Elmo.from_model(str(fixture_dir), fixed_weights=weights)


def test_regularization_sums_each_learned_mix_term(fixture_dir):
    elmo = Elmo.from_model(str(fixture_dir), n_mixes=2, mix_l2=0.5)
    with torch.no_grad():
        elmo.mixes[0].scalars.copy_(torch.tensor([1.0, 0.0, -1.0]))
        elmo.mixes[1].scalars.copy_(torch.tensor([0.0, 2.0, 0.0]))
    expected = sum(0.5 * ((torch.softmax(mix.scalars.detach(), 0) - 1 / 3) ** 2).sum() for mix in elmo.mixes)
    assert torch.isclose(elmo.regularization(), expected, rtol=1e-6) and expected > 0
    assert Elmo.from_model(str(fixture_dir)).regularization().item() == 0.0  # mix_l2 defaults to 0


def test_dropout_applies_in_training_only(fixture_dir, char_ids):
    elmo = Elmo.from_model(str(fixture_dir), dropout=0.5)
    with torch.no_grad():
        evaluated = elmo.eval()(char_ids).mixes[0]
        trained = elmo.train()(char_ids).mixes[0]
    dropped = (trained == 0) & (evaluated != 0)
    assert 0.3 < dropped.float().sum() / (evaluated != 0).float().sum() < 0.7
    kept = trained != 0
    np.testing.assert_allclose(trained[kept].numpy(), 2 * evaluated[kept].numpy(), rtol=1e-5)


@pytest.mark.parametrize("flag", ["layer_norm", "fine_tune", "keep_boundaries"])
def test_a_flag_that_is_not_true_or_false_is_refused_not_read_as_true(fixture_dir, flag):
    """layer_norm="no" switched layer norm on, keep_boundaries=["x"] kept the boundaries."""
    with pytest.raises(TypeError, match=rf"{flag} is 'no'; expected True or False"):
        Elmo.from_model(str(fixture_dir), **{flag: "no"})
