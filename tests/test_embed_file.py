import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time

import h5py
import numpy as np
import pytest

from elmo.cli import main
from elmo.embed_job import chunked, hdf5, job
from elmo.embed_job.source import check_text_file
from elmo.embedder import Embedder


def _read(path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as handle:
        arrays = {name: handle[name][...] for name in handle if name != "sentence_to_index"}
        arrays["sentence_to_index"] = json.loads(handle["sentence_to_index"][0])
    return arrays


def _chunks_lines(partial) -> list[list[int]]:
    """The line numbers each chunk of a partial HDF5 output holds, chunk by chunk."""
    lines = []
    for chunk in sorted(partial.glob("chunk-*.h5")):
        with h5py.File(chunk, "r") as handle:
            lines.append(sorted(map(int, handle)))
    return lines


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


@pytest.mark.parametrize(("layers", "index"), [("1", 1), ("-3", 0), ("layer2", 2)])
def test_a_layer_index_on_the_command_line_writes_that_layer(layers, index, fixture_dir, tmp_path):
    (tmp_path / "in.txt").write_text("the bank of the river\n")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir),
                 "--layers", layers, "--quiet"]) == 0
    every_layer = Embedder.load(str(fixture_dir)).embed(["the bank of the river"], "all")[0]
    np.testing.assert_array_equal(_read(tmp_path / "out.hdf5")["0"], every_layer[index])


def test_control_characters_and_empty_lines_are_reported_by_number_and_the_rest_goes_on(fixture_dir, tmp_path,
                                                                                         caplog):
    raw = b"good line\nctrl\x07char here\n\nlast line\n"
    (tmp_path / "in.txt").write_bytes(raw)
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir),
                 "--quiet"]) == 0
    messages = " | ".join(record.getMessage() for record in caplog.records)
    assert "line 1: control characters replaced" in messages
    assert "line 2: empty" in messages
    written = _read(tmp_path / "out.hdf5")
    assert [written[str(i)].shape[1] for i in range(4)] == [2, 3, 0, 2]


def test_a_pipe_as_input_is_named_a_pipe_with_the_way_to_give_it(fixture_dir, tmp_path, capsys, no_model_load):
    """``elmo embed <(cat in.txt) ...`` was told 'no such input file' of a path that exists: a pipe, which the
    command cannot read twice. Nothing opens it (that would wait for a writer)."""
    os.mkfifo(tmp_path / "pipe")
    assert main(["embed", str(tmp_path / "pipe"), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir),
                 "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "pipe is not a regular file" in error and "give - to read standard input" in error
    assert "no such" not in error
    with pytest.raises(ValueError, match="corpus file is read more than once: write it to a file first"):
        check_text_file(tmp_path / "pipe", "corpus file")  # elmo search's check: no - to point to there


def test_missing_model_is_a_clear_error_not_a_traceback(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("a b\n")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "o.hdf5"), "--model", "nope", "--quiet"]) == 2
    assert "neither a directory nor a shipped model" in capsys.readouterr().err


def test_killed_run_leaves_no_finished_file_and_resume_completes_it_identically(fixture_dir, tmp_path):
    lines = [f"sentence number {i} is about the bank and the river {i % 7}" for i in range(2500)]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    command = [sys.executable, "-m", "elmo.cli", "embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"),
               "--model", str(fixture_dir), "--batch-size", "8", "--quiet"]
    """Written in place, a kill inside HDF5's own writes could leave a file HDF5 cannot read, and the resumed run
    started over (a CI run met it: "fractal heap object offset too large"): now only chunks written whole count."""
    process = subprocess.Popen(command)
    second_chunk = tmp_path / "out.hdf5.partial" / "chunk-000001.h5"  # lines 0-255: 2 chunks of 8 x 16 lines
    deadline = time.monotonic() + 60
    while not second_chunk.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)  # while the output is built from that chunk, or the next lines embedded
    process.wait()
    if process.returncode == 0:
        pytest.skip("the run finished before it could be killed")
    assert not (tmp_path / "out.hdf5").exists()  # nothing that looks complete

    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, check=True)
    assert int(re.search(r"resumed: (\d+) lines already done", resumed.stdout)[1]) >= 256
    subprocess.run([*command[:5], str(tmp_path / "clean.hdf5"), *command[6:]], check=True)
    got, clean = _read(tmp_path / "out.hdf5"), _read(tmp_path / "clean.hdf5")
    assert sorted(got) == sorted(clean)
    assert got["sentence_to_index"] == clean["sentence_to_index"]
    for name in clean:  # a cold token cache after resuming changes float32 rounding only
        if name != "sentence_to_index":
            np.testing.assert_allclose(got[name], clean[name], atol=1e-5, rtol=0)


