"""TokenFeatures: the biLM it fine-tunes runs through the public ``Elmo`` layer; the result equals the biLM's own
layers gathered per token and mixed by hand, and task models saved in the earlier layout still load."""

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from elmo.characters import batch_to_char_ids
from elmo.model_dir import ModelDir
from elmo.tasks.inputs import Batch, TokenFeatures
from elmo.tasks.spec import TaskSpec

WORDS = [["北京", "很", "大"], ["我", "在", "上海", "住"]]
# Each token (a character) takes its word's vector, as the character taggers read jieba words.
WORD_INDEX = [[0, 0, 1, 2, 0], [0, 1, 2, 2, 3]]


def _batch() -> Batch:
    word_index = torch.tensor(WORD_INDEX)
    mask = torch.tensor([[True, True, True, True, False], [True] * 5])
    return Batch(None, None, None, mask, mask.sum(1), torch.zeros(2, 5, dtype=torch.long),
                 [list(words) for words in WORDS], word_index)


def _features(fixture_dir, elmo) -> TokenFeatures:
    bilm = ModelDir.find(str(fixture_dir)).load_bilm()
    return TokenFeatures(elmo, bilm.config.n_output_layers, bilm.config.output_dim, dropout=0.0, mix_l2=0.25,
                         bilm=bilm).double()


def test_fine_tuned_features_equal_the_layers_gathered_per_token_and_mixed_by_hand(fixture_dir):
    features = _features(fixture_dir, "mix")
    mix = features.learned_mix()
    with torch.no_grad():
        mix.scalars.copy_(torch.tensor([0.5, -1.0, 2.0]))
        mix.gamma.fill_(1.5)
    features.eval()
    batch = _batch()
    vectors = features(batch)

    with torch.no_grad():
        layers = features.elmo_layer.bilm(batch_to_char_ids(WORDS))[0].layers.numpy()  # (L, B, W, D)
    w = np.exp([0.5, -1.0, 2.0])
    w /= w.sum()
    expected = np.stack([1.5 * np.einsum("l,ltd->td", w, layers[:, row, WORD_INDEX[row]]) for row in range(2)])
    np.testing.assert_allclose(vectors.detach().numpy(), expected, rtol=1e-10, atol=1e-12)

    vectors.sum().backward()  # fine-tuning: gradients reach the biLM and the mix
    assert features.elmo_layer.bilm.token_encoder.char_embeddings.grad.abs().sum() > 0
    assert mix.scalars.grad.abs().sum() > 0
    np.testing.assert_allclose(features.regularization().item(), 0.25 * ((w - 1 / 3) ** 2).sum(), rtol=1e-6)
    assert features.mix_weights() == pytest.approx(w.tolist(), rel=1e-6)


def test_fine_tuned_top_layer_is_the_last_layer_gathered_and_carries_no_mix(fixture_dir):
    features = _features(fixture_dir, "top").eval()
    batch = _batch()
    with torch.no_grad():
        vectors = features(batch).numpy()
        top = features.elmo_layer.bilm(batch_to_char_ids(WORDS))[0].layers[-1].numpy()
    np.testing.assert_array_equal(vectors, np.stack([top[row, WORD_INDEX[row]] for row in range(2)]))
    assert features.mix_weights() is None and features.regularization().item() == 0.0


def test_fine_tuned_features_read_words_at_the_models_own_character_width(fixture_dir):
    """A model of ``max_characters_per_token`` 4 (its biLM refuses ids of another width) cuts 北京 (6 UTF-8
    bytes) as its frozen features do; fine-tuning made ids 50 wide, and stopped."""
    import dataclasses

    from elmo import BiLM

    config = ModelDir.find(str(fixture_dir)).load_bilm().config
    narrow_config = dataclasses.replace(config, char_cnn=dataclasses.replace(
        config.char_cnn, max_characters_per_token=4, filters=[(1, 8), (2, 8)]))
    torch.manual_seed(0)
    narrow = BiLM(narrow_config)
    features = TokenFeatures("top", narrow_config.n_output_layers, narrow_config.output_dim, dropout=0.0,
                             bilm=narrow).double().eval()
    with torch.no_grad():
        vectors = features(_batch()).numpy()
        top = features.elmo_layer.bilm(batch_to_char_ids(WORDS, 4))[0].layers[-1].numpy()
    np.testing.assert_array_equal(vectors, np.stack([top[row, WORD_INDEX[row]] for row in range(2)]))


@pytest.mark.parametrize("elmo", ["mix", "top"])
def test_a_fine_tuned_model_saved_in_the_earlier_layout_loads_with_the_same_weights(tmp_path, fixture_dir, elmo):
    bilm = ModelDir.find(str(fixture_dir)).load_bilm()
    spec = TaskSpec("tagger", ("O", "B-LOC"), elmo, str(fixture_dir), bilm.config.n_output_layers,
                    bilm.config.output_dim, fine_tune=True)
    model = spec.build()
    with torch.no_grad():  # weights that differ from the shipped ones, so a load that skipped them would show
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.add_(0.01 * torch.randn_like(parameter))
    spec.save(model, tmp_path)
    earlier = {}  # features.bilm.* and (learned mix only) features.mix.*, as task models were saved before
    for name, tensor in model.state_dict().items():
        if name.startswith("features.elmo_layer.bilm."):
            earlier["features.bilm." + name.removeprefix("features.elmo_layer.bilm.")] = tensor
        elif name.startswith("features.elmo_layer.mixes.0."):
            if elmo == "mix":
                earlier["features.mix." + name.removeprefix("features.elmo_layer.mixes.0.")] = tensor
        else:
            earlier[name] = tensor
    save_file({name: tensor.contiguous() for name, tensor in earlier.items()}, str(tmp_path / "model.safetensors"))

    _, loaded = TaskSpec.load(tmp_path)
    expected = model.state_dict()
    assert loaded.state_dict().keys() == expected.keys()
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, expected[name]), name
