"""Fixtures for the training tests; one CPU thread, so timings and bit-exact comparisons do not depend on
what else runs on the machine."""

import json
from pathlib import Path

import pytest
import torch
from training_helpers import MICRO_CONFIG, write_synthetic_corpus


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def micro_options_file(tmp_path: Path) -> Path:
    path = tmp_path / "micro_options.json"
    path.write_text(json.dumps(MICRO_CONFIG.to_options()), encoding="utf-8")
    return path


@pytest.fixture
def synthetic_corpus(tmp_path: Path) -> Path:
    return write_synthetic_corpus(tmp_path / "corpus.txt", 400)


@pytest.fixture
def held_out_corpus(tmp_path: Path) -> Path:
    """Validation text of the same grammar in a file of its own (training text is refused as --valid)."""
    return write_synthetic_corpus(tmp_path / "held-out.txt", 60, seed=1)
