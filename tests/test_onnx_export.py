"""The exported ONNX graph, run by onnxruntime, against BiLM.forward.

Each model is exported once (about 10 s each): a random-weight biLM with every dimension different and
both clips firing, exported from its model directory through the CLI, and the shipped ``en`` model by
name. Every check runs the graph at batch sizes and lengths other than the one traced at export.
"""

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import onnx
import onnxruntime

from elmo import BiLM, BiLMConfig, batch_to_char_ids, onnx_export, save_bilm
from elmo.cli import main
from elmo.model_dir import ModelDir
from elmo.onnx_export import OnnxBiLM, _ExportableBiLM, export_onnx

RANDOM_OPTIONS = {
    "char_cnn": {
        "activation": "relu",
        "embedding": {"dim": 5},
        "filters": [[1, 3], [2, 4], [4, 6]],
        "max_characters_per_token": 50,
        "n_characters": 262,
        "n_highway": 2,
    },
    "lstm": {"cell_clip": 0.7, "dim": 11, "n_layers": 3, "proj_clip": 0.4, "projection_dim": 7,
             "use_skip_connections": True},
}

# Batches unlike the export example (3 rows, 4 tokens): 1 row of 1 token, rows of different lengths with
# a 1-token and an empty sentence, and more rows, longer than the example.
WORDS = "the bank of a river money she sat down on it 小米 手机 很 好用 long-winded !".split()
BATCHES = {
    "one-token": [["bank"]],
    "mixed-lengths": [WORDS[:9], ["a"], [], WORDS[3:6], WORDS[::-1]],
    "longer": [(WORDS * 3)[k : k + 37 - 3 * k] for k in range(9)],
}


def _random_bilm(options: dict, seed: int = 0) -> BiLM:
    torch.manual_seed(seed)
    bilm = BiLM(BiLMConfig.from_options(options))
    with torch.no_grad():
        for parameter in bilm.parameters():
            parameter.normal_(0.0, 0.6)
    return bilm.eval()


@pytest.fixture(scope="module")
def random_export(tmp_path_factory) -> tuple[BiLM, Path]:
    directory = tmp_path_factory.mktemp("random-model")
    bilm = _random_bilm(RANDOM_OPTIONS)
    save_bilm(bilm, directory / "options.json", directory / "weights.hdf5")
    path = directory / "bilm.onnx"
    assert main(["export-onnx", str(directory), "--out", str(path)]) == 0
    return bilm, path


@pytest.fixture(scope="module")
def en_export(tmp_path_factory) -> tuple[BiLM, Path]:
    exported = export_onnx("en", tmp_path_factory.mktemp("en") / "en.onnx")
    assert exported.max_difference is not None and exported.max_difference < 1e-5
    return ModelDir.find("en").load_bilm().eval(), exported.path


@pytest.fixture(params=["random", "en"])
def exported(request) -> tuple[BiLM, Path]:
    return request.getfixturevalue(f"{request.param}_export")


@pytest.mark.parametrize("batch", BATCHES)
def test_onnxruntime_matches_bilm_at_shapes_not_seen_at_export(exported, batch):
    bilm, path = exported
    char_ids = batch_to_char_ids(BATCHES[batch])
    layers, mask = OnnxBiLM(path, threads=1)(char_ids)
    with torch.no_grad():
        expected = bilm(char_ids)[0]
    assert layers.shape == tuple(expected.layers.shape)
    np.testing.assert_array_equal(mask, expected.mask.numpy())
    np.testing.assert_allclose(layers, expected.layers.numpy(), rtol=0, atol=1e-5)


def test_random_model_clips_its_projections(random_export):
    """Without firing clips the comparison above would not test them."""
    bilm, path = random_export
    layers, mask = OnnxBiLM(path)(batch_to_char_ids(BATCHES["longer"]))
    first_lstm_layer = layers[1][mask]  # no skip connection into the first layer: its outputs are clipped h
    assert np.isclose(np.abs(first_lstm_layer), bilm.config.lstm.proj_clip).mean() > 0.05


def test_graph_has_dynamic_batch_and_length_and_a_scan_per_layer_and_direction(random_export):
    bilm, path = random_export
    graph = onnx.load(str(path)).graph
    (char_input,) = graph.input
    dims = char_input.type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["batch", "max_tokens", 50]
    op_types = [node.op_type for node in graph.node]
    assert op_types.count("Scan") == 2 * bilm.config.lstm.n_layers
    assert "Loop" not in op_types