def test_a_byte_order_mark_is_not_part_of_the_first_token(fixture_dir, tmp_path):
    lines = ["the bank of the river", "she played"]
    (tmp_path / "in.txt").write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n")
    records = "".join(json.dumps({"id": f"s{i}", "text": line}) + "\n" for i, line in enumerate(lines))
    (tmp_path / "in.jsonl").write_bytes(b"\xef\xbb\xbf" + records.encode())
    expected = Embedder.load(str(fixture_dir)).embed(lines, "all")
    for name, options in (("in.txt", []), ("in.jsonl", ["--text-field", "text", "--id-field", "id"])):
        assert main(["embed", str(tmp_path / name), str(tmp_path / f"{name}.hdf5"), "--model", str(fixture_dir),
                     "--quiet", *options]) == 0
        for number, array in enumerate(expected):
            np.testing.assert_array_equal(_read(tmp_path / f"{name}.hdf5")[str(number)], array)
    with h5py.File(tmp_path / "in.jsonl.hdf5", "r") as handle:
        assert handle["0"].attrs["id"] == "s0"


def test_files_joined_together_keep_no_byte_order_mark_at_a_later_line(fixture_dir, tmp_path):
    """``cat a.txt b.txt`` of two files a Windows editor saved: each starts with a mark."""
    (tmp_path / "in.txt").write_bytes(b"\xef\xbb\xbfThe cat\n" * 2)
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir),
                 "--quiet"]) == 0
    written = _read(tmp_path / "out.hdf5")
    np.testing.assert_array_equal(written["1"], written["0"])
    with h5py.File(tmp_path / "out.hdf5", "r") as handle:
        assert list(handle["1"].attrs["tokens"]) == ["The", "cat"]


def test_a_json_escaped_lone_surrogate_is_refused_naming_its_line_before_the_model_loads(tmp_path, capsys,
                                                                                      no_model_load):
    records = [{"text": "fine here", "id": "a"}, {"text": "bad \ud800 here", "id": "b"}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    assert main(["embed", str(tmp_path / "in.jsonl"), str(tmp_path / "out.hdf5"), "--text-field", "text",
                 "--id-field", "id", "--quiet"]) == 2
    assert "line 1: field 'text' holds the lone surrogate U+D800" in capsys.readouterr().err
    assert not list(tmp_path.glob("out.hdf5*"))


def test_vectors_float16_cannot_hold_are_reported_by_line(fixture_dir, tmp_path, capsys, caplog):
    (tmp_path / "in.txt").write_text("the bank of the river\nshe played\n", encoding="utf-8")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.npy"), "--model", str(fixture_dir),
                 "--pooling", "max", "--layers", "100000,0,0", "--dtype", "float16", "--quiet"]) == 0
    assert not np.isfinite(np.load(tmp_path / "out.npy")).all()  # written as numpy casts them
    assert "2 warning(s)" in capsys.readouterr().out
    assert [record.message.split(" (")[0] for record in caplog.records if "float16" in record.message] == [
        "line 0: vectors beyond float16's range", "line 1: vectors beyond float16's range"]


def test_weights_that_overflow_float32_are_reported_by_line(fixture_dir, tmp_path, capsys, caplog):
    (tmp_path / "in.txt").write_text("the bank of the river\nshe played\n", encoding="utf-8")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.npy"), "--model", str(fixture_dir),
                 "--pooling", "mean", "--layers", "3e38,3e38,3e38", "--quiet"]) == 0
    assert not np.isfinite(np.load(tmp_path / "out.npy")).all()
    assert "2 warning(s)" in capsys.readouterr().out  # was 0: float32 was never checked
    assert [record.message for record in caplog.records if "not finite" in record.message] == [
        f"line {n}: vectors not finite (inf or NaN): the mixing weights make them overflow float32; use smaller ones"
        for n in (0, 1)]


def test_without_a_model_chinese_text_goes_to_zh_and_other_text_to_en(tmp_path):
    from elmo.embed_job.commands import _shipped_model_for
    from elmo.embed_job.source import Source

    cases = {"zh": "我喜欢吃小米粥\n小米手机很好用 (Xiaomi)\n", "en": "The bank of the river .\n",
             "en ": "Mostly English text with one word 小米 in it .\n", "zh ": "123 456\n日本語の文章ではなく中文。\n"}
    path = tmp_path / "input.txt"
    for expected, text in cases.items():
        path.write_text(text, encoding="utf-8")
        assert _shipped_model_for(Source(path, "input.txt")) == expected.strip(), text
    # JSON lines: the text fields count, not the keys, and not the \\uXXXX escapes json.dumps writes by default
    path.write_text("".join(json.dumps({"identifier": n, "sentence": "小米手机很好用"}) + "\n" for n in range(3)))
    assert "\\u" in path.read_text()
    assert _shipped_model_for(Source(path, "input.txt", "sentence")) == "zh"


# --- every mistake is refused before the model loads, and leaves no file --------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [
    (b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00",
     "holds a NUL byte at byte 7 (line 1, counting from 1)"),
    (b"good line\nbad \xff\xfe bytes\n", "not UTF-8 text: byte 14 (line 2, counting from 1) is 0xff"),
    (b"good line\nctrl\x00char\n", "holds a NUL byte at byte 14 (line 2, counting from 1)"),
], ids=["elf", "latin1", "nul"])
def test_binary_or_non_utf8_input_is_refused_naming_the_byte_and_line(raw, expected, tmp_path, capsys,
                                                                     no_model_load, fixture_dir):
    (tmp_path / "in.bin").write_bytes(raw)
    assert main(["embed", str(tmp_path / "in.bin"), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir),
                 "--quiet"]) == 2
    error = capsys.readouterr().err
    assert f"{tmp_path / 'in.bin'}" in error and expected in error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.bin"]


