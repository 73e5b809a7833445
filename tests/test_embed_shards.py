"""``elmo embed`` in shards: ``--shard I/N``, torchrun's ranks and Slurm array tasks each embed every N-th line,
keep the global line numbers, and together give exactly one full run; a directory of parts gets its manifest
only once every part is whole, and a restart skips the finished parts."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest

from elmo.cli import main
from elmo.embed_job import Shard, shard_from_environment
from elmo.embed_job import job as job_module
from elmo.embedder import Embedder

LINES = [f"sentence {i} about the {'river bank' if i % 3 else 'money bank'} {'and more ' * (i % 4)}" for i in range(23)]


def _parquet_rows(paths) -> dict[int, tuple[list[str], np.ndarray]]:
    rows = {}
    for path in paths:
        table = pq.read_table(path)
        for index, tokens, *layers in zip(*(table.column(name).to_pylist() for name in table.column_names),
                                          strict=True):
            assert index not in rows, f"line {index} is in two parts"
            rows[index] = (tokens, np.stack([np.array(layer, np.float32).reshape(-1, 32) for layer in layers]))
    return rows


def _assert_union_is_the_full_run(rows, expected) -> None:
    assert sorted(rows) == list(range(len(LINES)))
    for index, (tokens, layers) in rows.items():
        assert tokens == LINES[index].split()
        np.testing.assert_allclose(layers, expected[index], atol=1e-6, rtol=0)


def test_shard_parsing_and_the_launchers_environment():
    assert Shard.parse("2/5") == Shard(2, 5) and [Shard(2, 5).holds(line) for line in (2, 7, 8)] == [True, True, False]
    assert [Shard(index, 3).size(10) for index in range(3)] == [4, 3, 3]
    for bad in ("5/5", "-1/2", "1/0", "1", "a/b", "\u0661/\u0662"):  # Arabic-Indic digits are not I/N
        with pytest.raises(ValueError, match="expected I/N"):
            Shard.parse(bad)
    assert shard_from_environment({}) is None
    assert shard_from_environment({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) == Shard(1, 4)
    slurm = {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1"}
    assert shard_from_environment(slurm) == Shard(2, 3)  # --array=1-3 counts from 1
    stepped = {"SLURM_ARRAY_TASK_COUNT": "8", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_STEP": "2"}
    assert [shard_from_environment({**stepped, "SLURM_ARRAY_TASK_ID": str(task)}) for task in (0, 2, 14)] == [
        Shard(0, 8), Shard(1, 8), Shard(7, 8)]  # --array=0-14:2: every shard once
    with pytest.raises(ValueError, match="step 2"):
        shard_from_environment({**stepped, "SLURM_ARRAY_TASK_ID": "3"})
    with pytest.raises(ValueError, match="WORLD_SIZE='two'"):
        shard_from_environment({"RANK": "0", "WORLD_SIZE": "two"})
    with pytest.raises(ValueError, match="RANK=4 and WORLD_SIZE=4"):
        shard_from_environment({"RANK": "4", "WORLD_SIZE": "4"})


def test_shards_keep_global_line_numbers_and_their_union_is_the_full_run(text, tmp_path, fixture_dir, expected):
    for index in range(3):
        for extension in ("parquet", "hdf5"):
            assert main(["embed", str(text), str(tmp_path / f"s{index}.{extension}"), "--shard", f"{index}/3",
                         "--model", str(fixture_dir), "--quiet"]) == 0
    _assert_union_is_the_full_run(_parquet_rows(tmp_path.glob("s*.parquet")), expected)
    union = {}
    for index in range(3):
        with h5py.File(tmp_path / f"s{index}.hdf5", "r") as handle:
            assert json.loads(handle["sentence_to_index"][0]) == {LINES[n].strip(): str(n) for n in range(index, 23, 3)}
            union |= {int(name): handle[name][...] for name in handle if name != "sentence_to_index"}
    assert sorted(union) == list(range(len(LINES)))
    for number, layers in union.items():
        np.testing.assert_allclose(layers, expected[number], atol=1e-6, rtol=0)


def test_slurm_array_tasks_fill_a_directory_and_the_last_one_writes_the_manifest(text, tmp_path, fixture_dir,
                                                                               monkeypatch, capsys, expected):
    out = tmp_path / "out.parquet"  # the directory's name gives its parts' format
    command = ["embed", str(text), f"{out}/", "--model", str(fixture_dir), "--quiet"]
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    assert main(command) == 0
    assert sorted(path.name for path in out.iterdir()) == [
        "_part-00001-of-00002.json", "part-00001-of-00002.parquet"]  # no manifest while a part is missing
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "0")
    assert main(command) == 0
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["lines"] == 23 and manifest["format"] == "parquet"
    assert [(part["file"], part["lines"]) for part in manifest["parts"]] == [
        ("part-00000-of-00002.parquet", 12), ("part-00001-of-00002.parquet", 11)]
    _assert_union_is_the_full_run(_parquet_rows(out.glob("part-*.parquet")), expected)
    capsys.readouterr()
    assert main(command) == 0  # restarted: the finished part is skipped
    assert "part-00000-of-00002.parquet (shard 0/2) is already whole; skipped" in capsys.readouterr().out
    # Stopped between the part's rename and its record: the part records its settings itself, so it is whole too
    # (it was embedded again), and its record is written.
    (out / "_part-00000-of-00002.json").unlink()
    before = (out / "part-00000-of-00002.parquet").stat().st_mtime_ns
    assert main(command) == 0
    assert "part-00000-of-00002.parquet (shard 0/2) is already whole; skipped" in capsys.readouterr().out
    assert (out / "part-00000-of-00002.parquet").stat().st_mtime_ns == before
    assert (out / "_part-00000-of-00002.json").is_file()
    (tmp_path / "in.txt").write_text("\n".join(LINES[::-1]) + "\n")
    assert main(command) == 2  # a changed input does not mix with the parts made from the old one
    assert "in.txt has changed since" in capsys.readouterr().err  # named as a resumed run names it
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "3")
    assert main(command) == 2  # nor do parts of a run in another number of shards
    assert ("holds parts of a run in 2 shards (_part-00000-of-00002.json; this run has 3): to redo one shard of "
            "that run, give --shard I/2") in capsys.readouterr().err
    assert not (out / "part-00000-of-00003.parquet").exists()


def test_under_a_launcher_standard_input_is_refused_before_any_work(tmp_path, fixture_dir, monkeypatch, capsys):
    """torchrun's processes inherit one pipe: each would read a different piece of it as the whole input."""
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["embed", "-", str(tmp_path / "out") + "/", "--model", str(fixture_dir), "--quiet"]) == 2
    assert "share one standard input" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_part_recorded_with_other_settings_stops_the_manifest_loudly(tmp_path):
    from elmo.embed_job.shards import PartsDirectory

    parts = PartsDirectory(tmp_path, "parquet")
    settings = {"input": "in.txt", "sha256": "a" * 64, "format": "parquet", "layers": "top"}
    for index, digest in ((0, "a" * 64), (1, "b" * 64)):  # shard 1 read other input (its own piece of a pipe)
        parts.part(Shard(index, 2)).write_bytes(b"")
        record = {"settings": {**settings, "sha256": digest, "shard": f"{index}/2"}, "lines": 5}
        parts.record(Shard(index, 2)).write_text(json.dumps(record))
    with pytest.raises(ValueError, match="sha256"):
        parts.write_manifest(2, {**settings, "shard": "0/2"})
    assert not (tmp_path / "_manifest.json").exists()