def test_empty_batch_and_batch_of_empty_sentences(random_export):
    bilm, path = random_export
    model = OnnxBiLM(path)
    n_layers, width = bilm.config.n_output_layers, bilm.config.output_dim
    for shape in ((0, 4, 50), (2, 0, 50)):
        layers, mask = model(np.zeros(shape, dtype=np.int64))
        assert layers.shape == (n_layers, shape[0], shape[1], width)
        assert mask.shape == shape[:2]


def test_wrapper_names_the_fault_in_a_bad_batch(random_export):
    _, path = random_export
    model = OnnxBiLM(path)
    good = batch_to_char_ids([["a", "b"], ["c"]])
    with pytest.raises(ValueError, match=r"shape \(2, 2, 49\); expected \(batch, tokens, 50\)"):
        model(good[:, :, :49])
    with pytest.raises(ValueError, match="expected"):
        model(good[0])
    with pytest.raises(ValueError, match=r"outside 0\.\.261"):
        model(good + 300)
    with pytest.raises(ValueError, match="padding token comes before a real token"):
        model(good.flip(1))
    with pytest.raises(TypeError, match="dtype float"):
        model(good.float())
    layers_int32, _ = model(good.int())
    np.testing.assert_array_equal(layers_int32, model(good)[0])


def test_the_raw_graph_gives_nan_for_a_row_bilm_refuses_and_the_other_rows_as_before(random_export):
    """Run without OnnxBiLM's checks, a row with its padding first came back with vectors that looked right (its
    </S> overwrote a token), and an id of -1 was read as 261 (ONNX's Gather counts it from the end)."""
    _, path = random_export
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    good = batch_to_char_ids([["a", "b", "c"], ["d", "e"], ["f", "g", "h"]]).numpy()
    bad = good.copy()
    bad[1] = good[1][::-1]  # padding, e, d
    bad[2, 1, 3] = -1
    expected, expected_mask = session.run(["layers", "mask"], {"char_ids": good})
    layers, _ = session.run(["layers", "mask"], {"char_ids": bad})
    assert np.isfinite(expected).all() and expected_mask.all(axis=1)[[0, 2]].all()
    np.testing.assert_array_equal(layers[:, 0], expected[:, 0])
    assert np.isnan(layers[:, 1:]).all()


def test_exportable_module_matches_bilm_without_projections_or_clips_in_pytorch():
    """The branches the random model above does not take, in PyTorch itself (eager scan is slow, so one
    model takes them all): 3 + 4 + 2 filters == projection_dim == dim gives neither W_P_0 nor CNN_proj."""
    options = {
        "char_cnn": {**RANDOM_OPTIONS["char_cnn"], "filters": [[1, 3], [2, 4], [4, 2]]},
        "lstm": {**RANDOM_OPTIONS["lstm"], "dim": 9, "projection_dim": 9, "cell_clip": 0, "proj_clip": 0,
                 "use_skip_connections": False},
    }
    bilm = _random_bilm(options, seed=1)
    assert bilm.token_encoder.projection is None and bilm.forward_lstm.layers[0].projection is None
    char_ids = batch_to_char_ids(BATCHES["mixed-lengths"])
    with torch.no_grad():
        expected = bilm(char_ids)[0]
        layers, mask = _ExportableBiLM(bilm)(char_ids)
    assert torch.equal(mask, expected.mask)
    torch.testing.assert_close(layers, expected.layers, rtol=0, atol=1e-5)


def test_cli_reports_a_model_that_does_not_exist(tmp_path, capsys):
    assert main(["export-onnx", str(tmp_path / "missing"), "--out", str(tmp_path / "x.onnx")]) == 2
    assert "neither a directory nor a shipped model" in capsys.readouterr().err


def test_an_opset_the_exporter_cannot_write_is_refused_before_exporting(tmp_path):
    with pytest.raises(ValueError, match="opset 17: the exporter writes opset 18 or later only"):
        export_onnx(_random_bilm(RANDOM_OPTIONS), tmp_path / "x.onnx", opset=17)
    assert not (tmp_path / "x.onnx").exists()