def test_empty_input_is_called_empty_not_guessed_to_be_english(tmp_path, capsys, no_model_load):
    (tmp_path / "empty.txt").write_bytes(b"")
    assert main(["embed", str(tmp_path / "empty.txt"), str(tmp_path / "out.hdf5"), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert f"{tmp_path / 'empty.txt'} is empty" in error
    assert "English" not in error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["empty.txt"]


@pytest.mark.parametrize(("output", "expected"), [
    ("in.txt/out.hdf5", "in.txt is not a directory; cannot write out.hdf5 in it"),
    ("missing/out.hdf5", "missing: no such directory to write out.hdf5 in"),
])
def test_an_output_that_cannot_be_written_is_refused_first(output, expected, fixture_dir, tmp_path, capsys,
                                                           no_model_load):
    (tmp_path / "folder").mkdir()
    (tmp_path / "in.txt").write_text("a b\n")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / output), "--model", str(fixture_dir),
                 "--quiet"]) == 2
    assert expected in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["folder", "in.txt"]


@pytest.mark.parametrize(("layers", "message"), [
    ("0,1", "--layers: layers is [0.0, 1.0]: 2 mixing weights; the model has 3 layers, one weight each"),
    ("3", "--layers: layers is 3; a layer index must be in -3..2 (the model has 3 layers)"),
])
def test_layers_that_do_not_fit_the_model_are_refused_from_its_options_before_it_loads(layers, message, fixture_dir,
                                                                                      tmp_path, capsys, no_model_load):
    (tmp_path / "in.txt").write_text("a b\n")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir),
                 "--layers", layers, "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt"]


# --- resume: interrupted anywhere, it finishes the file as a fresh run would, or refuses a changed input --------

LINES = [f"line {i} : the bank of the river {'and more words ' * (i % 5)}" for i in range(70)]


@pytest.fixture(scope="module")
def fresh_vectors(fixture_dir) -> list[np.ndarray]:
    return Embedder.load(str(fixture_dir)).embed(LINES, "all")


def _embed_command(fixture_dir, tmp_path) -> list[str]:
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return ["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir),
            "--batch-size", "2", "--quiet"]  # a flush every 2 * 16 = 32 lines


def _assert_complete_and_fresh(tmp_path, fresh_vectors) -> None:
    assert not (tmp_path / "out.hdf5.partial").exists()
    written = _read(tmp_path / "out.hdf5")
    assert written["sentence_to_index"] == {line.strip(): str(i) for i, line in enumerate(LINES)}
    assert sorted(written) == sorted([*map(str, range(len(LINES))), "sentence_to_index"])
    for i, array in enumerate(fresh_vectors):  # a cold token cache after resuming changes float32 rounding only
        np.testing.assert_allclose(written[str(i)], array, atol=1e-5, rtol=0)


def test_a_stopped_run_names_the_lines_float16_could_not_hold_before_it_stopped(fixture_dir, tmp_path, caplog,
                                                                                monkeypatch, interrupt_after):
    """Warnings were logged only when a run finished: lines written before a Ctrl-C were never named, not even
    by the resumed run, which does not embed them again."""
    (tmp_path / "in.txt").write_text("the bank of the river\nshe played a game\nthe end\nand more\n", encoding="utf-8")
    command = ["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir),
               "--layers", "100000,0,0", "--dtype", "float16", "--batch-size", "1", "--quiet"]
    with monkeypatch.context() as patch:
        interrupt_after(patch, 2, signal.SIGINT)
        assert main(command) == 130
    named = {record.message.split(":")[0] for record in caplog.records if "float16" in record.message}
    assert {"line 0", "line 1"} <= named


def test_an_hdf5_run_resumed_writes_a_line_of_thousands_of_tokens_as_a_fresh_run_does(fixture_dir, tmp_path,
                                                                                      monkeypatch, interrupt_after):
    """Tokens of a long line (over 64 KiB) need HDF5 1.8's attribute storage: a resumed file opened at the
    library's earliest format could not hold them, and every later resume stopped at that line."""
    lines = ["the bank of the river", " ".join(["w"] * 5000), "she played"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    command = ["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir),
               "--batch-size", "1", "--quiet"]
    with monkeypatch.context() as patch:
        interrupt_after(patch, 1, signal.SIGINT)
        assert main(command) == 130
    assert main([*command, "--resume"]) == 0
    with h5py.File(tmp_path / "out.hdf5", "r") as handle:
        assert len(handle["1"].attrs["tokens"]) == 5000 and handle["1"].shape[1] == 5000


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_keeps_every_finished_line_and_says_how_to_resume(signum, status, fixture_dir, tmp_path,
                                                                           capsys, monkeypatch, fresh_vectors,
                                                                           interrupt_after):
    command = _embed_command(fixture_dir, tmp_path)
    with monkeypatch.context() as patch:
        interrupt_after(patch, 44, signum)
        assert main(command) == status
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1] == (f"elmo embed: interrupted; {tmp_path / 'out.hdf5.partial'} holds the first 44 of 70 "
                         "lines; run the same command with --resume to continue")
    assert not (tmp_path / "out.hdf5").exists()
    assert _chunks_lines(tmp_path / "out.hdf5.partial") == [list(range(32)), list(range(32, 44))]
    assert main([*command, "--resume"]) == 0
    assert "resumed: 44 lines already done" in capsys.readouterr().out
    _assert_complete_and_fresh(tmp_path, fresh_vectors)


