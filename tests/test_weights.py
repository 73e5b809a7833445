import json
import shutil

import h5py
import numpy as np
import pytest
import torch

from elmo import BiLM, BiLMConfig, ConfigError, WeightFormatError, load_bilm, save_bilm


def _datasets(path) -> dict[str, np.ndarray]:
    arrays = {}
    with h5py.File(path, "r") as handle:

        def collect(name, item):
            if isinstance(item, h5py.Dataset):
                arrays[name] = item[...]

        handle.visititems(collect)
    return arrays


def test_file_load_save_gives_back_the_same_datasets_bit_for_bit(fixture_dir, tmp_path):
    bilm = load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")
    save_bilm(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    original, saved = _datasets(fixture_dir / "lm_weights.hdf5"), _datasets(tmp_path / "weights.hdf5")
    assert sorted(saved) == sorted(original)  # the same names: other ELMo tools read our files
    for name, array in original.items():
        assert saved[name].dtype == np.float32
        assert saved[name].shape == array.shape
        assert np.array_equal(saved[name].view(np.uint32), array.view(np.uint32)), name


def test_model_save_load_is_bit_identical(fixture_dir, tmp_path):
    config = BiLMConfig.load(fixture_dir / "options.json")
    torch.manual_seed(3)
    bilm = BiLM(config)
    with torch.no_grad():
        for parameter in bilm.parameters():
            parameter.normal_()
    save_bilm(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    loaded = load_bilm(tmp_path / "options.json", tmp_path / "weights.hdf5")
    assert loaded.config == bilm.config
    for (name, expected), (_, got) in zip(bilm.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(expected, got), name
    assert not list(tmp_path.glob("*.partial"))


@pytest.fixture
def model_copy(fixture_dir, tmp_path):
    shutil.copy(fixture_dir / "options.json", tmp_path / "options.json")
    shutil.copy(fixture_dir / "lm_weights.hdf5", tmp_path / "weights.hdf5")
    return tmp_path


def test_missing_dataset_is_named(model_copy):
    with h5py.File(model_copy / "weights.hdf5", "a") as handle:
        del handle["CNN_high_1/W_carry"]
    with pytest.raises(WeightFormatError, match=r"lacks CNN_high_1/W_carry; is options\.json from another model"):
        load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")


def test_wrong_shape_names_dataset_and_both_shapes(model_copy):
    with h5py.File(model_copy / "weights.hdf5", "a") as handle:
        del handle["CNN_proj/W_proj"]
        handle.create_dataset("CNN_proj/W_proj", data=np.zeros((124, 17), np.float32))
    message = r"CNN_proj/W_proj has shape \(124, 17\); options.json expects \(124, 16\)"
    with pytest.raises(WeightFormatError, match=message):
        load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")


def test_options_of_another_size_are_caught_by_shape(model_copy):
    options = json.loads((model_copy / "options.json").read_text())
    options["lstm"]["dim"] = 128
    (model_copy / "options.json").write_text(json.dumps(options))
    with pytest.raises(WeightFormatError, match=r"W_0 has shape \(32, 256\); options.json expects \(32, 512\)"):
        load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")


def test_not_hdf5_is_refused_clearly(model_copy):
    (model_copy / "weights.hdf5").write_bytes(b"this is not an HDF5 file")
    with pytest.raises(WeightFormatError, match="not a readable HDF5 file"):
        load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")


def test_n_characters_261_loads_like_262(model_copy, fixture_dir):
    options = json.loads((model_copy / "options.json").read_text())
    options["char_cnn"]["n_characters"] = 261
    (model_copy / "options.json").write_text(json.dumps(options))
    with_261 = load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")
    with_262 = load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")
    for a, b in zip(with_261.parameters(), with_262.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_model_read_with_261_characters_is_saved_with_262_as_bilm_tf_needs_to_embed(model_copy, tmp_path):
    """bilm-tf's training writes 261 and its embedding code refuses anything but 262; ``save_bilm`` wrote back
    the count it had read, so a training dump passed through this project could not be embedded by bilm-tf."""
    options = json.loads((model_copy / "options.json").read_text())
    options["char_cnn"]["n_characters"] = 261
    (model_copy / "options.json").write_text(json.dumps(options))
    with_261 = load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")
    save_bilm(with_261, tmp_path / "options.json", tmp_path / "weights.hdf5")
    assert json.loads((tmp_path / "options.json").read_text())["char_cnn"]["n_characters"] == 262
    assert _datasets(tmp_path / "weights.hdf5")["char_embed"].shape[0] == 261  # the padding row is not stored
    saved = load_bilm(tmp_path / "options.json", tmp_path / "weights.hdf5")
    for a, b in zip(with_261.parameters(), saved.parameters(), strict=True):
        assert torch.equal(a, b)


def test_bad_options_name_the_field(model_copy):
    options = json.loads((model_copy / "options.json").read_text())
    del options["lstm"]["projection_dim"]
    (model_copy / "options.json").write_text(json.dumps(options))
    with pytest.raises(ConfigError, match="lstm: missing field 'projection_dim'"):
        load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")



@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda o: o["char_cnn"].update(n_highway=1),
         r"holds CNN_high_1/W_carry, which options\.json does not use \(char_cnn\.n_highway is 1; it would need "
         r"n_highway > 1\); is options\.json from another model"),
        (lambda o: o["char_cnn"].pop("n_highway"),  # defaults to 0
         r"holds CNN_high_0/W_carry, which options\.json does not use \(char_cnn\.n_highway is 0"),
        (lambda o: o["lstm"].update(n_layers=1),
         r"holds RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B, which options\.json does not use \(lstm\.n_layers is 1; "
         r"it would need n_layers > 1\)"),
    ],
)
def test_options_describing_fewer_layers_than_the_file_holds_are_refused_naming_dataset_and_option(
        model_copy, edit, message):
    """Such options used to load the fixture, giving the vectors of another model."""
    options = json.loads((model_copy / "options.json").read_text())
    edit(options)
    (model_copy / "options.json").write_text(json.dumps(options))
    with pytest.raises(WeightFormatError, match=message):
        load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")


@pytest.mark.parametrize(
    ("edit", "extra", "message"),
    [
        (lambda o: None, ("CNN/W_cnn_2", (1, 3, 16, 8)),
         r"holds CNN/W_cnn_2, which options\.json does not use \(char_cnn\.filters has 2 entries; it would need "
         r"more than 2\)"),
        (lambda o: o["lstm"].update(projection_dim=16), ("CNN_proj/W_proj", (16, 16)),
         r"CNN_proj/W_proj, which options\.json does not use \(char_cnn\.filters total 16 filters, equal to "
         r"lstm\.projection_dim"),
        (lambda o: o["lstm"].update(projection_dim=16), ("RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0", (16, 16)),
         r"Cell0/LSTMCell/W_P_0, which options\.json does not use \(lstm\.projection_dim equals lstm\.dim \(16\)"),
        (lambda o: None, ("softmax/W", (10, 8)),
         r"holds softmax/W, which options\.json does not use \(it is not part of bilm-tf's weight layout\)"),
    ],
)
def test_a_dataset_of_a_part_the_model_lacks_is_refused(tmp_path, edit, extra, message):
    options = BiLMConfig.preset("small").to_options()
    options["char_cnn"]["filters"] = [[1, 8], [2, 8]]
    options["lstm"].update(dim=16, projection_dim=8)
    edit(options)
    save_bilm(BiLM(BiLMConfig.from_options(options)), tmp_path / "options.json", tmp_path / "weights.hdf5")
    load_bilm(tmp_path / "options.json", tmp_path / "weights.hdf5")  # as written, it fits
    with h5py.File(tmp_path / "weights.hdf5", "a") as handle:
        handle.create_dataset(extra[0], data=np.zeros(extra[1], np.float32))
    with pytest.raises(WeightFormatError, match=message):
        load_bilm(tmp_path / "options.json", tmp_path / "weights.hdf5")
