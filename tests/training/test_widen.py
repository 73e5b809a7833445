"""Widening a trained model's LSTM cells and projection (``elmo train --init-from M --config WIDER``): the wider
model computes what the trained one did, its new units learn, and every other change of shape is refused before
training."""

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from run_helpers import train_micro_run
from training_helpers import MICRO_CONFIG

from elmo.cli import main
from elmo.config import BiLMConfig
from elmo.training import Corpus, evaluate, load_language_model
from elmo.training.batches import Batcher
from elmo.training.language_model import LanguageModel, StepNoise, initialize_like_bilm_tf
from elmo.training.widen import widen


def _wider(config: BiLMConfig, dim: int, projection_dim: int | None = None) -> BiLMConfig:
    projection_dim = config.lstm.projection_dim if projection_dim is None else projection_dim
    return dataclasses.replace(config, lstm=dataclasses.replace(config.lstm, dim=dim, projection_dim=projection_dim))


@pytest.fixture
def trained(tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path) -> Path:
    return train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=6)


@pytest.mark.parametrize("dim, projection_dim", [(80, 16), (32, 24), (48, 24)])
def test_the_widened_model_has_the_same_perplexity_and_layers_as_the_trained_one(
        trained: Path, synthetic_corpus: Path, dim: int, projection_dim: int):
    model, vocab = load_language_model(trained)
    torch.manual_seed(0)
    wide = widen(model, _wider(model.config, dim, projection_dim))
    assert wide.bilm.forward_lstm.projected_lstms()[0].input_weight.shape == (4 * dim, projection_dim)
    held_out = Corpus([str(synthetic_corpus)])
    narrow_result, wide_result = evaluate(model, held_out, vocab), evaluate(wide, held_out, vocab)
    assert narrow_result.n_tokens == wide_result.n_tokens
    assert wide_result.forward == pytest.approx(narrow_result.forward, rel=1e-5)
    assert wide_result.backward == pytest.approx(narrow_result.backward, rel=1e-5)

    # In float64 the old dimensions of every layer agree to rounding: new units reach old ones only through
    # exact zeros. A layer is [forward; backward], each projection_dim wide; the old dimensions lead each half.
    char_ids = torch.randint(1, 261, (3, 7, 50))
    char_ids[1, 5:] = 0
    narrow_layers = model.double().bilm(char_ids)[0].layers
    wide_layers = wide.double().bilm(char_ids)[0].layers
    old = model.config.lstm.projection_dim
    old_dimensions = torch.cat([torch.arange(old), projection_dim + torch.arange(old)])
    torch.testing.assert_close(wide_layers[..., old_dimensions], narrow_layers, rtol=0, atol=1e-12)
    if projection_dim > old:  # every layer's new dimensions are active (bilm-tf's initial weights feed them)
        assert bool((wide_layers[..., old:projection_dim].detach().abs().amax(dim=(1, 2, 3)) > 0).all())


def test_the_zero_weights_into_old_units_get_gradient_at_the_first_step(trained: Path):
    model, vocab = load_language_model(trained)
    torch.manual_seed(0)
    wide = widen(model, _wider(model.config, 48, 24))
    layer = wide.bilm.forward_lstm.projected_lstms()[1]
    zero_blocks = {  # weight -> (its rows of old units, its columns of new units): zero after widening
        "new cells' projection columns": (layer.projection, slice(0, 16), slice(32, 48)),
        "new dimensions' input columns": (layer.input_weight, slice(0, 32), slice(16, 24)),
        "new dimensions' recurrent columns": (layer.recurrent_weight, slice(0, 32), slice(16, 24)),
        "new dimensions' softmax columns": (wide.softmax_weight, slice(None), slice(16, 24)),
    }
    for name, (weight, rows, columns) in zero_blocks.items():
        assert bool((weight[rows, columns] == 0).all()), name
    batch = Batcher(Corpus([str(trained.parent / "corpus.txt")]), vocab, rows=range(4), n_rows=4, unroll_steps=6,
                    seed=0, max_epochs=1).next_batch()
    assert batch is not None
    noise = StepNoise.draw(seed=0, step=0, dropout=0.0, n_negatives=12, vocab_size=len(vocab), rows=range(4),
                           n_rows=4, state_reset=0.0)
    wide.train()
    wide(batch, wide.bilm.zero_state(4), noise).loss.backward()
    for name, (weight, rows, columns) in zero_blocks.items():
        assert weight.grad is not None and float(weight.grad[rows, columns].abs().sum()) > 0, name