def test_a_torch_without_the_private_scan_still_imports_the_module_and_export_names_what_is_missing(tmp_path):
    """``torch._higher_order_ops.scan`` is private: blocked here in a fresh interpreter, as if PyTorch lacked it."""
    script = (
        "import sys, torch\n"
        "sys.modules['torch._higher_order_ops.scan'] = None\n"
        "from elmo import BiLM, BiLMConfig\n"
        "from elmo.onnx_export import export_onnx\n"
        f"export_onnx(BiLM(BiLMConfig.from_options({RANDOM_OPTIONS!r})), {str(tmp_path / 'x.onnx')!r})\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("RuntimeError: ONNX export needs torch._higher_order_ops.scan, which torch ")
    assert message.endswith("lacks; it is tested with torch 2.13")
    assert not (tmp_path / "x.onnx").exists()


# torch 2.13 writes a graph's weights to a file beside it past this many bytes (1.5 GiB); 0 stands in for a large model.
LARGE_MODEL_THRESHOLD = "torch.onnx._internal.exporter._onnx_program._LARGE_MODEL_THRESHOLD"


@pytest.mark.parametrize("weights", ["inside", "beside"])
def test_an_export_that_fails_its_check_leaves_the_file_that_was_there_and_no_partial(weights, tmp_path, monkeypatch):
    """The graph used to be saved at ``path`` before the check, so a failing one replaced a good file; weights
    saved beside the graph were left behind as ``.bilm.onnx.*.partial.data``."""
    if weights == "beside":
        monkeypatch.setattr(LARGE_MODEL_THRESHOLD, 0)
    path = tmp_path / "bilm.onnx"
    path.write_bytes(b"the good export of yesterday")
    monkeypatch.setattr("elmo.onnx_export.CHECK_TOLERANCE", -1.0)  # every difference, even 0, fails the check
    with pytest.raises(RuntimeError, match=r"bilm\.onnx: onnxruntime's outputs differ .*; nothing written"):
        export_onnx(_random_bilm(RANDOM_OPTIONS), path)
    assert path.read_bytes() == b"the good export of yesterday"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bilm.onnx"]


def test_a_check_whose_difference_is_nan_fails_it(tmp_path):
    """A model with a NaN weight gives NaN outputs both ways; ``NaN > tolerance`` is false, so the check passed."""
    bilm = _random_bilm(RANDOM_OPTIONS)
    with torch.no_grad():
        bilm.token_encoder.char_embeddings[:, 0] = float("nan")
    assert torch.isnan(bilm(batch_to_char_ids([["bank"]]))[0].layers).any()
    with pytest.raises(RuntimeError, match=r"differ from BiLM\.forward's by up to nan .*; nothing written"):
        export_onnx(bilm, tmp_path / "bilm.onnx")
    assert list(tmp_path.iterdir()) == []


def test_the_checked_graph_is_not_at_path_until_it_has_passed_and_is_then_renamed_there(tmp_path, monkeypatch):
    """A kill while saving or checking must not leave a cut-short or unchecked graph under the final name."""
    path, seen = tmp_path / "bilm.onnx", []
    check = onnx_export.max_difference

    def spying_check(bilm, checked, char_ids=None):
        seen.append((Path(checked), path.exists(), Path(checked).read_bytes()))
        return check(bilm, checked, char_ids)

    monkeypatch.setattr(onnx_export, "max_difference", spying_check)
    exported = export_onnx(_random_bilm(RANDOM_OPTIONS), path)
    [(checked, final_existed, checked_bytes)] = seen
    assert checked.name == path.name and checked.parent.parent == path.parent and not final_existed
    assert exported.path == path and path.read_bytes() == checked_bytes  # the very graph that passed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bilm.onnx"]


def test_weights_beside_the_graph_are_name_onnx_data_which_the_graph_names_and_which_move_with_it(
        random_export, tmp_path, monkeypatch):
    """They used to go to ``.elmo.onnx.*.partial.data``, named so in the graph, and only the graph was renamed."""
    bilm, _ = random_export
    monkeypatch.setattr(LARGE_MODEL_THRESHOLD, 0)
    out = tmp_path / "out"
    export_onnx(bilm, out / "elmo.onnx")
    assert sorted(path.name for path in out.iterdir()) == ["elmo.onnx", "elmo.onnx.data"]
    graph = onnx.load(str(out / "elmo.onnx"), load_external_data=False).graph
    locations = {entry.value for tensor in graph.initializer for entry in tensor.external_data
                 if entry.key == "location"}
    assert locations == {"elmo.onnx.data"}
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("elmo.onnx", "elmo.onnx.data"):
        os.replace(out / name, moved / name)
    char_ids = batch_to_char_ids(BATCHES["mixed-lengths"])
    layers, mask = OnnxBiLM(moved / "elmo.onnx")(char_ids)
    with torch.no_grad():
        expected = bilm(char_ids)[0]
    np.testing.assert_array_equal(mask, expected.mask.numpy())
    np.testing.assert_allclose(layers, expected.layers.numpy(), rtol=0, atol=1e-5)


# Largest difference between the graph of a model whose weights were rounded to the dtype and the float32 model's
# graph on the random model's "longer" batch, about 2.5 times what was measured (0.011 and 0.091): rounding only,
# where a graph computed in the dtype, or from other weights, would differ far more.
ROUNDING_TOLERANCE = {torch.float16: 0.03, torch.bfloat16: 0.25}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_a_half_precision_bilm_exports_a_float32_graph_equal_to_the_float32_models_within_its_rounding(
        dtype, random_export, tmp_path):
    """A float16 model used to give a float16 graph, which crashed onnxruntime in the check (bfloat16: an
    InvalidGraph error)."""
    bilm, float32_path = random_export
    rounded = copy.deepcopy(bilm).to(dtype)
    exported = export_onnx(rounded, tmp_path / "rounded.onnx")
    assert next(rounded.parameters()).dtype == dtype  # the caller's model is left as it was
    graph = onnx.load(str(exported.path)).graph
    assert {output.name: output.type.tensor_type.elem_type for output in graph.output} == {
        "layers": onnx.TensorProto.FLOAT, "mask": onnx.TensorProto.BOOL}
    char_ids = batch_to_char_ids(BATCHES["longer"])
    layers, mask = OnnxBiLM(exported.path)(char_ids)
    with torch.no_grad():
        widened = copy.deepcopy(rounded).float()(char_ids)[0]  # the rounded weights, exactly, in float32
    np.testing.assert_array_equal(mask, widened.mask.numpy())
    np.testing.assert_allclose(layers, widened.layers.numpy(), rtol=0, atol=1e-5)
    float32_layers, _ = OnnxBiLM(float32_path)(char_ids)
    np.testing.assert_allclose(layers, float32_layers, rtol=0, atol=ROUNDING_TOLERANCE[dtype])


@pytest.mark.parametrize(("out", "opset", "expected"), [
    ("x.onnx", "999", f"opset 999: the installed onnx {onnx.__version__} knows opsets up to "
                      f"{onnx.defs.onnx_opset_version()}"),
    ("emptydir", "18", "the ONNX file emptydir is a directory; expected the name of a file to write"),
    ("afile/x.onnx", "18", "the ONNX file afile/x.onnx: afile is a file, not a directory to write in"),
], ids=["opset-past-onnx", "out-a-directory", "out-under-a-file"])
def test_an_opset_past_onnx_or_an_out_that_cannot_be_a_file_is_refused_before_the_model_loads(
        out, opset, expected, tmp_path, monkeypatch, capsys):
    """Each failed after the export (20 s and more), the opset as a RuntimeError traceback, the directory as an
    IsADirectoryError one."""

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded before the options were checked")

    monkeypatch.setattr(ModelDir, "find", no_load)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "emptydir").mkdir()
    (tmp_path / "afile").write_text("")
    assert main(["export-onnx", "en", "--out", out, "--opset", opset]) == 2
    error = capsys.readouterr().err
    assert error == f"elmo export-onnx: error: {expected}\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile", "emptydir"]
    assert not any((tmp_path / "emptydir").iterdir())


@pytest.mark.parametrize("out", ["good.txt", "mcopy/weights.hdf5", "mcopy/options.json", "en"],
                         ids=["a-text-file", "the-model-weights", "the-model-options", "no-suffix"])
def test_an_out_not_named_onnx_is_refused_before_the_model_loads_and_what_is_there_kept(out, tmp_path, monkeypatch,
                                                                                        capsys):
    """``--out mcopy/weights.hdf5`` replaced the model's weights with the graph, ``--out good.txt`` a text file."""

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded before --out was checked")

    monkeypatch.chdir(tmp_path)
    shutil.copytree(ModelDir.find("en").path, tmp_path / "mcopy")
    (tmp_path / "good.txt").write_text("a b\n")
    before = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    monkeypatch.setattr(ModelDir, "find", no_load)
    assert main(["export-onnx", "mcopy", "--out", out]) == 2
    assert capsys.readouterr().err == (f"elmo export-onnx: error: the ONNX file {out} does not end in .onnx; give a "
                                       "file name ending in .onnx (a name of another kind of file, such as the "
                                       "model's weights, would be replaced by the graph)\n")
    assert {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["good.txt", "mcopy"]
