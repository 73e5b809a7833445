"""``elmo embed`` on Ray Data: on a real local Ray cluster, workers give the single-process ``Embedder``'s vectors
(to float32 rounding) with every line number, id and token kept; ``elmo embed --engine ray`` writes a directory
of Parquet files whole; what the Ray engine cannot do is refused before the model loads or Ray starts."""

import json
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from elmo.cli import main
from elmo.embed_job import EmbedOptions, VectorShape, arrow_schema
from elmo.embed_job.ray_data import SETTINGS_FILE, EmbedBatches, embed_dataset, lines_dataset
from elmo.embed_job.source import Source
from elmo.embedder import Embedder
from elmo.pooling import pool

LINES = ["the bank of the river", "", "she played a game", "日本語 の 文", "one",
         *(f"line {i} of a few" for i in range(20))]


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'elmo-bilm[ray]')")
    ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()


def _rows(table: pa.Table) -> dict[int, dict]:
    rows = {row["index"]: row for row in table.to_pylist()}
    assert len(rows) == table.num_rows, "a line is there twice"
    return rows


def test_two_ray_workers_give_the_single_process_vectors_with_line_numbers_kept(ray_cluster, text, fixture_dir,
                                                                                   expected):
    embedded = embed_dataset(lines_dataset(Source(text, str(text))), str(fixture_dir), EmbedOptions(batch_size=4),
                             workers=2)
    table = pa.concat_tables(ray_cluster.get(embedded.to_arrow_refs()))
    shape = VectorShape(3, 32, False, np.dtype(np.float32))
    assert table.schema == arrow_schema(shape)
    rows = _rows(table)
    assert sorted(rows) == list(range(len(LINES)))
    for index, row in rows.items():
        assert row["tokens"] == LINES[index].split()
        layers = np.stack([np.array(row[f"layer_{k}"], np.float32).reshape(-1, 32) for k in range(3)])
        np.testing.assert_allclose(layers, expected[index], atol=1e-6, rtol=0)


def test_embed_batches_turns_a_batch_of_lines_into_pooled_rows_as_ray_calls_it(fixture_dir, expected):
    """The callable class on one batch, in this process (no cluster): what each Ray worker does."""
    batch = pa.table({"index": pa.array([7, 0, 1], pa.int64()), "text": [LINES[7], LINES[0], "ignored"],
                      "tokens": [None, None, []], "id": ["a", "b", "c"]})
    table = EmbedBatches(str(fixture_dir), EmbedOptions(layers="average", pooling="max", batch_size=2))(batch)
    assert table.schema == arrow_schema(VectorShape(None, 32, True, np.dtype(np.float32)), with_ids=True)
    assert table.column("tokens").to_pylist() == [LINES[7].split(), LINES[0].split(), []]
    for row, line in zip(table.to_pylist(), (7, 0), strict=False):
        np.testing.assert_allclose(row["vectors"], pool(expected[line].mean(axis=0), "max"), atol=1e-6, rtol=0)
    assert table.column("vectors")[2].as_py() == [0.0] * 32  # no tokens: zeros, as pool gives


def test_engine_ray_writes_a_whole_parquet_directory_of_pooled_float16_rows_with_ids(ray_cluster, tmp_path,
                                                                                      fixture_dir, expected):
    source = tmp_path / "in.jsonl"
    records = [{"text": line, "id": f"doc-{i}"} if i % 2 else {"text": line.split(), "id": i}
               for i, line in enumerate(LINES)]
    source.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    output = tmp_path / "out"
    assert main(["embed", str(source), str(output), "--engine", "ray", "--text-field", "text", "--id-field", "id",
                 "--layers", "top", "--pooling", "mean", "--dtype", "float16", "--model", str(fixture_dir),
                 "--quiet"]) == 0
    assert not (tmp_path / "out.partial").exists()
    assert json.loads((output / SETTINGS_FILE).read_text())["pooling"] == "mean"
    table = pq.read_table(output)  # the directory, as Ray wrote it; _settings.json is skipped
    assert table.schema == arrow_schema(VectorShape(None, 32, True, np.dtype(np.float16)), with_ids=True)
    rows = _rows(table)
    assert sorted(rows) == list(range(len(LINES)))
    for index, row in rows.items():
        assert row["id"] == (f"doc-{index}" if index % 2 else str(index))
        assert row["tokens"] == LINES[index].split()
        top = pool(expected[index][-1], "mean")
        np.testing.assert_allclose(np.array(row["vectors"], np.float32), top, rtol=1e-3, atol=1e-3)


def test_engine_ray_cleans_given_tokens_as_the_single_process_embedder_does(ray_cluster, tmp_path, fixture_dir):
    """A JSON line's token list reaches the workers' model as raw text would: composed (``cafe`` + U+0301 as
    ``café``), invisible formatting deleted; the tokens column says what was embedded."""
    given = [["the", "cafe\u0301", "ri\u00adver", "ba\u200bnk"], ["\u2764\ufe0f", "day"]]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": tokens}) + "\n" for tokens in given), encoding="utf-8")
    output = tmp_path / "out"
    assert main(["embed", str(source), str(output), "--engine", "ray", "--text-field", "text", "--layers", "all",
                 "--model", str(fixture_dir), "--quiet"]) == 0
    rows = _rows(pq.read_table(output))
    cleaned = [["the", "caf\u00e9", "river", "bank"], ["\u2764", "day"]]
    reference = Embedder.load(str(fixture_dir)).embed(cleaned, "all")
    for index, tokens in enumerate(cleaned):
        assert rows[index]["tokens"] == tokens
        layers = np.stack([np.array(rows[index][f"layer_{k}"], np.float32).reshape(-1, 32) for k in range(3)])
        np.testing.assert_allclose(layers, reference[index], atol=1e-6, rtol=0)


