"""Training checkpoints: everything needed to continue a run exactly, in safetensors and JSON (no pickle).

A checkpoint is a directory ``checkpoints/step-NNNNNNNN`` holding ``model.safetensors`` (biLM and
softmax), ``optimizer.safetensors``, ``state.safetensors`` (the LSTM state carried between batches and
torch's RNG state), ``state.json`` (step, options, every row's data position, numpy's and Python's RNG
states, the optimizer's hyper-parameters) and ``vocab.txt``. It is written beside its final name and
renamed into place, so a killed run leaves the previous checkpoints intact.
"""

import json
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from elmo.bilm import BiLMState
from elmo.config import BiLMConfig
from elmo.files import new_partial_directory, publish_directory, remove_stale_partials
from elmo.training.corpus import RowPosition
from elmo.training.vocab import Vocabulary

CHECKPOINT_FORMAT = "elmo-training-checkpoint/1"
_STEP_DIRECTORY = re.compile(r"^step-(\d+)$")


class CheckpointError(ValueError):
    """A directory that holds no usable checkpoint."""


@dataclass
class Checkpoint:
    """A run's complete state after ``step`` optimizer steps."""

    step: int
    options: dict[str, Any]
    config: BiLMConfig
    vocab: Vocabulary
    model_state: dict[str, torch.Tensor]
    optimizer_state: dict[str, Any]
    lstm_state: BiLMState
    rows: list[RowPosition]
    rng: dict[str, Any]


def capture_rng() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def restore_rng(rng: dict[str, Any]) -> None:
    torch.set_rng_state(rng["torch"])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["python"])


def _rng_to_json(rng: dict[str, Any]) -> dict[str, Any]:
    kind, keys, position, has_gauss, cached_gauss = rng["numpy"]
    version, internal, gauss_next = rng["python"]
    return {
        "numpy": [kind, keys.tolist(), int(position), int(has_gauss), float(cached_gauss)],
        "python": [version, list(internal), gauss_next],
    }


def _rng_from_json(data: dict[str, Any], torch_state: torch.Tensor) -> dict[str, Any]:
    kind, keys, position, has_gauss, cached_gauss = data["numpy"]
    version, internal, gauss_next = data["python"]
    return {
        "torch": torch_state,
        "numpy": (kind, np.array(keys, dtype=np.uint32), position, has_gauss, cached_gauss),
        "python": (version, tuple(internal), gauss_next),
    }


def _optimizer_to_files(optimizer_state: dict[str, Any]) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    tensors = {}
    for index, slots in optimizer_state["state"].items():
        for name, value in slots.items():
            tensors[f"state.{index}.{name}"] = torch.as_tensor(value).detach().contiguous().clone()
    return tensors, optimizer_state["param_groups"]


def _optimizer_from_files(tensors: dict[str, torch.Tensor], param_groups: list[dict[str, Any]]) -> dict[str, Any]:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, tensor in tensors.items():
        _, index, name = key.split(".", 2)
        state.setdefault(int(index), {})[name] = tensor
    return {"state": state, "param_groups": param_groups}


def checkpoint_directory(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"step-{step:08d}"


def save_checkpoint(run_dir: Path, checkpoint: Checkpoint, keep: int) -> Path:
    """Write ``checkpoint`` atomically, then delete all but the newest ``keep`` checkpoints."""
    final = checkpoint_directory(run_dir, checkpoint.step)
    partial = new_partial_directory(final)
    try:
        save_file({name: t.detach().contiguous() for name, t in checkpoint.model_state.items()},
                  str(partial / "model.safetensors"))
        optimizer_tensors, param_groups = _optimizer_to_files(checkpoint.optimizer_state)
        save_file(optimizer_tensors, str(partial / "optimizer.safetensors"))
        save_file({"lstm_h": checkpoint.lstm_state.h.contiguous(), "lstm_c": checkpoint.lstm_state.c.contiguous(),
                   "torch_rng": checkpoint.rng["torch"]}, str(partial / "state.safetensors"))
        checkpoint.vocab.save(partial / "vocab.txt")
        state = {
            "format": CHECKPOINT_FORMAT,
            "step": checkpoint.step,
            "options": checkpoint.options,
            "model_options": checkpoint.config.to_options(),
            "optimizer_param_groups": param_groups,
            "rows": [row.to_json() for row in checkpoint.rows],
            "rng": _rng_to_json(checkpoint.rng),
        }
        (partial / "state.json").write_text(json.dumps(state) + "\n", encoding="utf-8")
        publish_directory(partial, final)
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)
    for old in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    directory = Path(run_dir) / "checkpoints"
    if not directory.is_dir():
        return []
    remove_stale_partials(directory)
    found = [(int(match[1]), path) for path in directory.iterdir()
             if (match := _STEP_DIRECTORY.match(path.name)) and (path / "state.json").is_file()]
    return [path for _, path in sorted(found)]


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint directory itself, or the newest checkpoint of a run directory."""
    path = Path(path)
    if (path / "state.json").is_file():
        return path
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such run or checkpoint directory")
    checkpoints = list_checkpoints(path)
    if not checkpoints:
        raise CheckpointError(f"{path} holds no checkpoint (expected {path}/checkpoints/step-*/state.json)")
    return checkpoints[-1]


def load_checkpoint(path: str | Path) -> Checkpoint:
    directory = resolve_checkpoint(path)
    try:
        state = json.loads((directory / "state.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{directory}/state.json is unreadable ({error})") from None
    if state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{directory}/state.json has format {state.get('format')!r}; "
                              f"expected {CHECKPOINT_FORMAT!r}")
    tensors = load_file(str(directory / "state.safetensors"))
    return Checkpoint(
        step=int(state["step"]),
        options=state["options"],
        config=BiLMConfig.from_options(state["model_options"], source=f"{directory}/state.json"),
        vocab=Vocabulary.load(directory / "vocab.txt"),
        model_state=load_file(str(directory / "model.safetensors")),
        optimizer_state=_optimizer_from_files(load_file(str(directory / "optimizer.safetensors")),
                                              state["optimizer_param_groups"]),
        lstm_state=BiLMState(tensors["lstm_h"], tensors["lstm_c"]),
        rows=[RowPosition.from_json(row) for row in state["rows"]],
        rng=_rng_from_json(state["rng"], tensors["torch_rng"]),
    )
