import json
from pathlib import Path

import pytest

from elmo import BiLM, load_bilm

FIXTURE_DIR = Path(__file__).parent / "fixtures" / "elmo"


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    """AllenNLP's bilm-tf fixture: options.json, lm_weights.hdf5, sentences and reference outputs."""
    return FIXTURE_DIR


@pytest.fixture(scope="session")
def fixture_bilm(fixture_dir: Path) -> BiLM:
    """The fixture biLM; tests must not modify it."""
    return load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")


@pytest.fixture(scope="session")
def fixture_sentences(fixture_dir: Path) -> list[list[str]]:
    """The fixture's 30 sentences, tokenized, in file order."""
    batches = json.loads((fixture_dir / "sentences.json").read_text())
    return [sentence.split() for batch in batches for sentence in batch]
