"""Training checkpoints: everything needed to continue a run exactly, in safetensors and JSON (no pickle).

A checkpoint is a directory ``checkpoints/step-NNNNNNNN`` holding ``model.safetensors`` (biLM and
softmax), ``optimizer.safetensors``, ``state.safetensors`` (the LSTM state carried between batches and
torch's RNG state), ``state.json`` (step, options, every row's data position, numpy's and Python's RNG
states, the optimizer's hyper-parameters, and the size and sha256 of every other file) and ``vocab.txt``.
It is written beside its final name and renamed into place, so a killed run leaves the previous checkpoints
intact; the checksums catch what happens to the files afterwards (a disk or a copy that damages them), so
a damaged checkpoint is refused by name instead of resuming to NaN weights.
"""

import json
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from elmo.bilm import BiLMState
from elmo.config import BiLMConfig
from elmo.files import new_partial_directory, publish_directory, remove_directory, sha256_of
from elmo.training.corpus import RowPosition
from elmo.training.language_model import LanguageModel
from elmo.training.vocab import Vocabulary

CHECKPOINT_FORMAT = "elmo-training-checkpoint/2"
# Checkpoints written before the checksums; read, but nothing to verify them against.
_UNCHECKED_FORMAT = "elmo-training-checkpoint/1"
STATE_FILE = "state.json"
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
CARRIED_STATE_FILE = "state.safetensors"
VOCAB_FILE = "vocab.txt"
CHECKPOINTS_DIRECTORY = "checkpoints"  # in the run directory
CHECKSUMMED_FILES = (MODEL_FILE, OPTIMIZER_FILE, CARRIED_STATE_FILE, VOCAB_FILE)
DAMAGED_SUFFIX = ".damaged"
_STEP_DIRECTORY = re.compile(r"^step-(\d+)$")


class CheckpointError(ValueError):
    """A directory that holds no usable checkpoint."""


@dataclass
class LogInterval:
    """The losses summed since the last log line, so a run resumed between two log lines writes the same
    next line as the run that was not stopped."""

    nll_sums: tuple[float, float] = (0.0, 0.0)
    n_targets: int = 0
    n_steps: int = 0


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
    log_interval: LogInterval = field(default_factory=LogInterval)
    # The training text's files as the run globbed them, with their sizes: ``rows`` are byte offsets into them,
    # so a run resumes only on the same files (empty for checkpoints written before it was recorded).
    corpus_files: list[tuple[str, int]] = field(default_factory=list)

    def language_model(self) -> LanguageModel:
        """A language model made afresh from this checkpoint's configuration and weights (on the CPU)."""
        model = LanguageModel(self.config, len(self.vocab))
        model.load_state_dict(self.model_state)
        return model


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
    return run_dir / CHECKPOINTS_DIRECTORY / f"step-{step:08d}"


def save_checkpoint(run_dir: Path, checkpoint: Checkpoint, keep: int) -> Path:
    """Write ``checkpoint`` atomically, then delete all but the newest ``keep`` checkpoints."""
    final = checkpoint_directory(run_dir, checkpoint.step)
    partial = new_partial_directory(final)
    try:
        save_file({name: t.detach().contiguous() for name, t in checkpoint.model_state.items()},
                  str(partial / MODEL_FILE))
        optimizer_tensors, param_groups = _optimizer_to_files(checkpoint.optimizer_state)
        save_file(optimizer_tensors, str(partial / OPTIMIZER_FILE))
        save_file({"lstm_h": checkpoint.lstm_state.h.contiguous(), "lstm_c": checkpoint.lstm_state.c.contiguous(),
                   "torch_rng": checkpoint.rng["torch"]}, str(partial / CARRIED_STATE_FILE))
        checkpoint.vocab.save(partial / VOCAB_FILE)
        interval = checkpoint.log_interval
        state = {
            "format": CHECKPOINT_FORMAT,
            "step": checkpoint.step,
            "options": checkpoint.options,
            "model_options": checkpoint.config.to_options(),
            "optimizer_param_groups": param_groups,
            "rows": [row.to_json() for row in checkpoint.rows],
            "rng": _rng_to_json(checkpoint.rng),
            "log_interval": {"nll_sums": list(interval.nll_sums), "n_targets": interval.n_targets,
                             "n_steps": interval.n_steps},
            "files": {name: _describe(partial / name) for name in CHECKSUMMED_FILES},
            "corpus_files": [[path, size] for path, size in checkpoint.corpus_files],
        }
        (partial / STATE_FILE).write_text(json.dumps(state) + "\n", encoding="utf-8")
        publish_directory(partial, final)
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)
    for old in list_checkpoints(run_dir)[:-keep]:
        remove_directory(old, old)  # set aside first: a kill mid-delete leaves no step-N that lists as complete
    return final


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first. Reads only: a partial directory beside them may be a live
    run's checkpoint in the making (the trainer clears a killed run's when it starts)."""
    directory = Path(run_dir) / CHECKPOINTS_DIRECTORY
    if not directory.is_dir():
        return []
    found = [(int(match[1]), path) for path in directory.iterdir()
             if (match := _STEP_DIRECTORY.match(path.name)) and (path / STATE_FILE).is_file()]
    return [path for _, path in sorted(found)]


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint directory itself, or the newest checkpoint of a run directory."""
    path = Path(path)
    if (path / STATE_FILE).is_file():
        return path
    if path.is_file():
        raise CheckpointError(f"{path} is a file; expected a directory: a run's (what `elmo train --out` wrote), "
                              "a checkpoint's or a model's")
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such run or checkpoint directory")
    checkpoints = list_checkpoints(path)
    if not checkpoints:
        raise CheckpointError(f"{path} holds no checkpoint (expected {path}/checkpoints/step-*/{STATE_FILE})")
    return checkpoints[-1]