def test_a_run_without_resume_says_it_drops_an_interrupted_runs_chunks(fixture_dir, tmp_path, caplog, monkeypatch,
                                                                         fresh_vectors, interrupt_after):
    """A retry that forgot --resume embedded everything again without a word about the lines it threw away."""
    command = _embed_command(fixture_dir, tmp_path)
    with monkeypatch.context() as patch:
        interrupt_after(patch, 44, signal.SIGINT)
        assert main(command) == 130
    with caplog.at_level(logging.WARNING, logger="elmo.embed_job.chunked"):
        assert main(command) == 0
    assert (f"{tmp_path / 'out.hdf5.partial'} holds 2 chunk(s) of an interrupted run; starting over without them, "
            "as --resume was not given (with it, they are kept)") in caplog.text
    _assert_complete_and_fresh(tmp_path, fresh_vectors)


def test_resume_refuses_an_input_edited_without_changing_its_size(fixture_dir, tmp_path, capsys, monkeypatch,
                                                                  interrupt_after):
    command = _embed_command(fixture_dir, tmp_path)
    with monkeypatch.context() as patch:
        interrupt_after(patch, 40, signal.SIGINT)
        assert main(command) == 130
    edited = ["LINE" + LINES[0][4:], *LINES[1:]]
    (tmp_path / "in.txt").write_text("\n".join(edited) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main([*command, "--resume"]) == 2
    assert "in.txt has changed since" in capsys.readouterr().err
    assert not (tmp_path / "out.hdf5").exists()
    assert (tmp_path / "out.hdf5.partial").exists()  # refused, not thrown away


@pytest.mark.parametrize("output", ["out.hdf5", "out.parquet"])
def test_an_input_rewritten_during_the_run_leaves_the_output_unfinished(output, fixture_dir, tmp_path, capsys,
                                                                        monkeypatch):
    """The lines are read again after the input was checked and hashed: a corpus still being written (or edited
    in place) must not be published as the vectors of the text the run began with."""
    command = [*_embed_command(fixture_dir, tmp_path)[:2], str(tmp_path / output),
               *_embed_command(fixture_dir, tmp_path)[3:]]
    original = Embedder.iter_embed

    def iter_embed(self, *args, **kwargs):
        with open(tmp_path / "in.txt", "a", encoding="utf-8") as appended:
            appended.write("a line added while the run reads the file\n")
        yield from original(self, *args, **kwargs)

    monkeypatch.setattr(Embedder, "iter_embed", iter_embed)
    assert main(command) == 2
    assert "in.txt changed while it was embedded" in capsys.readouterr().err
    assert not (tmp_path / output).exists()


KILL = """
import os, shutil, signal, sys
import h5py
import elmo.embed_job.chunked as chunked
import elmo.embed_job.hdf5 as hdf5
from elmo.cli import main

point, chunks, copies = sys.argv[1], 0, 0
write_chunk, copy, create_dataset = hdf5.Hdf5Writer._write_chunk, h5py.h5o.copy, h5py.Group.create_dataset

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

def write_whole_chunk(self, lines, path):  # a chunk's file, killed once written whole, before it is renamed
    global chunks
    chunks += 1
    write_chunk(self, lines, path)
    if (point, chunks) in (("opening", 1), ("mid-chunk", 2)):
        die()

def copy_into_output(*args):  # a line's dataset copied from its chunk into the output being built
    global copies
    copies += 1
    if (point, copies) == ("building", 40):
        die()
    return copy(*args)

def create(self, name, *args, **kwargs):  # the sentence index
    if (point, name) == ("finishing", "sentence_to_index"):
        die()
    return create_dataset(self, name, *args, **kwargs)

hdf5.Hdf5Writer._write_chunk, h5py.h5o.copy, h5py.Group.create_dataset = write_whole_chunk, copy_into_output, create
if point == "publishing":
    chunked.publish_file = die
if point == "removing":  # the chunks' directory, once the output is whole
    shutil.rmtree = die
main(sys.argv[2:])
"""


@pytest.mark.parametrize(("point", "resumed"), [
    ("opening", None),  # the first chunk written, not yet renamed: no chunk stored
    ("mid-chunk", "resumed: 32 lines already done"),  # the first chunk stored, the second written, not renamed
    ("building", "resumed: 64 lines already done"),  # inside HDF5's writes of the output, from the second chunk
    ("finishing", "resumed: 70 lines already done"),  # every chunk stored, the sentence index being written
    ("publishing", "resumed: 70 lines already done"),  # the output closed whole, not yet renamed
])
def test_sigkill_at_any_point_then_resume_gives_the_fresh_result(point, resumed, fixture_dir, tmp_path, capsys,
                                                                fresh_vectors):
    command = _embed_command(fixture_dir, tmp_path)
    killed = subprocess.run([sys.executable, "-c", KILL, point, *command], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (tmp_path / "out.hdf5.partial").exists() and not (tmp_path / "out.hdf5").exists()
    assert list(tmp_path.glob(".out.hdf5.*.partial"))  # the output the killed run was building
    assert main([*command, "--resume"]) == 0
    said = capsys.readouterr().out
    if resumed is None:
        assert "resumed:" not in said
    else:
        assert resumed in said
    _assert_complete_and_fresh(tmp_path, fresh_vectors)
    assert not list(tmp_path.glob(".out.hdf5.*"))


@pytest.mark.parametrize(("damage", "said"), [
    ("a file", "is a file, not a directory of chunks"),  # as the in-place HDF5 file of an older version
    ("a damaged chunk", "holds a damaged chunk"),
    ("a damaged line", "holds a damaged chunk (chunk-000001.h5: line 35 cannot be read"),  # its header reads
    ("lacks a chunk", "lacks a chunk"),
    ("no settings", "lacks settings.json"),
])
def test_resume_from_a_damaged_partial_output_starts_over_and_says_so(damage, said, fixture_dir, tmp_path, capsys,
                                                                     caplog, monkeypatch, fresh_vectors,
                                                                     interrupt_after):
    command = _embed_command(fixture_dir, tmp_path)
    partial = tmp_path / "out.hdf5.partial"
    if damage == "a file":
        partial.write_bytes(os.urandom(4096))
    else:
        with monkeypatch.context() as patch:
            interrupt_after(patch, 40, signal.SIGINT)
            assert main(command) == 130
        assert _chunks_lines(partial) == [list(range(32)), list(range(32, 40))]
        if damage == "a damaged chunk":
            (partial / "chunk-000001.h5").write_bytes(os.urandom(4096))
        elif damage == "a damaged line":  # the file opens and counts its lines; one line's object header is zeros
            with h5py.File(partial / "chunk-000001.h5", "r") as chunk:
                header = h5py.h5o.get_info(chunk["35"].id).addr
            with open(partial / "chunk-000001.h5", "r+b") as chunk_file:
                chunk_file.seek(header)
                chunk_file.write(bytes(64))
        elif damage == "lacks a chunk":
            (partial / "chunk-000000.h5").unlink()
        else:
            (partial / "settings.json").unlink()
    assert main([*command, "--resume"]) == 0
    assert "resumed:" not in capsys.readouterr().out
    assert said in " | ".join(record.getMessage() for record in caplog.records)
    assert "starting over" in " | ".join(record.getMessage() for record in caplog.records)
    _assert_complete_and_fresh(tmp_path, fresh_vectors)


@pytest.mark.parametrize("extra", [[], ["--format", "npy", "--pooling", "mean"]], ids=["hdf5", "npy"])
def test_an_output_that_is_the_input_under_any_name_is_refused_and_the_input_kept(extra, fixture_dir, tmp_path,
                                                                                  capsys, monkeypatch, no_model_load):
    """Embedding in.txt into in.txt turned the text into HDF5 (or npy) and exited 0."""
    text = tmp_path / "in.txt"
    text.write_text("a b\nc d\n")
    (tmp_path / "link.txt").symlink_to(text)
    monkeypatch.chdir(tmp_path)
    for output in (str(text), "./in.txt", "link.txt"):
        assert main(["embed", str(text), output, "--model", str(fixture_dir), "--quiet", *extra]) == 2
        error = capsys.readouterr().err
        assert f"OUTPUT {output.removeprefix('./')} is an input of this command" in error
        assert len(error.splitlines()) == 1
    assert text.read_text() == "a b\nc d\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt", "link.txt"]


@pytest.mark.parametrize(("input_name", "output_name", "extra"), [
    ("corpus.partial", "corpus", []),  # HDF5 built in OUTPUT.partial: it truncated the input
    ("vec.parquet.partial", "vec.parquet", []),  # Parquet's chunks go in a directory there: the input was removed
    (".vec.npy.1234.partial", "vec.npy", ["--pooling", "mean"]),  # a killed run's leftover: deleted at the start
], ids=["hdf5", "parquet", "leftover"])
def test_an_input_where_the_output_is_built_is_refused_and_kept(input_name, output_name, extra, fixture_dir,
                                                                tmp_path, capsys, no_model_load):
    """The input was checked against OUTPUT only, so an input named as OUTPUT's partial file was overwritten or
    deleted before it was read, and the run ended with an error about something else."""
    text = tmp_path / input_name
    text.write_text("a b\nc d\n")
    assert main(["embed", str(text), str(tmp_path / output_name), "--model", str(fixture_dir), "--quiet",
                 *extra]) == 2
    error = capsys.readouterr().err
    assert "partial" in error and str(text) in error
    assert text.read_text() == "a b\nc d\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == [input_name]


def test_an_error_on_the_writers_thread_met_by_ctrl_c_still_closes_the_output_and_the_run_resumes(
        fixture_dir, tmp_path, capsys, caplog, monkeypatch, interrupt_after):
    pyarrow_parquet = pytest.importorskip("pyarrow.parquet")
    from elmo.embed_job.parquet import ParquetWriter

    monkeypatch.setattr(job, "spare_core", lambda embedder: True)  # chunks stored on the writer's thread
    command = _embed_command(fixture_dir, tmp_path)
    command[2] = str(tmp_path / "out.parquet")
    write_chunk, calls = ParquetWriter._write_chunk, []
    threads_before = set(threading.enumerate())

    def write(self, lines, path):
        calls.append(1)
        if len(calls) == 2:  # lines 32-63
            raise OSError(28, "No space left on device")
        return write_chunk(self, lines, path)

    monkeypatch.setattr(ParquetWriter, "_write_chunk", write)
    with monkeypatch.context() as patch:
        interrupt_after(patch, 69, signal.SIGINT)  # in the third chunk: the handler's flush meets the thread's error
        assert main(command) == 1
    error = capsys.readouterr().err.splitlines()
    assert error == ["elmo embed: error: [Errno 28] No space left on device; run the same command with --resume to "
                     "continue"]
    assert "No space left on device" not in caplog.text  # raised once, not again as closing's warning
    new_threads = set(threading.enumerate()) - threads_before
    assert not any(thread.name.startswith("elmo-embed-writer") for thread in new_threads)
    monkeypatch.setattr(ParquetWriter, "_write_chunk", write_chunk)
    assert main([*command, "--resume"]) == 0
    assert "resumed: 32 lines already done" in capsys.readouterr().out
    assert pyarrow_parquet.read_table(command[2]).column("index").to_pylist() == list(range(70))


@pytest.mark.parametrize("pooled", [False, True], ids=["token-vectors", "pooled"])
def test_a_chunk_of_token_vectors_holds_no_more_tokens_than_the_embedder_however_long_the_lines(
        pooled, fixture_dir, tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    monkeypatch.setattr(job, "spare_core", lambda embedder: False)  # the thread changes when, not what, is stored
    monkeypatch.setattr(Embedder, "chunk_tokens", lambda self, batch_size: 200)
    lines = [" ".join(["word"] * (30 + 7 * (i % 4))) for i in range(40)]  # 30-51 tokens: a 32-line chunk holds ~1,300
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    held: list[int] = []
    flush = chunked.ChunkedWriter.flush

    def counting_flush(self):
        held.append(sum(len(line.tokens) for line in self._pending))
        flush(self)

    monkeypatch.setattr(chunked.ChunkedWriter, "flush", counting_flush)
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.parquet"), "--model", str(fixture_dir),
                 "--quiet", "--batch-size", "2", *(["--pooling", "mean"] if pooled else [])]) == 0
    chunks = [tokens for tokens in held if tokens]
    tokens_of = [len(line.split()) for line in lines]
    if pooled:  # a line is one vector however long: chunks of 2 x 16 lines, whole
        assert chunks == [sum(tokens_of[:32]), sum(tokens_of[32:])]
        return
    assert sum(chunks) == sum(tokens_of)
    assert max(chunks) < 200 + 51  # a line more than the bound at the most
    # ...and no fewer than the bound but where a chunk of 2 x 16 lines ends (lines 32 and 40):
    assert sum(tokens < 200 for tokens in chunks) <= 2, chunks


