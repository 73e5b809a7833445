"""scripts/domain_task.py keeps a work folder's data and runs for a rerun only when they were made for the same
task and model."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parents[2] / "scripts"


@pytest.fixture
def domain_task(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # it imports run_tasks, a script beside it
    spec = importlib.util.spec_from_file_location("domain_task", SCRIPTS / "domain_task.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_folder_made_for_another_task_or_model_is_refused_not_reused(domain_task, tmp_path: Path):
    record = tmp_path / "runs" / "general" / "made-with.json"
    made_with = {"model": "en", "fingerprint": "f44f"}
    domain_task.check_made_with(record, made_with)
    assert json.loads(record.read_text()) == made_with
    domain_task.check_made_with(record, made_with)  # the same: kept
    with pytest.raises(SystemExit, match=r"was made with .*'f44f'.*, not .*'0b1d'.*: give another --work"):
        domain_task.check_made_with(record, {"model": "en", "fingerprint": "0b1d"})
