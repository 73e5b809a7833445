import json
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from elmo.cli import main
from elmo.embedder import Embedder


def _read(path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as handle:
        arrays = {name: handle[name][...] for name in handle if name != "sentence_to_index"}
        arrays["sentence_to_index"] = json.loads(handle["sentence_to_index"][0])
    return arrays


def test_output_read_back_with_plain_h5py_equals_the_api(fixture_dir, tmp_path):
    lines = ["the bank of the river", "", "she played a game", "x " * 10_000 + "end", "日本語 の 文"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir),
                 "--layers", "top", "--quiet"]) == 0
    written = _read(tmp_path / "out.hdf5")
    expected = Embedder.load(str(fixture_dir)).embed(lines, "top")
    assert written["sentence_to_index"] == {line: str(i) for i, line in enumerate(lines)}
    for i, array in enumerate(expected):
        np.testing.assert_array_equal(written[str(i)], array)
    assert written["3"].shape == (10_001, 32)
    assert not (tmp_path / "out.hdf5.partial").exists()


def test_bad_lines_are_reported_by_number_and_the_rest_goes_on(fixture_dir, tmp_path, caplog):
    raw = b"good line\n\xff\xfe broken bytes\nctrl\x00char here\n\nlast line\n"
    (tmp_path / "in.txt").write_bytes(raw)
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir),
                 "--quiet"]) == 0
    messages = " | ".join(record.getMessage() for record in caplog.records)
    assert "line 1: not valid UTF-8" in messages
    assert "line 2: control characters replaced" in messages
    assert "line 3: empty" in messages
    written = _read(tmp_path / "out.hdf5")
    assert [written[str(i)].shape[1] for i in range(5)] == [2, 3, 3, 0, 2]


def test_missing_model_is_a_clear_error_not_a_traceback(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("a b\n")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "o.hdf5"), "--model", "nope", "--quiet"]) == 2
    assert "neither a directory nor a shipped model" in capsys.readouterr().err


def test_killed_run_leaves_no_finished_file_and_resume_completes_it_identically(fixture_dir, tmp_path):
    lines = [f"sentence number {i} is about the bank and the river {i % 7}" for i in range(2500)]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    command = [sys.executable, "-m", "elmo.cli", "embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"),
               "--model", str(fixture_dir), "--batch-size", "8", "--quiet"]
    process = subprocess.Popen(command)
    partial = tmp_path / "out.hdf5.partial"
    deadline = time.monotonic() + 60
    while (not partial.exists() or partial.stat().st_size < 1_000_000) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    if process.returncode == 0:
        pytest.skip("the run finished before it could be killed")
    assert not (tmp_path / "out.hdf5").exists()  # nothing that looks complete

    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, check=True)
    assert "resumed after line" in resumed.stdout
    subprocess.run([*command[:5], str(tmp_path / "clean.hdf5"), *command[6:]], check=True)
    got, clean = _read(tmp_path / "out.hdf5"), _read(tmp_path / "clean.hdf5")
    assert sorted(got) == sorted(clean)
    assert got["sentence_to_index"] == clean["sentence_to_index"]
    for name in clean:  # a cold token cache after resuming changes float32 rounding only
        if name != "sentence_to_index":
            np.testing.assert_allclose(got[name], clean[name], atol=1e-5, rtol=0)


def test_without_a_model_chinese_text_goes_to_zh_and_other_text_to_en(tmp_path):
    from elmo.cli import _shipped_model_for

    cases = {"zh": "我喜欢吃小米粥\n小米手机很好用 (Xiaomi)\n", "en": "The bank of the river .\n",
             "en ": "Mostly English text with one word 小米 in it .\n", "zh ": "123 456\n日本語の文章ではなく中文。\n"}
    for expected, text in cases.items():
        path = tmp_path / "input.txt"
        path.write_text(text, encoding="utf-8")
        assert _shipped_model_for(str(path)) == expected.strip(), text
