"""Model files built to hurt: each is refused with an error naming the file and the field or dataset,
before memory in proportion to what the file claims is allocated."""

import json
import shutil
import time
import tracemalloc

import h5py
import numpy as np
import pytest

from elmo import BiLMConfig, CharCNNConfig, ConfigError, LSTMConfig, WeightFormatError, load_bilm
from elmo.embedder import Embedder
from elmo.weights import expected_datasets


@pytest.fixture
def model_copy(fixture_dir, tmp_path):
    shutil.copy(fixture_dir / "options.json", tmp_path / "options.json")
    shutil.copy(fixture_dir / "lm_weights.hdf5", tmp_path / "weights.hdf5")
    return tmp_path


def _edit_options(model_dir, **lstm):
    options = json.loads((model_dir / "options.json").read_text())
    options["lstm"].update(lstm)
    (model_dir / "options.json").write_text(json.dumps(options))


def test_a_million_layers_is_refused_at_once_naming_the_field(model_copy):
    _edit_options(model_copy, n_layers=10**6)
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"options.json: lstm.n_layers is 1000000; expected at most 32"):
        Embedder.load(str(model_copy))
    seconds, (_, peak) = time.perf_counter() - start, tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1_000_000 and seconds < 1.0  # was 12.6 s and 1.6 GB


def test_sparse_file_with_giant_shapes_matching_giant_options_is_refused_before_allocating(model_copy):
    _edit_options(model_copy, dim=2**20, projection_dim=2**16)
    options = json.loads((model_copy / "options.json").read_text())
    with h5py.File(model_copy / "weights.hdf5", "w") as handle:  # declared, never written: a few KB on disk
        for name, shape in expected_datasets_unchecked(options).items():
            handle.create_dataset(name, shape=shape, dtype=np.float32, chunks=(1,) * len(shape))
    assert (model_copy / "weights.hdf5").stat().st_size < 100_000
    tracemalloc.start()
    with pytest.raises(ConfigError, match=r"options.json: lstm.dim is 1048576; expected at most 32768"):
        load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")  # was a 3.7 TiB MemoryError
    assert tracemalloc.get_traced_memory()[1] < 1_000_000
    tracemalloc.stop()


def expected_datasets_unchecked(options):
    """The dataset shapes these options call for, without the bounds check."""
    cnn, lstm = options["char_cnn"], options["lstm"]
    config = BiLMConfig(
        CharCNNConfig(cnn["embedding"]["dim"], tuple(map(tuple, cnn["filters"])), cnn["n_highway"], cnn["activation"]),
        LSTMConfig(lstm["dim"], lstm["projection_dim"], lstm["n_layers"], lstm["cell_clip"], lstm["proj_clip"],
                   lstm["use_skip_connections"]),
    )
    return expected_datasets(config)


def test_declared_but_unwritten_dataset_is_refused_naming_it(model_copy):
    with h5py.File(model_copy / "weights.hdf5", "a") as handle:
        shape = handle["CNN_high_0/W_carry"].shape
        del handle["CNN_high_0/W_carry"]
        handle.create_dataset("CNN_high_0/W_carry", shape=shape, dtype=np.float32, chunks=True)
    with pytest.raises(WeightFormatError, match=r"weights.hdf5: CNN_high_0/W_carry holds no stored data"):
        load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")


def test_every_dataset_is_checked_before_any_is_read(model_copy):
    with h5py.File(model_copy / "weights.hdf5", "a") as handle:
        names = list(expected_datasets_unchecked(json.loads((model_copy / "options.json").read_text())))
        last = names[-1]  # read last today, after every other dataset
        data = handle[last][...]
        del handle[last]
        handle.create_dataset(last, data=data.astype(np.int32))
    tracemalloc.start()
    with pytest.raises(WeightFormatError, match=rf"{last} has dtype int32; expected floats"):
        load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 100_000  # the fixture's datasets hold 420 KB; none was read


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_nan_or_infinite_weight_is_refused_naming_the_dataset(model_copy, value):
    with h5py.File(model_copy / "weights.hdf5", "a") as handle:
        handle["CNN/W_cnn_3"][0, 1, 2, 3] = value
    with pytest.raises(WeightFormatError, match=r"weights.hdf5: CNN/W_cnn_3 holds 1 NaN or infinite value"):
        load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")


LSTM_KERNEL = "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"