def test_under_a_launcher_an_output_named_as_a_file_is_refused_before_any_work(text, tmp_path, fixture_dir,
                                                                            monkeypatch, capsys):
    """A Slurm array whose tasks each embed a file of their own would otherwise embed every N-th line of each."""
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "10")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    for name in ("out3.parquet", "out3"):  # also a name that only the format's default makes a file
        assert main(["embed", str(text), str(tmp_path / name), "--model", str(fixture_dir), "--quiet"]) == 2
        error = capsys.readouterr().err
        assert "shard 3/10 of a launcher" in error and "give --shard 0/1" in error and "out3/" in error
        assert list(tmp_path.iterdir()) == [text]  # nothing written
    assert main(["embed", str(text), str(tmp_path / "out3.parquet"), "--shard", "0/1", "--model", str(fixture_dir),
                 "--quiet"]) == 0
    assert pq.read_table(tmp_path / "out3.parquet").num_rows == len(LINES)  # the whole input, as a file
    # a launcher of one process (torchrun --nproc-per-node 1) embeds the whole input into a file: it was refused
    # as "only one line in 1 of the input"
    monkeypatch.delenv("SLURM_ARRAY_TASK_COUNT")
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert main(["embed", str(text), str(tmp_path / "one.parquet"), "--model", str(fixture_dir), "--quiet"]) == 0
    assert pq.read_table(tmp_path / "one.parquet").num_rows == len(LINES)