def test_engine_ray_reports_the_lines_it_had_to_fix_by_number(ray_cluster, tmp_path, fixture_dir, caplog):
    source = tmp_path / "in.txt"
    source.write_bytes(b"the bank\n\nctrl\x07char here\n")
    assert main(["embed", str(source), str(tmp_path / "out"), "--engine", "ray", "--layers", "top", "--pooling",
                 "mean", "--model", str(fixture_dir), "--quiet"]) == 0
    messages = [record.getMessage() for record in caplog.records]
    assert "line 1: empty; it has 0 tokens" in messages
    assert "line 2: control characters replaced by spaces" in messages


def test_a_dataset_without_line_numbers_is_refused_before_any_work(ray_cluster, fixture_dir):
    lines = ray_cluster.data.from_items([{"text": "no line number"}])
    with pytest.raises(ValueError, match=r"lacks the column\(s\) index"):
        embed_dataset(lines, str(fixture_dir), EmbedOptions())


@pytest.fixture
def no_work(monkeypatch, no_model_load):
    """Fails the test if the model loads or Ray starts: the refusals under test must come first."""

    def fail(*args, **kwargs):
        raise AssertionError("Ray started before the mistake was found")

    monkeypatch.setattr("elmo.embed_job.ray_data.import_ray", fail)


REFUSED = [
    (["out/", "--engine", "ray", "--resume"], "--engine ray does not take --resume"),
    (["out/", "--engine", "ray", "--shard", "0/2"], "--engine ray does not take --shard"),
    (["out/", "--engine", "ray", "--format", "hdf5"], "--engine ray writes parquet only, not hdf5"),
    (["out/", "--engine", "ray", "--layers", "1,2"], "--layers: "),  # named as the option, as locally
    (["out/", "--engine", "ray", "--layers", "7"], "--layers: "),
    (["out.h5", "--engine", "ray"], "--engine ray writes a directory of Parquet files, and out.h5 names a hdf5 "
                                    "file"),  # it blamed a --format parquet the user never gave
    (["out.npy", "--engine", "ray", "--pooling", "mean"], "out.npy names a npy file"),
    (["full/", "--engine", "ray"], "full is not empty; Ray would mix its files"),
    (["out.parquet", "--workers", "2"], "--workers is for --engine ray"),
]


@pytest.mark.parametrize(("arguments", "message"), REFUSED, ids=[message[:30] for _, message in REFUSED])
def test_what_the_ray_engine_cannot_do_is_refused_before_any_work(arguments, message, tmp_path, fixture_dir, capsys,
                                                                  monkeypatch, no_work):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("a b\nc d\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.parquet").write_text("")
    assert main(["embed", "in.txt", *arguments, "--model", str(fixture_dir), "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["full", "in.txt", "old.parquet"]


def test_engine_ray_refuses_a_device_its_workers_would_not_run_on(tmp_path, fixture_dir, capsys, monkeypatch,
                                                                   no_work):
    monkeypatch.setattr("torch.backends.mps.is_available", lambda: True)  # as on a Mac, where mps parses
    (tmp_path / "in.txt").write_text("a b\n")
    assert main(["embed", str(tmp_path / "in.txt"), f"{tmp_path / 'out'}/", "--engine", "ray", "--device", "mps",
                 "--quiet", "--model", str(fixture_dir)]) == 2
    assert "--engine ray runs its workers on cpu or cuda (a GPU each), not mps" in capsys.readouterr().err


def test_engine_ray_under_torchrun_is_refused(tmp_path, fixture_dir, capsys, monkeypatch, no_work):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    (tmp_path / "in.txt").write_text("a b\n")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out"), "--engine", "ray", "--quiet",
                 "--model", str(fixture_dir)]) == 2
    assert "not under torchrun or a Slurm array" in capsys.readouterr().err


def test_without_ray_the_engine_says_in_one_line_how_to_install_it(tmp_path, fixture_dir, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError, as where it is not installed
    (tmp_path / "in.txt").write_text("a b\n")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out"), "--engine", "ray", "--quiet",
                 "--model", str(fixture_dir)]) == 2
    assert capsys.readouterr().err == ("elmo embed: error: the Ray engine needs the 'ray' extra: "
                                       "pip install 'elmo-bilm[ray]' (missing: ray)\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt"]


def test_embed_batches_names_each_line_whose_vectors_float16_cannot_hold(fixture_dir):
    batch = pa.table({"index": pa.array([7, 0], pa.int64()), "text": [LINES[7], LINES[0]]})
    options = EmbedOptions(layers="100000,0,0", pooling="max", dtype="float16", batch_size=2)
    with pytest.warns(RuntimeWarning) as caught:
        table = EmbedBatches(str(fixture_dir), options)(batch)
    assert not np.isfinite(np.array(table.column("vectors").to_pylist(), np.float32)).all()
    assert [str(warning.message).split(" vectors")[0] for warning in caught] == ["line 7:", "line 0:"]
