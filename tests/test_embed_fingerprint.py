"""``elmo embed`` knows the model by its fingerprint (``elmo.fingerprint``: options and weights): a resumed run, or
a shard restarted in a directory of parts, keeps only what the same model made, and another model of the same
shape is refused with both fingerprints named."""

import json
import signal
from pathlib import Path
from typing import NamedTuple

import h5py
import numpy as np
import pytest
import torch

from elmo import BiLM, load_bilm, save_bilm
from elmo.cli import main
from elmo.embedder import Embedder
from elmo.fingerprint import model_fingerprint
from elmo.pooling import pool

LINES = [f"line {i} : the bank of the river {'and more words ' * (i % 3)}" for i in range(40)]


class Model(NamedTuple):
    arguments: list[str]  # --options-file and --weight-file
    fingerprint: str
    pooled: np.ndarray  # (lines, layers, dim): every line's mean-pooled layers, from the Python API


@pytest.fixture(scope="module")
def models(fixture_bilm: BiLM, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Model]:
    """Two models of the fixture's shape with other random weights, A and B, written as AllenNLP's two files."""
    made = {}
    for name, seed in (("A", 0), ("B", 1)):
        torch.manual_seed(seed)
        folder = tmp_path_factory.mktemp(f"model-{name}")
        save_bilm(BiLM(fixture_bilm.config).eval(), folder / "options.json", folder / "weights.hdf5")
        bilm = load_bilm(folder / "options.json", folder / "weights.hdf5")
        pooled = np.stack([pool(array, "mean") for array in Embedder(bilm, "whitespace").embed(LINES, "all")])
        made[name] = Model(["--options-file", str(folder / "options.json"), "--weight-file",
                            str(folder / "weights.hdf5")], model_fingerprint(bilm), pooled)
    assert made["A"].fingerprint != made["B"].fingerprint
    assert not np.allclose(made["A"].pooled, made["B"].pooled, atol=1e-3)  # so a mixed output would show
    return made


def _refusal(made_by: Model, running: Model) -> str:
    return (f"made with another model (fingerprint {made_by.fingerprint[:12]}; this model has fingerprint "
            f"{running.fingerprint[:12]})")


def _read(output: Path) -> np.ndarray:
    if output.suffix == ".npy":
        return np.load(output)
    with h5py.File(output, "r") as handle:
        return np.stack([handle[str(i)][...] for i in range(len(LINES))])


@pytest.mark.parametrize("name", ["out.hdf5", "out.npy"])  # the HDF5 writer and the chunked one
def test_a_partial_output_is_refused_to_another_model_of_its_shape_and_resumed_by_its_own(
        name, models, text, tmp_path, capsys, monkeypatch, interrupt_after):
    output, partial = tmp_path / name, tmp_path / f"{name}.partial"
    command = ["embed", str(text), str(output), "--pooling", "mean", "--batch-size", "2", "--quiet"]
    with monkeypatch.context() as patch:
        interrupt_after(patch, 20, signal.SIGINT)
        assert main([*command, *models["A"].arguments]) == 130
    capsys.readouterr()
    assert main([*command, *models["B"].arguments, "--resume"]) == 2
    assert _refusal(models["A"], models["B"]) in capsys.readouterr().err
    assert partial.exists() and not output.exists()  # refused, not thrown away
    assert main([*command, *models["A"].arguments, "--resume"]) == 0
    assert "resumed: 20 lines already done" in capsys.readouterr().out
    np.testing.assert_allclose(_read(output), models["A"].pooled, atol=1e-5, rtol=0)


def test_a_directory_of_parts_refuses_another_models_shard_and_skips_only_its_own_models_whole_part(
        models, text, tmp_path, capsys):
    parts = tmp_path / "out"
    command = ["embed", str(text), f"{parts}/", "--format", "npy", "--pooling", "mean", "--quiet"]
    assert main([*command, "--shard", "0/2", *models["A"].arguments]) == 0
    capsys.readouterr()
    for shard in ("0/2", "1/2"):  # its own part, whole, is not skipped; another's part is not joined
        assert main([*command, "--shard", shard, *models["B"].arguments]) == 2
        error = capsys.readouterr().err
        assert "part-00000-of-00002.npy was made with another model" in error
        assert _refusal(models["A"], models["B"]) in error
    assert sorted(path.name for path in parts.iterdir()) == ["_part-00000-of-00002.json", "part-00000-of-00002.npy"]
    assert main([*command, "--shard", "0/2", *models["A"].arguments]) == 0
    assert "part-00000-of-00002.npy (shard 0/2) is already whole; skipped" in capsys.readouterr().out
    assert main([*command, "--shard", "1/2", *models["A"].arguments]) == 0
    manifest = json.loads((parts / "_manifest.json").read_text())
    assert manifest["options"]["model"] == models["A"].fingerprint
    union = np.concatenate([np.load(parts / part["file"]) for part in manifest["parts"]])
    lines = [*range(0, len(LINES), 2), *range(1, len(LINES), 2)]  # shard 0's lines, then shard 1's
    np.testing.assert_allclose(union, models["A"].pooled[lines], atol=1e-5, rtol=0)