def test_a_stop_met_while_waiting_leaves_the_chunk_to_the_writers_thread_and_its_error_is_raised_once():
    from concurrent.futures import Future

    from elmo.embed_job.npy import NpyWriter

    writer = object.__new__(NpyWriter)  # only the waiting is under test: no file behind it
    writer.done, storing = 0, Future()
    writer._in_hand = storing

    def stopped(timeout=None):  # SystemExit from a signal handler while the main thread waits
        raise SystemExit(143)

    storing.result = stopped
    with pytest.raises(SystemExit):
        writer._wait()
    assert writer._in_hand is storing  # still the thread's: closing waits for it, and the thread counts its lines
    del storing.result
    storing.set_result(None)
    writer._wait()
    assert writer._in_hand is None
    failed = Future()
    failed.set_exception(OSError(28, "No space left on device"))
    writer._in_hand = failed
    with pytest.raises(OSError):
        writer._wait()
    assert writer._in_hand is None  # raised here, not again when the writer is closed


def test_a_run_is_resumed_only_by_an_embedder_that_reads_long_sentences_the_same_way(fixture_dir, tmp_path,
                                                                                    monkeypatch, interrupt_after):
    from elmo.embed_job.job import EmbedOptions, embed_file
    from elmo.stateful_embedder import StatefulEmbedder

    text = tmp_path / "in.txt"
    text.write_text("\n".join(" ".join(f"w{i % 7}" for i in range(n)) for n in (5, 40, 7, 40)) + "\n")
    output, options = tmp_path / "out.hdf5", EmbedOptions(layers="top", batch_size=1)
    embedder = Embedder.load(str(fixture_dir))
    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        interrupt_after(patch, 2, signal.SIGINT)
        embed_file(text, output, embedder, options, progress=False)
    other = Embedder.load(str(fixture_dir), max_window_tokens=8, window_context=2)
    with pytest.raises(ValueError,
                       match="was made with another max_window_tokens, window_context; run without --resume"):
        embed_file(text, output, other, options, resume=True, progress=False)
    with pytest.raises(ValueError, match="a StatefulEmbedder cannot resume an output"):
        embed_file(text, output, StatefulEmbedder(embedder.bilm), options, resume=True, progress=False)
    assert embed_file(text, output, embedder, options, resume=True, progress=False).resumed_from == 2


