"""A task model directory: saved whole or not at all, and a directory that is no task model refused, naming it."""

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from elmo.tasks import spec as spec_module
from elmo.tasks.spec import TaskSpec

NOT_ITS_MODEL = "model.safetensors does not hold the model task.json describes"


def _spec(hidden: int) -> TaskSpec:
    """A classifier on static vectors only: it builds without a biLM."""
    return TaskSpec("classifier", ("neg", "pos"), None, None, static="random", static_dim=8, hidden=hidden)


def _saved(out: Path, hidden: int, metrics: dict | None = None) -> dict[str, torch.Tensor]:
    spec = _spec(hidden)
    model = spec.build()
    spec.save(model, out, metrics)
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def test_a_save_interrupted_before_its_end_leaves_the_previous_model_whole_and_its_cache(tmp_path: Path,
                                                                                         monkeypatch):
    """The new weights were written beside the old task.json, which then failed to load (size mismatch)."""
    out = tmp_path / "model"
    old_weights = _saved(out, hidden=4)
    (out / "features").mkdir()
    (out / "features" / "train.h5").write_bytes(b"cached layers")
    write_text = spec_module.write_text_atomic

    def interrupted_at_the_spec(path: Path, text: str) -> None:
        if path.name == "task.json":
            raise KeyboardInterrupt
        write_text(path, text)

    monkeypatch.setattr(spec_module, "write_text_atomic", interrupted_at_the_spec)
    new_spec = _spec(hidden=8)
    with pytest.raises(KeyboardInterrupt):
        new_spec.save(new_spec.build(), out)

    loaded_spec, loaded = TaskSpec.load(out)
    assert loaded_spec.hidden == 4
    assert loaded.state_dict().keys() == old_weights.keys()
    assert all(torch.equal(loaded.state_dict()[name], tensor) for name, tensor in old_weights.items())
    assert (out / "features" / "train.h5").read_bytes() == b"cached layers"
    assert [path.name for path in tmp_path.iterdir()] == ["model"]  # no partial directory left beside it


def test_a_model_saved_over_another_replaces_its_files_and_keeps_the_feature_cache(tmp_path: Path):
    out = tmp_path / "model"
    _saved(out, hidden=4, metrics={"test": 0.25})
    (out / "features").mkdir()
    (out / "features" / "train.h5").write_bytes(b"cached layers")
    new_weights = _saved(out, hidden=8, metrics={"test": 0.75})
    assert sorted(path.name for path in out.iterdir()) == ["features", "metrics.json", "model.safetensors",
                                                           "task.json"]
    assert json.loads((out / "metrics.json").read_text(encoding="utf-8")) == {"test": 0.75}
    assert json.loads((out / "task.json").read_text(encoding="utf-8"))["hidden"] == 8
    _, loaded = TaskSpec.load(out)
    assert all(torch.equal(loaded.state_dict()[name], tensor) for name, tensor in new_weights.items())
    assert (out / "features" / "train.h5").read_bytes() == b"cached layers"


def test_a_save_over_a_directory_holding_other_files_is_refused_before_writing(tmp_path: Path):
    """The directory is replaced whole, so its other files would be deleted."""
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    spec = _spec(hidden=4)
    with pytest.raises(ValueError, match=r"holds files other than a task model's \(notes.txt\)"):
        spec.save(spec.build(), tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


def test_weights_of_another_model_beside_task_json_are_refused_naming_the_directory(tmp_path: Path):
    out = tmp_path / "model"
    _saved(out, hidden=4)
    other = _spec(hidden=8).build()
    save_file({name: tensor.contiguous() for name, tensor in other.state_dict().items()},
              str(out / "model.safetensors"))
    with pytest.raises(ValueError, match=rf"{re.escape(str(out))}: {NOT_ITS_MODEL} \(.*size mismatch"):
        TaskSpec.load(out)


def test_cut_short_weights_are_refused_naming_the_directory(tmp_path: Path):
    out = tmp_path / "model"
    _saved(out, hidden=4)
    weights = out / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ValueError, match=rf"{re.escape(str(out))}: {NOT_ITS_MODEL}"):
        TaskSpec.load(out)


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"kind": "tagger"}', b"\xff\xfe{}"])
def test_a_task_json_that_is_no_spec_is_refused_naming_it(tmp_path: Path, content: bytes):
    out = tmp_path / "model"
    _saved(out, hidden=4)
    (out / "task.json").write_bytes(content)
    with pytest.raises(ValueError, match=rf"{re.escape(str(out / 'task.json'))} is not a task model's spec"):
        TaskSpec.load(out)


def test_missing_weights_are_named(tmp_path: Path):
    out = tmp_path / "model"
    _saved(out, hidden=4)
    (out / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=rf"{re.escape(str(out))} holds no model.safetensors"):
        TaskSpec.load(out)