def load_checkpoint(path: str | Path) -> Checkpoint:
    """The checkpoint in ``path`` (a checkpoint directory, or a run's newest), its files verified against the
    sizes and sha256 sums recorded in ``state.json``; ``CheckpointError`` names the file at fault."""
    directory = resolve_checkpoint(path)
    try:
        state = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{directory}/{STATE_FILE} is unreadable ({error})") from None
    if not isinstance(state, dict) or state.get("format") not in (CHECKPOINT_FORMAT, _UNCHECKED_FORMAT):
        found = state.get("format") if isinstance(state, dict) else None
        raise CheckpointError(f"{directory}/{STATE_FILE} has format {found!r}; expected {CHECKPOINT_FORMAT!r}")
    if state["format"] == CHECKPOINT_FORMAT:
        _verify_files(directory, state.get("files"))
    try:
        tensors = _read_tensors(directory / CARRIED_STATE_FILE)
        interval = state.get("log_interval") or {}
        checkpoint = Checkpoint(
            step=int(state["step"]),
            options=state["options"],
            config=BiLMConfig.from_options(state["model_options"], source=f"{directory}/{STATE_FILE}"),
            vocab=Vocabulary.load(directory / VOCAB_FILE),
            model_state=_read_tensors(directory / MODEL_FILE),
            optimizer_state=_optimizer_from_files(_read_tensors(directory / OPTIMIZER_FILE),
                                                  state["optimizer_param_groups"]),
            lstm_state=BiLMState(tensors["lstm_h"], tensors["lstm_c"]),
            rows=[RowPosition.from_json(row) for row in state["rows"]],
            rng=_rng_from_json(state["rng"], tensors["torch_rng"]),
            log_interval=LogInterval(tuple(interval.get("nll_sums", (0.0, 0.0))), int(interval.get("n_targets", 0)),
                                     int(interval.get("n_steps", 0))),
            corpus_files=[(str(path), int(size)) for path, size in state.get("corpus_files", [])],
        )
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{directory}: the checkpoint is unreadable ({type(error).__name__}: {error}); "
                              "is it damaged, or written by another program?") from None
    nonfinite = nonfinite_tensors(checkpoint.model_state)
    if nonfinite:
        raise CheckpointError(f"{directory}/{MODEL_FILE} holds NaN or infinite weights ({', '.join(nonfinite[:3])}"
                              f"{', ...' if len(nonfinite) > 3 else ''}); the run diverged before it was written")
    return checkpoint


def load_newest_good_checkpoint(run_dir: str | Path) -> tuple[Checkpoint, Path, list[tuple[Path, str]]]:
    """The newest checkpoint of a run that loads and verifies, its directory, and the newer ones that did
    not, each with the reason; ``CheckpointError`` when none does."""
    run_dir = Path(run_dir)
    if (run_dir / STATE_FILE).is_file():
        candidates = [run_dir]
    else:
        resolve_checkpoint(run_dir)  # the usual errors for a missing run or one without checkpoints
        candidates = list_checkpoints(run_dir)[::-1]
    refused: list[tuple[Path, str]] = []
    for candidate in candidates:
        try:
            return load_checkpoint(candidate), candidate, refused
        except CheckpointError as error:
            refused.append((candidate, str(error)))
    reasons = "; ".join(reason for _, reason in refused)
    raise CheckpointError(f"{run_dir}: no checkpoint of the run is intact ({reasons})")


def set_aside(checkpoint_dir: Path) -> Path:
    """Rename a damaged checkpoint out of the run's list (so it is neither resumed from nor counted when old
    checkpoints are deleted), keeping its files for a look."""
    target = checkpoint_dir.with_name(checkpoint_dir.name + DAMAGED_SUFFIX)
    number = 1
    while target.exists():
        number += 1
        target = checkpoint_dir.with_name(f"{checkpoint_dir.name}{DAMAGED_SUFFIX}-{number}")
    checkpoint_dir.rename(target)
    return target


def nonfinite_tensors(tensors: dict[str, torch.Tensor]) -> list[str]:
    """Names of the floating-point tensors that hold a NaN or an infinity."""
    return [name for name, tensor in tensors.items()
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())]


def _describe(path: Path) -> dict[str, Any]:
    return {"bytes": path.stat().st_size, "sha256": sha256_of(path)}


def _verify_files(directory: Path, recorded: Any) -> None:
    if not (isinstance(recorded, dict) and set(recorded) == set(CHECKSUMMED_FILES)
            and all(isinstance(entry, dict) for entry in recorded.values())):
        raise CheckpointError(f"{directory}/{STATE_FILE} lacks the sizes and checksums of "
                              f"{', '.join(CHECKSUMMED_FILES)}; it is damaged")
    for name in CHECKSUMMED_FILES:
        path, expected = directory / name, recorded[name]
        if not path.is_file():
            raise CheckpointError(f"{path} is missing")
        size = path.stat().st_size
        if size != expected.get("bytes"):
            raise CheckpointError(f"{path} is {size} bytes; {STATE_FILE} records {expected.get('bytes')} "
                                  "(cut short or changed since the checkpoint was written)")
        if sha256_of(path) != expected.get("sha256"):
            raise CheckpointError(f"{path} fails its sha256 check: its bytes changed since the checkpoint was "
                                  "written (a damaged disk or copy)")


def _read_tensors(path: Path) -> dict[str, torch.Tensor]:
    """A safetensors file; one that is missing, cut short or garbled is a ``CheckpointError`` naming it."""
    try:
        return load_file(str(path))
    except (OSError, SafetensorError) as error:
        raise CheckpointError(f"{path} is unreadable ({error})") from None