def test_a_stateful_embedder_is_refused_to_resume_or_embed_one_shard_before_any_work(fixture_dir, tmp_path,
                                                                                   monkeypatch, interrupt_after):
    """Resumed, a StatefulEmbedder started the kept lines' successors from a zero state where one run carries the
    state of the lines before, so the resumed output's last lines were not one run's."""
    from elmo.embed_job import Shard
    from elmo.embed_job.job import EmbedOptions, embed_file
    from elmo.stateful_embedder import StatefulEmbedder

    text = tmp_path / "in.txt"
    text.write_text("".join(f"the cat number {n} sat on the mat\n" for n in range(4)))
    options = EmbedOptions(layers="top", batch_size=1)
    bilm = Embedder.load(str(fixture_dir)).bilm
    output = tmp_path / "out.hdf5"
    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        interrupt_after(patch, 2, signal.SIGINT)
        embed_file(text, output, StatefulEmbedder(bilm), options, progress=False)
    partial = tmp_path / "out.hdf5.partial"  # the interrupted run's lines, kept for a resume
    kept = {path.name: path.read_bytes() for path in partial.iterdir()}
    with pytest.raises(ValueError, match="a StatefulEmbedder cannot resume an output"):
        embed_file(text, output, StatefulEmbedder(bilm), options, resume=True, progress=False)
    assert {path.name: path.read_bytes() for path in partial.iterdir()} == kept and not output.exists()
    with pytest.raises(ValueError, match="a StatefulEmbedder cannot embed shard 1/2"):
        embed_file(text, tmp_path / "shard.hdf5", StatefulEmbedder(bilm), EmbedOptions(layers="top", shard=Shard(1, 2)),
                   progress=False)
    assert not (tmp_path / "shard.hdf5").exists()
    whole = embed_file(text, tmp_path / "whole.hdf5", StatefulEmbedder(bilm), options, progress=False)
    assert whole.resumed_from == 0 and (tmp_path / "whole.hdf5").exists()


