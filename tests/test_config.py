import pytest
import torch

from elmo import PRESETS, BiLM, BiLMConfig, ConfigError


@pytest.mark.parametrize(
    ("name", "expected"), [("small", 13_593_296), ("medium", 28_027_728), ("original", 93_600_848)]
)
def test_preset_parameter_counts_match_the_published_models(name, expected):
    with torch.device("meta"):  # shapes only: no memory for 93M parameters
        bilm = BiLM(BiLMConfig.preset(name))
    assert sum(parameter.numel() for parameter in bilm.parameters()) == expected


def test_options_round_trip_through_the_dataclass():
    for config in PRESETS.values():
        assert BiLMConfig.from_options(config.to_options()) == config


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
        (lambda o: o.pop("lstm"), "missing or malformed section 'lstm'"),
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
