"""Widening a trained model's LSTM cells (``elmo train --init-from M --config WIDER``): the wider model computes
what the trained one did, its new cells learn, and every other change of shape is refused before training."""

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
from elmo.training.language_model import StepNoise
from elmo.training.widen import widen_lstm


def _wider(config: BiLMConfig, dim: int) -> BiLMConfig:
    return dataclasses.replace(config, lstm=dataclasses.replace(config.lstm, dim=dim))


@pytest.fixture
def trained(tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path) -> Path:
    return train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=6)


def test_the_widened_model_has_the_same_perplexity_and_layers_as_the_trained_one(trained: Path,
                                                                                  synthetic_corpus: Path):
    model, vocab = load_language_model(trained)
    torch.manual_seed(0)
    wide = widen_lstm(model, _wider(model.config, 80))
    assert wide.bilm.forward_lstm.projected_lstms()[0].input_weight.shape[0] == 4 * 80
    held_out = Corpus([str(synthetic_corpus)])
    narrow_result, wide_result = evaluate(model, held_out, vocab), evaluate(wide, held_out, vocab)
    assert narrow_result.n_tokens == wide_result.n_tokens
    assert wide_result.forward == pytest.approx(narrow_result.forward, rel=1e-5)
    assert wide_result.backward == pytest.approx(narrow_result.backward, rel=1e-5)

    # In float64 the layers agree to rounding: the new cells add exact zeros through their projection columns.
    char_ids = torch.randint(1, 261, (3, 7, 50))
    char_ids[1, 5:] = 0
    narrow_layers = model.double().bilm(char_ids)[0].layers
    wide_layers = wide.double().bilm(char_ids)[0].layers
    torch.testing.assert_close(wide_layers, narrow_layers, rtol=0, atol=1e-12)


def test_the_new_cells_get_gradient_at_the_first_step(trained: Path):
    model, vocab = load_language_model(trained)
    torch.manual_seed(0)
    wide = widen_lstm(model, _wider(model.config, 48))
    layer = wide.bilm.forward_lstm.projected_lstms()[1]
    assert bool((layer.projection[:, 32:] == 0).all())
    batch = Batcher(Corpus([str(trained.parent / "corpus.txt")]), vocab, rows=range(4), n_rows=4, unroll_steps=6,
                    seed=0, max_epochs=1).next_batch()
    assert batch is not None
    noise = StepNoise.draw(seed=0, step=0, dropout=0.0, n_negatives=12, vocab_size=len(vocab), rows=range(4),
                           n_rows=4, state_reset=0.0)
    wide.train()
    wide(batch, wide.bilm.zero_state(4), noise).loss.backward()
    assert layer.projection.grad is not None and float(layer.projection.grad[:, 32:].abs().sum()) > 0


def test_changes_other_than_a_wider_lstm_are_refused_naming_them(trained: Path):
    model, _ = load_language_model(trained)
    assert widen_lstm(model, model.config) is model
    other = dataclasses.replace(MICRO_CONFIG, lstm=dataclasses.replace(MICRO_CONFIG.lstm, dim=64, projection_dim=24))
    with pytest.raises(ValueError, match=r"lstm\.projection_dim: 16 -> 24"):
        widen_lstm(model, other)
    with pytest.raises(ValueError, match="narrower than the starting model's 32"):
        widen_lstm(model, _wider(model.config, 24))


def test_elmo_train_init_from_with_a_wider_config_continues_the_model_widened(
        trained: Path, synthetic_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    wide_options = tmp_path / "wide.json"
    wide_options.write_text(json.dumps(_wider(MICRO_CONFIG, 48).to_options()), encoding="utf-8")
    common = ["train", "--init-from", str(trained), "--corpus", str(synthetic_corpus), "--batch-size", "4",
              "--unroll-steps", "6", "--negatives", "12", "--max-steps", "2", "--quiet"]
    assert main([*common, "--config", str(wide_options), "--out", str(tmp_path / "wide")]) == 0
    widened, _ = load_language_model(tmp_path / "wide")
    assert widened.config == _wider(MICRO_CONFIG, 48)

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dataclasses.replace(
        MICRO_CONFIG, lstm=dataclasses.replace(MICRO_CONFIG.lstm, n_layers=3)).to_options()), encoding="utf-8")
    assert main([*common, "--config", str(bad), "--out", str(tmp_path / "bad")]) == 2
    assert "lstm.n_layers: 2 -> 3" in capsys.readouterr().err
    assert not (tmp_path / "bad" / "checkpoints").exists()