@pytest.mark.parametrize("on_thread", [False, True], ids=["in-line", "on-a-thread"])
def test_a_full_disk_keeps_every_stored_chunk_says_how_many_lines_and_the_run_resumes(on_thread, fixture_dir, tmp_path,
                                                                                     capsys, monkeypatch,
                                                                                     fresh_vectors):
    """On the writer's thread the failed chunk's error met the next flush, and the handler's flush then stored the
    lines after it as the next chunk: chunks 0 and 2 on disk, and the resumed run started over."""
    monkeypatch.setattr(job, "spare_core", lambda embedder: on_thread)
    command = _embed_command(fixture_dir, tmp_path)
    write_chunk, calls = hdf5.Hdf5Writer._write_chunk, []

    def write(self, lines, path):
        calls.append(1)
        if len(calls) == 2:  # the second chunk (lines 32-63), part written
            path.write_bytes(b"\x89HDF")
            raise OSError(28, "No space left on device")
        write_chunk(self, lines, path)

    monkeypatch.setattr(hdf5.Hdf5Writer, "_write_chunk", write)
    assert main(command) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"elmo embed: error: [Errno 28] No space left on device; {tmp_path / 'out.hdf5.partial'} holds the first 32 "
        "of 70 lines; run the same command with --resume to continue"]
    assert sorted(path.name for path in (tmp_path / "out.hdf5.partial").iterdir()) == [
        "chunk-000000.h5", "settings.json"]  # the chunk that could not be stored leaves no half-written file
    monkeypatch.setattr(hdf5.Hdf5Writer, "_write_chunk", write_chunk)
    assert main([*command, "--resume"]) == 0
    assert "resumed: 32 lines already done" in capsys.readouterr().out  # that chunk's lines are embedded again
    _assert_complete_and_fresh(tmp_path, fresh_vectors)


def test_a_second_ctrl_c_while_the_first_ones_lines_are_recorded_still_closes_the_file(fixture_dir, tmp_path, capsys,
                                                                                       monkeypatch, interrupt_after,
                                                                                       fresh_vectors):
    command = _embed_command(fixture_dir, tmp_path)
    flush, close, calls, closed = hdf5.Hdf5Writer.flush, hdf5.Hdf5Writer.close, [], []

    def interrupted_flush(self):
        calls.append(1)
        if len(calls) == 2:  # the first Ctrl-C's (the first flush ends the chunk of lines 0-31)
            raise KeyboardInterrupt
        flush(self)

    def counted_close(self):
        closed.append(1)
        close(self)

    monkeypatch.setattr(hdf5.Hdf5Writer, "flush", interrupted_flush)
    monkeypatch.setattr(hdf5.Hdf5Writer, "close", counted_close)
    with monkeypatch.context() as patch:
        interrupt_after(patch, 44, signal.SIGINT)
        assert main(command) == 130
    assert "holds the first" not in capsys.readouterr().err  # no count: the lines after 32 were not recorded
    assert closed == [1]  # by the run, not left to the garbage collector
    monkeypatch.setattr(hdf5.Hdf5Writer, "flush", flush)
    assert main([*command, "--resume"]) == 0
    assert "resumed: 32 lines already done" in capsys.readouterr().out
    _assert_complete_and_fresh(tmp_path, fresh_vectors)