def test_changes_other_than_a_wider_lstm_are_refused_naming_them(trained: Path):
    model, _ = load_language_model(trained)
    assert widen(model, model.config) is model
    other = dataclasses.replace(MICRO_CONFIG, lstm=dataclasses.replace(MICRO_CONFIG.lstm, dim=64, cell_clip=5.0))
    with pytest.raises(ValueError, match=r"lstm\.cell_clip: 3\.0 -> 5\.0"):
        widen(model, other)
    with pytest.raises(ValueError, match=r"lstm\.dim 24, narrower than the starting model's 32"):
        widen(model, _wider(model.config, 24, 8))
    with pytest.raises(ValueError, match=r"lstm\.projection_dim 8, narrower than the starting model's 16"):
        widen(model, _wider(model.config, 32, 8))
    with pytest.raises(ValueError, match="32 filters are projected to the LSTM's input only before widening"):
        widen(model, _wider(model.config, 64, 32))
    with pytest.raises(ValueError, match="must both be projected"):  # 48 cells, 48 dimensions: no projection
        widen(model, _wider(model.config, 48, 48))


def test_a_float64_model_without_a_token_projection_widens_its_cells_in_its_own_dtype():
    # 16 filters projected to 16 dimensions: bilm-tf has no CNN projection then, and widening the cells keeps it so.
    config = dataclasses.replace(MICRO_CONFIG, char_cnn=dataclasses.replace(MICRO_CONFIG.char_cnn,
                                                                            filters=((1, 8), (2, 8))))
    assert not config.has_token_projection
    torch.manual_seed(0)
    model = LanguageModel(config, 30)
    initialize_like_bilm_tf(model)
    model = model.double()
    wide = widen(model, _wider(config, 48))
    assert wide.softmax_weight.dtype == torch.float64 and wide.bilm.token_encoder.projection is None
    char_ids = torch.randint(1, 261, (2, 6, 50))
    torch.testing.assert_close(wide.bilm(char_ids)[0].layers, model.bilm(char_ids)[0].layers, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="16 filters are projected to the LSTM's input only after widening"):
        widen(model, _wider(config, 48, 24))


def test_elmo_train_init_from_with_a_wider_config_continues_the_model_widened(
        trained: Path, synthetic_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    wide_options = tmp_path / "wide.json"
    wide_options.write_text(json.dumps(_wider(MICRO_CONFIG, 48, 24).to_options()), encoding="utf-8")
    common = ["train", "--init-from", str(trained), "--corpus", str(synthetic_corpus), "--batch-size", "4",
              "--unroll-steps", "6", "--negatives", "12", "--max-steps", "2", "--quiet"]
    assert main([*common, "--config", str(wide_options), "--out", str(tmp_path / "wide")]) == 0
    widened, _ = load_language_model(tmp_path / "wide")
    assert widened.config == _wider(MICRO_CONFIG, 48, 24)

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dataclasses.replace(
        MICRO_CONFIG, lstm=dataclasses.replace(MICRO_CONFIG.lstm, n_layers=3)).to_options()), encoding="utf-8")
    assert main([*common, "--config", str(bad), "--out", str(tmp_path / "bad")]) == 2
    assert "lstm.n_layers: 2 -> 3" in capsys.readouterr().err
    assert not (tmp_path / "bad" / "checkpoints").exists()