def test_torchrun_ranks_write_one_part_each_and_their_union_is_the_full_run(text, tmp_path, fixture_dir, expected):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    command = [torchrun, "--standalone", "--nproc-per-node", "2", "-m", "elmo", "embed", str(text),
               f"{tmp_path / 'parts'}/", "--format", "parquet", "--model", str(fixture_dir), "--quiet"]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((tmp_path / "parts" / "_manifest.json").read_text())
    assert [part["shard"] for part in manifest["parts"]] == ["0/2", "1/2"]
    _assert_union_is_the_full_run(_parquet_rows(tmp_path / "parts" / part["file"] for part in manifest["parts"]),
                                  expected)


def test_a_directory_of_parquet_parts_reads_as_one_dataset_with_every_line_once(text, tmp_path, fixture_dir, expected):
    """The records and the manifest were named part-*.json and manifest.json, which pyarrow reads as Parquet and
    fails on; their leading _ makes it skip them, as it skips Ray's _settings.json."""
    out = tmp_path / "out.parquet"
    for index in range(2):
        assert main(["embed", str(text), f"{out}/", "--shard", f"{index}/2", "--model", str(fixture_dir),
                     "--quiet"]) == 0
    assert (out / "_manifest.json").is_file()
    table = pq.read_table(out)
    assert sorted(table.column("index").to_pylist()) == list(range(len(LINES)))
    _assert_union_is_the_full_run(_parquet_rows([out]), expected)