def test_a_chunked_dataset_with_some_chunks_never_written_is_refused_naming_it(model_copy):
    """A chunk never written reads as zeros; with other chunks written the file holds data, so only counting
    chunks tells (this one loaded, its kernel's last rows zero, and gave wrong vectors)."""
    with h5py.File(model_copy / "weights.hdf5", "a") as handle:
        kernel = handle[LSTM_KERNEL][...]
        del handle[LSTM_KERNEL]
        dataset = handle.create_dataset(LSTM_KERNEL, shape=kernel.shape, dtype=np.float32,
                                        chunks=(8, kernel.shape[1]))
        dataset[:8] = kernel[:8]  # the first of ceil(rows / 8) chunks
        assert dataset.id.get_storage_size() > 0  # so "holds no stored data" does not catch it
    n_chunks = -(-kernel.shape[0] // 8)
    with pytest.raises(WeightFormatError, match=rf"weights.hdf5: {LSTM_KERNEL} is only partly written "
                                                rf"\(1 of its {n_chunks} chunks stored\)"):
        load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")


def test_a_chunked_dataset_with_every_chunk_written_loads_its_numbers(model_copy, fixture_dir):
    with h5py.File(model_copy / "weights.hdf5", "a") as handle:
        kernel = handle[LSTM_KERNEL][...]
        del handle[LSTM_KERNEL]
        handle.create_dataset(LSTM_KERNEL, data=kernel, chunks=(5, 7))  # edge chunks partly outside the shape
    loaded = load_bilm(model_copy / "options.json", model_copy / "weights.hdf5")
    with h5py.File(fixture_dir / "lm_weights.hdf5", "r") as handle:
        expected = handle[LSTM_KERNEL][...]
    layer = loaded.forward_lstm.layers[0]
    stored = np.concatenate([layer.input_weight.detach().numpy().T, layer.recurrent_weight.detach().numpy().T])
    assert np.array_equal(stored, expected)


def test_a_damaged_compressed_chunk_is_refused_naming_the_file_and_dataset(model_copy):
    """h5py raises a bare OSError naming neither file nor dataset; the loader names both."""
    path = model_copy / "weights.hdf5"
    with h5py.File(path, "a") as handle:
        kernel = handle[LSTM_KERNEL][...]
        del handle[LSTM_KERNEL]
        dataset = handle.create_dataset(LSTM_KERNEL, data=kernel, chunks=kernel.shape, compression="gzip")
        chunk = dataset.id.get_chunk_info(0)
    data = bytearray(path.read_bytes())
    for position in range(chunk.byte_offset + 10, chunk.byte_offset + 60):  # zlib's checksum cannot match now
        data[position] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(WeightFormatError, match=rf"weights.hdf5: {LSTM_KERNEL} could not be read \("):
        load_bilm(model_copy / "options.json", path)


def _replace_with_external_storage(path, name: str, outside) -> None:
    with h5py.File(path, "a") as handle:
        shape = handle[name].shape
        del handle[name]
        handle.create_dataset(name, shape=shape, dtype="<f4", external=[(str(outside), 0, h5py.h5f.UNLIMITED)])


def test_a_dataset_stored_in_another_file_is_refused_not_read_as_zeros_or_that_files_bytes(model_copy):
    """HDF5 external storage passed every check: the outside file's bytes (a secret, say) loaded as weights, and
    a short one as zeros."""
    path, bias = model_copy / "weights.hdf5", "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B"
    (model_copy / "secret.txt").write_text("TOKEN=abcdefgh-secret-value\n" * 200)
    _replace_with_external_storage(path, bias, model_copy / "secret.txt")
    with pytest.raises(WeightFormatError, match=rf"weights.hdf5: {bias} keeps its data in other files"):
        load_bilm(model_copy / "options.json", path)


def test_a_link_to_data_elsewhere_is_refused_where_a_weight_is_and_as_an_extra_name(model_copy, fixture_dir,
                                                                                   tmp_path):
    """An external link loaded another file's numbers; an extra link escaped the unused-name check, whose walk
    of the file skips links."""
    path, other = model_copy / "weights.hdf5", tmp_path / "other.hdf5"
    with h5py.File(path, "r") as handle, h5py.File(other, "w") as outside:
        outside["char_embed"] = handle["char_embed"][...] + 1.0  # another model's numbers
    with h5py.File(path, "a") as handle:
        del handle["char_embed"]
        handle["char_embed"] = h5py.ExternalLink(str(other), "char_embed")
    with pytest.raises(WeightFormatError, match=r"weights.hdf5: char_embed is a link to data elsewhere"):
        load_bilm(model_copy / "options.json", path)

    shutil.copy(fixture_dir / "lm_weights.hdf5", path)  # a group above the weights linked: named as the link
    with h5py.File(path, "r") as handle, h5py.File(other, "w") as outside:
        handle.copy("RNN_1", outside)
    with h5py.File(path, "a") as handle:
        del handle["RNN_1"]
        handle["RNN_1"] = h5py.ExternalLink(str(other), "RNN_1")
    with pytest.raises(WeightFormatError, match=r"weights.hdf5: RNN_1 is a link to data elsewhere"):
        load_bilm(model_copy / "options.json", path)

    shutil.copy(fixture_dir / "lm_weights.hdf5", path)
    with h5py.File(path, "a") as handle:
        handle["softmax"] = h5py.SoftLink("/char_embed")
    with pytest.raises(WeightFormatError, match=r"weights.hdf5 holds softmax, which options.json does not use"):
        load_bilm(model_copy / "options.json", path)


def test_a_damaged_header_is_refused_naming_the_file_not_as_h5pys_bare_error(model_copy):
    """Single flipped bytes in the file's metadata raised KeyError or RuntimeError from inside h5py, shown as a
    traceback by elmo info; any of them is now the loader's error, naming the file."""
    path = model_copy / "weights.hdf5"
    original = path.read_bytes()
    escaped = []
    for offset in range(0, 4096, 23):
        data = bytearray(original)
        data[offset] ^= 0xFF
        path.write_bytes(bytes(data))
        try:
            load_bilm(model_copy / "options.json", path)
        except WeightFormatError as error:
            assert "weights.hdf5" in str(error)
        except Exception as error:  # what escaped is the finding
            escaped.append((offset, repr(error)[:80]))
    assert not escaped, escaped