def test_a_full_disk_met_while_the_output_is_built_still_says_how_many_lines_are_kept(fixture_dir, tmp_path, capsys,
                                                                                     monkeypatch, fresh_vectors):
    """HDF5 reports a failed copy into the output as RuntimeError, and closing the unfinished output on a full disk
    failed too, replacing the run's error: the stop message had no count."""
    command = _embed_command(fixture_dir, tmp_path)
    copy, copies = h5py.h5o.copy, []
    close_output = hdf5.Hdf5Writer._close_output

    def copy_into_a_full_disk(*args):
        copies.append(1)
        if len(copies) == 40:  # line 39, from the second chunk, which is on disk already
            raise RuntimeError("Unable to synchronously copy object (file write failed: errno = 28)")
        return copy(*args)

    def close_on_a_full_disk(self, complete):
        close_output(self, complete)
        if not complete:
            raise OSError(28, "Can't close file")

    monkeypatch.setattr(h5py.h5o, "copy", copy_into_a_full_disk)
    monkeypatch.setattr(hdf5.Hdf5Writer, "_close_output", close_on_a_full_disk)
    assert main(command) == 1
    error = capsys.readouterr().err
    assert "line 39 could not be added to the output: Unable to synchronously copy object" in error
    assert f"{tmp_path / 'out.hdf5.partial'} holds the first 64 of 70 lines; run the same command with --resume" \
        in error
    assert not list(tmp_path.glob(".out.hdf5.*"))  # the unfinished output is deleted all the same
    monkeypatch.undo()
    assert main([*command, "--resume"]) == 0
    assert "resumed: 64 lines already done" in capsys.readouterr().out
    _assert_complete_and_fresh(tmp_path, fresh_vectors)


def test_ctrl_c_while_a_resumed_run_rebuilds_its_output_stops_it_and_leaves_only_the_chunks(fixture_dir, tmp_path,
                                                                                           capsys, monkeypatch,
                                                                                           interrupt_after,
                                                                                           fresh_vectors):
    """The rebuild ran on the writer's thread, outside the run's handling of Ctrl-C: the process went on until it
    was done and left the output it was building beside the output."""
    command = _embed_command(fixture_dir, tmp_path)
    with monkeypatch.context() as patch:
        interrupt_after(patch, 44, signal.SIGINT)
        assert main(command) == 130
    append = hdf5.Hdf5Writer._append

    def interrupted(self, chunk):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(hdf5.Hdf5Writer, "_append", interrupted)
        assert main([*command, "--resume"]) == 130
    assert "run the same command with --resume to continue" in capsys.readouterr().err
    assert not list(tmp_path.glob(".out.hdf5.*")) and not (tmp_path / "out.hdf5").exists()
    assert _chunks_lines(tmp_path / "out.hdf5.partial") == [list(range(32)), list(range(32, 44))]
    assert hdf5.Hdf5Writer._append is append
    assert main([*command, "--resume"]) == 0
    assert "resumed: 44 lines already done" in capsys.readouterr().out
    _assert_complete_and_fresh(tmp_path, fresh_vectors)


def test_a_kill_while_the_chunks_are_deleted_after_the_output_is_whole_leaves_the_output_whole(fixture_dir, tmp_path,
                                                                                             capsys):
    """The chunks' directory was deleted in place after the output was renamed: a kill part way left a directory
    without settings.json under OUTPUT.partial, and --resume embedded every line again."""
    command = _embed_command(fixture_dir, tmp_path)
    killed = subprocess.run([sys.executable, "-c", KILL, "removing", *command], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (tmp_path / "out.hdf5").exists() and not (tmp_path / "out.hdf5.partial").exists()
    assert main([*command, "--resume"]) == 0
    assert "out.hdf5 is already whole; skipped" in capsys.readouterr().out


def test_json_token_lists_are_cleaned_as_text_lines_are(fixture_dir, tmp_path):
    """The same sentence as a text line and as a JSON list of tokens from another tool (a decomposed accent)
    gets the same tokens and vectors."""
    (tmp_path / "in.txt").write_text("the caf\u00e9 closed\n", encoding="utf-8")
    (tmp_path / "in.jsonl").write_text(json.dumps({"text": ["the", "cafe\u0301", "closed"]}) + "\n", encoding="utf-8")
    for name, options in (("in.txt", []), ("in.jsonl", ["--text-field", "text"])):
        assert main(["embed", str(tmp_path / name), str(tmp_path / f"{name}.hdf5"), "--model", str(fixture_dir),
                     "--quiet", *options]) == 0
    np.testing.assert_array_equal(_read(tmp_path / "in.jsonl.hdf5")["0"], _read(tmp_path / "in.txt.hdf5")["0"])
    with h5py.File(tmp_path / "in.jsonl.hdf5", "r") as handle:
        assert list(handle["0"].attrs["tokens"]) == ["the", "caf\u00e9", "closed"]