@pytest.mark.parametrize(("found", "message"), [
    (["0123_000000-0.parquet", "_settings.json"], "holds files that are not parts of a parquet run of elmo embed "
                                                  "(0123_000000-0.parquet, _settings.json)"),  # Ray's output
    (["part-00000-of-00002.npy"], "not parts of a parquet run of elmo embed (part-00000-of-00002.npy)"),
    (["notes.txt", "part-00000-of-00001.parquet"], "(notes.txt)"),
    (["part-00000-of-00002.json", "part-00000-of-00002.parquet", "manifest.json"],
     "holds the records of an earlier version of elmo embed (manifest.json), named without the leading _ that "
     "Parquet readers skip: to keep its parts, rename each part-*.json to _part-*.json"),
], ids=["a Ray run's output", "parts of another format", "a file of its own", "records of an earlier version"])
def test_a_directory_holding_what_no_run_in_these_parts_writes_is_refused_before_the_model_loads(
        found, message, text, tmp_path, fixture_dir, capsys, no_model_load):
    """A local run into such a directory added its part beside what was there and exited 0: rerun into a Ray run's
    output, it held every line twice. The Ray engine refused it; now both do."""
    out = tmp_path / "out"
    out.mkdir()
    for name in found:
        (out / name).write_bytes(b"")
    assert main(["embed", str(text), f"{out}/", "--format", "parquet", "--model", str(fixture_dir), "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert sorted(path.name for path in out.iterdir()) == sorted(found)


def test_what_a_run_in_parts_writes_as_it_goes_is_its_own(tmp_path):
    """Parts, parts in progress (an HDF5 file or a chunk directory), records, the manifest and elmo.files' temporary
    names for each are accepted in a directory of parts; their like for another number of shards is refused."""
    from elmo.embed_job.shards import PartsDirectory

    own = ["part-00000-of-00002.hdf5", "part-00001-of-00002.hdf5.partial", "_part-00000-of-00002.json",
           "._part-00001-of-00002.json.k2_x9q.partial", ".part-00001-of-00002.hdf5.abc123.partial", "_manifest.json",
           "._manifest.json.zz9.partial"]
    for name in own:
        (tmp_path / name).write_bytes(b"")
    PartsDirectory(tmp_path, "hdf5").check_holds_only_parts(2)
    with pytest.raises(ValueError, match=r"parts of a run in 2 shards \(\S+; this run has 4\)"):
        PartsDirectory(tmp_path, "hdf5").check_holds_only_parts(4)
    with pytest.raises(ValueError, match="not parts of a npy run"):
        PartsDirectory(tmp_path, "npy").check_holds_only_parts(2)


def test_a_restart_beside_hidden_files_no_run_writes_finishes_and_reads_as_one_dataset(text, tmp_path, fixture_dir,
                                                                                      expected):
    """A .DS_Store (or NFS's .nfsXXXX) in a directory of parts used to stop the next shard before any work, though
    pyarrow skips names starting with '.'; a temporary name of a file no run writes is still refused."""
    out = tmp_path / "out.parquet"
    command = ["embed", str(text), f"{out}/", "--model", str(fixture_dir), "--quiet"]
    assert main([*command, "--shard", "0/2"]) == 0
    (out / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (out / ".nfs000000000012345600000001").write_bytes(b"PAR1 of a deleted part")
    assert main([*command, "--shard", "1/2"]) == 0
    assert (out / "_manifest.json").is_file()
    _assert_union_is_the_full_run(_parquet_rows([out]), expected)
    from elmo.embed_job.shards import PartsDirectory

    (out / ".notes.txt.k2_x9q.partial").write_bytes(b"")
    with pytest.raises(ValueError, match=r"not parts of a parquet run of elmo embed \(\.notes\.txt\.k2_x9q\.partial\)"):
        PartsDirectory(out, "parquet").check_holds_only_parts(2)


def test_a_part_made_again_takes_the_manifest_and_its_record_away_until_it_is_whole(text, tmp_path, fixture_dir,
                                                                                   monkeypatch, expected):
    """A part removed by hand and made again, stopped part way: the old manifest and record said the directory was
    whole while the part was missing."""
    out = tmp_path / "out.parquet"
    command = ["embed", str(text), f"{out}/", "--model", str(fixture_dir), "--quiet"]
    for shard in ("0/2", "1/2"):
        assert main([*command, "--shard", shard]) == 0
    assert (out / "_manifest.json").is_file()
    (out / "part-00001-of-00002.parquet").unlink()

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(job_module, "_embed_lines", stopped)
        assert main([*command, "--shard", "1/2"]) == 130
    assert not (out / "_manifest.json").exists() and not (out / "_part-00001-of-00002.json").exists()
    assert main([*command, "--shard", "1/2"]) == 0
    assert json.loads((out / "_manifest.json").read_text())["lines"] == 23
    _assert_union_is_the_full_run(_parquet_rows(out.glob("part-*.parquet")), expected)


def test_a_slurm_task_resubmitted_alone_is_told_to_give_its_shard_and_then_redoes_it(text, tmp_path, fixture_dir,
                                                                                     monkeypatch, capsys, expected):
    """sbatch --array=1 sets SLURM_ARRAY_TASK_COUNT=1 and SLURM_ARRAY_TASK_MIN=1: the task takes itself for shard
    0/1. It was refused after the model loaded, told to remove the finished parts; now before, told --shard I/N."""
    out = tmp_path / "out.parquet"
    command = ["embed", str(text), f"{out}/", "--model", str(fixture_dir), "--quiet"]
    assert main([*command, "--shard", "0/2"]) == 0
    for name, value in (("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_ARRAY_TASK_COUNT", "1"), ("SLURM_ARRAY_TASK_MIN", "1")):
        monkeypatch.setenv(name, value)
    with monkeypatch.context() as patch:
        patch.setattr(Embedder, "load", lambda *args, **kwargs: pytest.fail("the model loaded first"))
        assert main(command) == 2
    error = capsys.readouterr().err
    assert "holds parts of a run in 2 shards (_part-00000-of-00002.json; this run has 1)" in error
    assert error.index("give --shard I/2") < error.index("remove")
    assert main([*command, "--shard", "1/2"]) == 0  # what it says: --shard wins over the task's environment
    _assert_union_is_the_full_run(_parquet_rows([out]), expected)
