"""Checkpoints that were damaged after they were written: refused by name, never resumed from, never the
reason a good checkpoint is deleted."""

import dataclasses
import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
from run_helpers import micro_options, train_micro_run
from safetensors.torch import load_file

from elmo.cli import main
from elmo.training import TrainingOptions, load_language_model, train
from elmo.training.checkpoints import CheckpointError, list_checkpoints, load_checkpoint, save_checkpoint


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(data)
    assert path.stat().st_size == size


def _names(run: Path) -> list[str]:
    return [checkpoint.name for checkpoint in list_checkpoints(run)]


def test_a_same_size_overwrite_of_the_weights_is_refused_naming_the_file(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path
):
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=10)
    weights = list_checkpoints(run)[-1] / "model.safetensors"
    _overwrite(weights, weights.stat().st_size - 5000, b"\xff" * 4096)  # NaN floats, as in the report

    with pytest.raises(CheckpointError, match=r"step-00000010/model\.safetensors fails its sha256 check"):
        load_checkpoint(run)
    with pytest.raises(CheckpointError, match=r"model\.safetensors fails its sha256 check"):
        load_language_model(run)


@pytest.mark.parametrize("name", ["model.safetensors", "optimizer.safetensors", "state.safetensors", "vocab.txt"])
def test_a_truncated_checkpoint_file_is_a_clean_error_naming_it(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path, name: str
):
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=2)
    path = list_checkpoints(run)[-1] / name
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size // 2])
    with pytest.raises(CheckpointError, match=rf"{name} is {size // 2} bytes; state.json records {size}"):
        load_checkpoint(run)


def test_a_truncated_file_of_a_checkpoint_without_checksums_is_still_a_clean_error(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path
):
    """Checkpoints written before the checksums (format /1) are read without verification; a damaged file
    is still a ``CheckpointError`` that names it, not the safetensors library's own exception."""
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=2)
    checkpoint = list_checkpoints(run)[-1]
    state = json.loads((checkpoint / "state.json").read_text())
    state["format"] = "elmo-training-checkpoint/1"
    del state["files"], state["log_interval"]
    (checkpoint / "state.json").write_text(json.dumps(state))
    assert load_checkpoint(run).step == 2  # still readable

    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(CheckpointError, match=r"model\.safetensors is unreadable"):
        load_checkpoint(run)


def test_resume_skips_and_sets_aside_a_damaged_checkpoint_and_continues_bit_identically_from_the_one_before(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path, caplog: pytest.LogCaptureFixture
):
    whole = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "whole", max_steps=20,
                            checkpoint_every=5, keep_checkpoints=3)
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=15,
                          checkpoint_every=5, keep_checkpoints=3)
    assert _names(run) == ["step-00000005", "step-00000010", "step-00000015"]
    weights = run / "checkpoints" / "step-00000015" / "model.safetensors"
    _overwrite(weights, weights.stat().st_size - 5000, b"\xff" * 4096)

    caplog.set_level(logging.WARNING)
    assert train(TrainingOptions(corpus=[], max_steps=20), run, resume=True, progress=False) == 20
    assert "step-00000015/model.safetensors fails its sha256 check" in caplog.text
    assert "set aside as step-00000015.damaged" in caplog.text
    assert "resuming from" in caplog.text and "step 10" in caplog.text

    assert _names(run) == ["step-00000010", "step-00000015", "step-00000020"]
    assert (run / "checkpoints" / "step-00000015.damaged" / "model.safetensors").is_file()
    resumed = load_file(str(list_checkpoints(run)[-1] / "model.safetensors"))
    expected = load_file(str(list_checkpoints(whole)[-1] / "model.safetensors"))
    for name, tensor in expected.items():
        assert torch.isfinite(resumed[name]).all(), name
        assert torch.equal(resumed[name], tensor), name


def test_resume_refuses_a_run_whose_checkpoints_are_all_damaged_and_deletes_nothing(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path, capsys: pytest.CaptureFixture
):
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=4,
                          checkpoint_every=2, keep_checkpoints=3)
    for checkpoint in list_checkpoints(run):
        _overwrite(checkpoint / "optimizer.safetensors", 200, b"\xff" * 64)

    assert main(["train", "--resume", str(run), "--max-steps", "6", "--quiet"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("elmo train: error: ") and "no checkpoint of the run is intact" in error
    assert "step-00000002/optimizer.safetensors fails its sha256 check" in error
    assert "Traceback" not in error
    assert _names(run) == ["step-00000002", "step-00000004"]


def test_a_resume_whose_limit_the_run_has_passed_says_there_is_nothing_to_train(
        tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path, caplog: pytest.LogCaptureFixture):
    """`--resume RUN --max-steps 2` on a run at step 3 printed "stopped after step 3" and nothing else."""
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=3)
    with caplog.at_level(logging.WARNING, logger="elmo.training.trainer"):
        assert train(micro_options(tmp_path, synthetic_corpus, micro_options_file, max_steps=2), run, resume=True,
                     progress=False) == 3
    assert "the run is at step 3, at or past its limit of 2 steps (--max-steps or --epochs): nothing to train" \
        in caplog.text


def test_a_bfloat16_run_keeps_its_precision_on_resume_and_continues_bit_identically(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path
):
    """--precision is the run's own: a resumed run reads it from the checkpoint (and runs its products in
    bfloat16 again, which a float32 continuation would not give bit for bit)."""
    whole = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "whole", max_steps=6,
                            precision="bfloat16")
    float32 = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "float32", max_steps=6)
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=3, checkpoint_every=3,
                          precision="bfloat16")
    assert load_checkpoint(run).options["precision"] == "bfloat16"
    assert train(TrainingOptions(corpus=[], max_steps=6), run, resume=True, progress=False) == 6
    resumed = load_file(str(list_checkpoints(run)[-1] / "model.safetensors"))
    expected = load_file(str(list_checkpoints(whole)[-1] / "model.safetensors"))
    assert all(torch.equal(resumed[name], tensor) for name, tensor in expected.items())
    other = load_file(str(list_checkpoints(float32)[-1] / "model.safetensors"))
    assert not all(torch.equal(other[name], tensor) for name, tensor in expected.items())


def test_a_kill_while_an_old_checkpoint_is_deleted_leaves_no_checkpoint_that_lists_as_complete(
        tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path, monkeypatch: pytest.MonkeyPatch):
    """Old checkpoints were deleted under their own name: a kill after the delete had removed a file but not yet
    ``state.json`` left a ``step-N`` that counted as a checkpoint (and toward ``--keep-checkpoints``)."""
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=2)
    checkpoint = load_checkpoint(run)
    delete = shutil.rmtree

    def killed_after_one_file(path, *args, **kwargs):
        next(file for file in sorted(Path(path).iterdir()) if file.name != "state.json").unlink()
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "rmtree", killed_after_one_file)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(run, dataclasses.replace(checkpoint, step=3), keep=1)
    monkeypatch.setattr(shutil, "rmtree", delete)
    assert [path.name for path in list_checkpoints(run)] == ["step-00000003"]
    assert load_checkpoint(run).step == 3
