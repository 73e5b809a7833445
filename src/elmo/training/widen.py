"""A trained language model made wider (more LSTM cells, a wider projection) that computes exactly what it
computed before, so a larger model can go on from a trained small one instead of starting over (Net2Net's idea,
Chen et al. 2016: grow a network without changing its function).

One rule for every weight: a weight that feeds a new unit (a new cell's gates, a new dimension of a projection)
gets bilm-tf's initial value; a weight that carries a new unit into an old one (a new cell's projection column,
a new dimension's column in the next layer's input, recurrent and softmax weights) is zero; the old weights are
copied. The new units are active from the start but nothing old reads them, so the model's perplexity and its
old layer dimensions are unchanged, while the zero weights get their gradient at the first step.
"""

import dataclasses

import torch

from elmo.config import BiLMConfig
from elmo.modules.lstm import ProjectedLstm
from elmo.training.language_model import LanguageModel, initialize_like_bilm_tf

WIDENED_FIELDS = ("lstm.dim", "lstm.projection_dim")
N_GATES = 4  # input, cell candidate, forget, output: four blocks of rows in each LSTM weight


def widen(model: LanguageModel, config: BiLMConfig) -> LanguageModel:
    """``model`` itself when ``config`` is its own; a new model of ``config`` otherwise, which may differ from
    the model only by a larger ``lstm.dim`` and ``lstm.projection_dim`` (``ValueError`` naming what else
    differs, or a change that would add or drop a projection). New weights are drawn from torch's global
    generator: seed it first."""
    old = model.config
    if config == old:
        return model
    _check_widening(old, config)
    wide = LanguageModel(config, model.vocab_size)
    initialize_like_bilm_tf(wide)
    wide = wide.to(device=model.softmax_weight.device, dtype=model.softmax_weight.dtype)  # the model's own
    old_dim, old_projection = old.lstm.dim, old.lstm.projection_dim
    kept_projection = _kept(old_projection, config.lstm.projection_dim)
    kept_gates = _kept(old_dim, config.lstm.dim, blocks=N_GATES)
    kept_cells = _kept(old_dim, config.lstm.dim)
    old_encoder, wide_encoder = model.bilm.token_encoder, wide.bilm.token_encoder
    with torch.no_grad():
        for name, tensor in old_encoder.state_dict().items():
            if not name.startswith("projection."):
                wide_encoder.state_dict()[name].copy_(tensor)
        if old_encoder.projection is not None and wide_encoder.projection is not None:  # both or neither
            _place(wide_encoder.projection.weight, old_encoder.projection.weight, kept_projection)
            _place(wide_encoder.projection.bias, old_encoder.projection.bias, kept_projection)
        _place(wide.softmax_weight, model.softmax_weight, None, kept_projection)
        wide.softmax_bias.copy_(model.softmax_bias)
        for old_stack, wide_stack in ((model.bilm.forward_lstm, wide.bilm.forward_lstm),
                                      (model.bilm.backward_lstm, wide.bilm.backward_lstm)):
            for old_layer, wide_layer in zip(old_stack.projected_lstms(), wide_stack.projected_lstms(), strict=True):
                _widen_layer(old_layer, wide_layer, kept_gates, kept_projection, kept_cells)
    return wide


def _check_widening(old: BiLMConfig, new: BiLMConfig) -> None:
    """ValueError unless ``new`` only widens ``old``'s cells or projection and keeps both projections."""
    old_fields, new_fields = _fields(old), _fields(new)
    differences = [f"{name}: {value!r} -> {new_fields[name]!r}" for name, value in old_fields.items()
                   if name not in WIDENED_FIELDS and value != new_fields[name]]
    if differences:
        raise ValueError("--config may only widen the starting model's LSTM cells (lstm.dim) and projection "
                         "(lstm.projection_dim); it also changes " + "; ".join(differences))
    for name in WIDENED_FIELDS:
        if new_fields[name] < old_fields[name]:  # type: ignore[operator]  # both ints: WIDENED_FIELDS
            raise ValueError(f"--config has {name} {new_fields[name]}, narrower than the starting model's "
                             f"{old_fields[name]}; a model can be widened, not narrowed")
    if not old.lstm.has_projection or not new.lstm.has_projection:
        raise ValueError(f"the starting model's cells ({old.lstm.dim}) and the wider ones ({new.lstm.dim}) must both "
                         f"be projected to fewer dimensions ({old.lstm.projection_dim} -> {new.lstm.projection_dim}): "
                         "new cells are left out through their projection columns")
    if old.has_token_projection != new.has_token_projection:
        raise ValueError(f"the character CNN's {old.char_cnn.n_filters} filters are projected to the LSTM's input "
                         f"only {'before' if old.has_token_projection else 'after'} widening ({old.lstm.projection_dim}"
                         f" -> {new.lstm.projection_dim}): a projection_dim equal to the number of filters has no "
                         "such projection, so widening to or from it changes the model's layout")


def _fields(config: BiLMConfig) -> dict[str, object]:
    """Every field of the config by its dotted name (``lstm.dim``)."""
    return {f"{section}.{name}": value for section, fields in dataclasses.asdict(config).items()
            for name, value in fields.items()}


def _kept(old_size: int, new_size: int, blocks: int = 1) -> torch.Tensor:
    """Where the old units sit among the new ones: the first ``old_size`` of each of ``blocks`` blocks."""
    return torch.cat([torch.arange(old_size) + block * new_size for block in range(blocks)])


def _widen_layer(old: ProjectedLstm, wide: ProjectedLstm, kept_gates: torch.Tensor, kept_projection: torch.Tensor,
                 kept_cells: torch.Tensor) -> None:
    """One LSTM layer: gate rows by cell, input and recurrent columns by projection dimension, projection rows
    by projection dimension and columns by cell."""
    assert old.projection is not None and wide.projection is not None  # _check_widening
    _place(wide.input_weight, old.input_weight, kept_gates, kept_projection)
    _place(wide.recurrent_weight, old.recurrent_weight, kept_gates, kept_projection)
    _place(wide.bias, old.bias, kept_gates)
    _place(wide.projection, old.projection, kept_projection, kept_cells)


def _place(wide: torch.Tensor, old: torch.Tensor, kept_rows: torch.Tensor | None,
           kept_columns: torch.Tensor | None = None) -> None:
    """``old`` into its units' places in ``wide`` (``None``: all rows, same count): the old rows' weights from
    new columns (new inputs into old units) zero, new rows (new units) left as initialized."""
    rows = torch.arange(wide.shape[0]) if kept_rows is None else kept_rows
    if old.dim() == 1:
        wide[rows] = old
        return
    columns = torch.arange(wide.shape[1]) if kept_columns is None else kept_columns
    wide[rows] = 0.0
    wide[rows.unsqueeze(1), columns] = old
