import json

import pytest
import torch

from elmo import PRESETS, BiLM, BiLMConfig, ConfigError
from elmo.config import MAX_PARAMETERS


@pytest.mark.parametrize(
    ("name", "expected"), [("small", 13_593_296), ("medium", 28_027_728), ("original", 93_600_848)]
)
def test_preset_parameter_counts_match_the_published_models(name, expected):
    config = BiLMConfig.preset(name)
    with torch.device("meta"):  # shapes only: no memory for 93M parameters
        bilm = BiLM(config)
    assert sum(parameter.numel() for parameter in bilm.parameters()) == expected
    assert config.n_parameters == expected  # counted from the options alone, before building anything


def test_options_round_trip_through_the_dataclass():
    for config in PRESETS.values():
        assert BiLMConfig.from_options(config.to_options()) == config


def test_a_model_without_clips_writes_null_clips_which_bilm_tf_and_allennlp_read_as_no_clip():
    """bilm-tf passes ``options['lstm'].get('cell_clip')`` to TF's LSTMCell, which clips whenever it is a number
    (0.0 would clip to zero); AllenNLP reads ``options['lstm']['cell_clip']`` with no default (a missing key is a
    KeyError) and clips only when it is truthy."""
    options = BiLMConfig.preset("small").to_options()
    options["lstm"].pop("cell_clip"), options["lstm"].pop("proj_clip")
    unclipped = BiLMConfig.from_options(options)
    assert unclipped.lstm.cell_clip == unclipped.lstm.proj_clip == 0.0
    written = json.loads(json.dumps(unclipped.to_options()))["lstm"]
    assert written["cell_clip"] is None and written["proj_clip"] is None
    assert BiLMConfig.from_options(unclipped.to_options()) == unclipped
    assert BiLMConfig.preset("small").to_options()["lstm"]["cell_clip"] == 3.0  # a clip that is set is written


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda o: o["char_cnn"].update(activation="gelu"), "activation is 'gelu'"),
        (lambda o: o["char_cnn"].update(filters=[[1, 4], [60, 8]]), r"filters has \[60, 8\]"),
        (lambda o: o["char_cnn"].update(filters=[[1, 4], "x"]), r"filters\[1\] is 'x'"),
        (lambda o: o["char_cnn"].update(n_characters=300), "n_characters is 300"),
        (lambda o: o["lstm"].update(projection_dim=2048, dim=1024), r"projection_dim \(2048\) exceeds lstm.dim"),
        (lambda o: o["lstm"].update(n_layers=True), "'n_layers' is True; expected int"),
        (lambda o: o["lstm"].update(cell_clip=-1), "clips must be >= 0"),
        (lambda o: o["lstm"].update(cell_clip=float("nan")), r"lstm.cell_clip is nan; expected a finite number"),
        (lambda o: o["lstm"].update(proj_clip=float("inf")), r"lstm.proj_clip is inf; expected a finite number"),
        (lambda o: o["lstm"].update(n_layers=10**6), r"lstm.n_layers is 1000000; expected at most 32"),
        (lambda o: o["lstm"].update(dim=2**20), r"lstm.dim is 1048576; expected at most 32768"),
        (lambda o: o["lstm"].update(dim=2**15, projection_dim=2**14),
         r"lstm.projection_dim is 16384; expected at most 8192"),
        (lambda o: o["char_cnn"]["embedding"].update(dim=10**9), r"embedding.dim is 1000000000; expected at most"),
        (lambda o: o["char_cnn"].update(n_highway=10**6), r"n_highway is 1000000; expected at most 16"),
        (lambda o: o["char_cnn"].update(max_characters_per_token=10**6), r"max_characters_per_token is 1000000"),
        (lambda o: o["char_cnn"].update(filters=[[1, 10**6]]), r"filters have 1000000 filters in all; expected at"),
        (lambda o: o["char_cnn"].update(filters=[[1, 1]] * 1000), r"filters has 1000 entries; expected at most 64"),
        # every field within its bound, but 16 layers of 32768 cells: 77 billion parameters
        (lambda o: o["lstm"].update(dim=32768, projection_dim=8192, n_layers=16),
         r"77,\d{3},\d{3},\d{3} parameters; expected at most 2,147,483,648"),
        (lambda o: o.pop("lstm"), "missing or malformed section 'lstm'"),
        # misspelled keys, which used to leave the field at its default (n_highway 0: a model with no highways)
        (lambda o: o["char_cnn"].update(n_highways=o["char_cnn"].pop("n_highway")),
         r"char_cnn: unknown field 'n_highways'; expected fields among \['activation', "),
        (lambda o: o["lstm"].update(num_layers=2), r"lstm: unknown field 'num_layers'"),
        (lambda o: o["char_cnn"]["embedding"].update(size=16), r"char_cnn\.embedding: unknown field 'size'"),
    ],
)
def test_invalid_options_are_refused_naming_the_field(edit, message):
    options = PRESETS["small"].to_options()
    edit(options)
    with pytest.raises(ConfigError, match=message):
        BiLMConfig.from_options(options)


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ConfigError, match="expected one of"):
        BiLMConfig.preset("huge")


def test_json_nan_and_infinity_in_options_are_refused_naming_the_field(tmp_path):
    text = json.dumps(PRESETS["small"].to_options()).replace('"cell_clip": 3.0', '"cell_clip": NaN')
    (tmp_path / "options.json").write_text(text)
    with pytest.raises(ConfigError, match=r"options.json: lstm.cell_clip is nan"):
        BiLMConfig.load(tmp_path / "options.json")
    (tmp_path / "options.json").write_text(text.replace("NaN", "1e400"))  # json reads 1e400 as inf
    with pytest.raises(ConfigError, match=r"options.json: lstm.cell_clip is inf"):
        BiLMConfig.load(tmp_path / "options.json")


def test_a_json_integer_too_large_for_a_float_is_refused_naming_the_field(tmp_path):
    """json reads ``1`` and 400 zeros as an int, which float() could not hold: an OverflowError, not a ConfigError."""
    text = json.dumps(PRESETS["small"].to_options()).replace('"cell_clip": 3.0', '"cell_clip": 1' + "0" * 400)
    (tmp_path / "options.json").write_text(text)
    with pytest.raises(ConfigError, match=r"options.json: lstm: field 'cell_clip' is an integer too large for a "
                                          r"float \(over 1.8e308\); expected a finite number"):
        BiLMConfig.load(tmp_path / "options.json")


def test_the_largest_options_within_every_bound_are_accepted():
    options = PRESETS["original"].to_options()
    options["lstm"].update(dim=16384, projection_dim=2048, n_layers=3)
    config = BiLMConfig.from_options(options)
    assert 1e9 < config.n_parameters <= MAX_PARAMETERS


def test_bilm_tf_training_options_at_the_top_level_are_accepted():
    """bilm-tf's train_elmo.py writes its hyperparameters beside char_cnn and lstm in the same options.json."""
    options = PRESETS["small"].to_options()
    options.update(bidirectional=True, dropout=0.1, batch_size=128, n_epochs=10, unroll_steps=20)
    assert BiLMConfig.from_options(options) == PRESETS["small"]
