"""A trained language model with wider LSTM cells that computes exactly what it computed before, so a
larger model can go on from a trained small one instead of starting over (Net2Net's idea, Chen et al. 2016:
grow a network without changing its function).

Each layer's new cells get bilm-tf's initial input, recurrent and bias weights, and zero columns in the
projection: the layer's output ``h = P (o * tanh(c))`` is unchanged, while the gradient reaches those zero
columns at the first step (the new cells are active), so the new cells join in as training goes on.
"""

import dataclasses

import torch

from elmo.config import BiLMConfig
from elmo.modules.lstm import ProjectedLstm
from elmo.training.language_model import LanguageModel, initialize_like_bilm_tf


def widen_lstm(model: LanguageModel, config: BiLMConfig) -> LanguageModel:
    """``model`` itself when ``config`` is its own; a new model of ``config`` otherwise, which must differ
    from the model's only by a larger ``lstm.dim`` (``ValueError`` naming what else differs). New weights are
    drawn from torch's global generator: seed it first."""
    old = model.config
    if config == old:
        return model
    old_fields, new_fields = _fields(old), _fields(config)
    differences = [f"{name}: {value!r} -> {new_fields[name]!r}" for name, value in old_fields.items()
                   if name != "lstm.dim" and value != new_fields[name]]
    if differences:
        raise ValueError("--config may only widen the starting model's LSTM cells (lstm.dim); it also changes "
                         + "; ".join(differences))
    if config.lstm.dim < old.lstm.dim:
        raise ValueError(f"--config has lstm.dim {config.lstm.dim}, narrower than the starting model's "
                         f"{old.lstm.dim}; a model can be widened, not narrowed")
    if old.lstm.projection_dim >= old.lstm.dim:
        raise ValueError(f"the starting model's cells ({old.lstm.dim}) have no projection to leave the new ones "
                         "out of; only a projected LSTM can be widened without changing its output")
    wide = LanguageModel(config, model.vocab_size)
    initialize_like_bilm_tf(wide)
    lstm_names = ("forward_lstm.", "backward_lstm.")
    kept = {name: tensor for name, tensor in model.bilm.state_dict().items() if not name.startswith(lstm_names)}
    wide.bilm.load_state_dict(kept, strict=False)
    with torch.no_grad():
        wide.softmax_weight.copy_(model.softmax_weight)
        wide.softmax_bias.copy_(model.softmax_bias)
        for old_stack, wide_stack in ((model.bilm.forward_lstm, wide.bilm.forward_lstm),
                                      (model.bilm.backward_lstm, wide.bilm.backward_lstm)):
            for old_layer, wide_layer in zip(old_stack.projected_lstms(), wide_stack.projected_lstms(), strict=True):
                _copy_cells(old_layer, wide_layer)
    return wide


def _fields(config: BiLMConfig) -> dict[str, object]:
    """Every field of the config by its dotted name (``lstm.dim``)."""
    return {f"{section}.{name}": value for section, fields in dataclasses.asdict(config).items()
            for name, value in fields.items()}


def _copy_cells(old: ProjectedLstm, wide: ProjectedLstm) -> None:
    """The old cells into the first ``old.dim`` cells of each of the four gate blocks; the new cells' projection
    columns zero."""
    n_old, n_wide = old.dim, wide.dim
    for gate in range(4):
        old_rows, wide_rows = slice(gate * n_old, (gate + 1) * n_old), slice(gate * n_wide, gate * n_wide + n_old)
        wide.input_weight[wide_rows] = old.input_weight[old_rows]
        wide.recurrent_weight[wide_rows] = old.recurrent_weight[old_rows]
        wide.bias[wide_rows] = old.bias[old_rows]
    assert old.projection is not None and wide.projection is not None  # widen_lstm refuses unprojected cells
    wide.projection.zero_()
    wide.projection[:, :n_old] = old.projection
