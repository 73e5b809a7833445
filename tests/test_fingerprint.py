"""A model's fingerprint: equal for the same options and weights however they reach memory, different when any
weight or option differs, and so different for two models of one shape."""

import dataclasses
from pathlib import Path

import pytest
import torch

from elmo import BiLM, load_bilm, save_bilm
from elmo.embedder import Embedder
from elmo.fingerprint import model_fingerprint


def _random_bilm(config, seed: int) -> BiLM:
    torch.manual_seed(seed)
    return BiLM(config).eval()


def _copy(bilm: BiLM) -> BiLM:
    """A copy by its state dict (deepcopy cannot copy the oneDNN weight copies a used model may hold)."""
    copied = BiLM(bilm.config).eval()
    copied.load_state_dict(bilm.state_dict())
    return copied


def test_the_same_weights_give_the_same_fingerprint_after_a_save_and_load(fixture_bilm: BiLM, tmp_path: Path):
    save_bilm(fixture_bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    reloaded = load_bilm(tmp_path / "options.json", tmp_path / "weights.hdf5")
    fingerprint = model_fingerprint(fixture_bilm)
    assert len(fingerprint) == 64 and int(fingerprint, 16) >= 0
    assert model_fingerprint(reloaded) == fingerprint == model_fingerprint(_copy(fixture_bilm))
    assert Embedder(reloaded).fingerprint == fingerprint


def test_two_models_of_one_shape_differ(fixture_bilm: BiLM):
    first, second = _random_bilm(fixture_bilm.config, 0), _random_bilm(fixture_bilm.config, 1)
    assert first.config == second.config
    assert model_fingerprint(first) != model_fingerprint(second)
    assert model_fingerprint(first) == model_fingerprint(_random_bilm(fixture_bilm.config, 0))


def test_one_changed_weight_changes_it(fixture_bilm: BiLM):
    changed = _copy(fixture_bilm)
    before = model_fingerprint(changed)
    name, tensor = sorted(changed.state_dict().items())[-1]
    with torch.no_grad():
        tensor.view(-1)[0] += 1e-6
    assert model_fingerprint(changed) != before, name


@pytest.mark.parametrize("field", ["cell_clip", "proj_clip"])
def test_an_option_that_changes_no_weight_shape_changes_it(fixture_bilm: BiLM, field: str):
    lstm = dataclasses.replace(fixture_bilm.config.lstm, **{field: getattr(fixture_bilm.config.lstm, field) + 1.0})
    other = BiLM(dataclasses.replace(fixture_bilm.config, lstm=lstm)).eval()
    other.load_state_dict(fixture_bilm.state_dict())
    assert model_fingerprint(other) != model_fingerprint(fixture_bilm)


def test_n_characters_261_and_262_name_one_model(fixture_bilm: BiLM):
    """bilm-tf writes either for the same character scheme; the model computes the same with both."""
    other_count = 261 if fixture_bilm.config.char_cnn.n_characters == 262 else 262
    char_cnn = dataclasses.replace(fixture_bilm.config.char_cnn, n_characters=other_count)
    other = BiLM(dataclasses.replace(fixture_bilm.config, char_cnn=char_cnn)).eval()
    other.load_state_dict(fixture_bilm.state_dict())
    ids = torch.randint(1, 262, (2, 5, fixture_bilm.config.char_cnn.max_characters_per_token))
    with torch.no_grad():
        torch.testing.assert_close(other(ids)[0].layers, fixture_bilm(ids)[0].layers, rtol=0, atol=0)
    assert model_fingerprint(other) == model_fingerprint(fixture_bilm)
