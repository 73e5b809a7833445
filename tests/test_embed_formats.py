"""``elmo embed`` beyond AllenNLP's HDF5: pooling, float16, Parquet and npy, standard input, JSON lines, the model
as two files, resuming every format, and every mistake refused before the model loads."""

import io
import json
import os
import signal
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import elmo.embed_job.job as job
from elmo.cli import main
from elmo.embed_job import EmbeddedLine, VectorShape, lines_to_table
from elmo.embed_job.source import EmbedReport, Source, read_source
from elmo.embedder import Embedder
from elmo.pooling import POOLINGS, pool

LINES = ["the bank of the river", "", "she played a game", "日本語 の 文", "one"]


def _embed(text, output, fixture_dir, *options) -> None:
    assert main(["embed", str(text), str(output), "--model", str(fixture_dir), "--quiet", *options]) == 0


def test_parquet_columns_read_back_with_pyarrow_equal_the_embedders_arrays(text, tmp_path, fixture_dir, expected):
    _embed(text, tmp_path / "out.parquet", fixture_dir)
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.column_names == ["index", "tokens", "layer_0", "layer_1", "layer_2"]
    assert table.schema.field("index").type == pa.int64()
    assert table.schema.field("layer_1").type == pa.list_(pa.list_(pa.float32(), 32))
    assert table.column("index").to_pylist() == list(range(len(LINES)))
    assert table.column("tokens").to_pylist() == [line.split() for line in LINES]
    for k in range(3):
        for row, array in zip(table.column(f"layer_{k}").to_pylist(), expected, strict=True):
            np.testing.assert_array_equal(np.array(row, np.float32).reshape(-1, 32), array[k])
    # Vectors are written plain and without statistics (neither pays for numbers that are not filtered on), the
    # contextual ones uncompressed (they do not compress), the context-free layer 0 with zstd (a word's vector
    # repeats with the word); the tokens with a dictionary, index and tokens compressed with statistics.
    columns = pq.ParquetFile(tmp_path / "out.parquet").metadata.row_group(0)
    chunks = {columns.column(i).path_in_schema.split(".")[0]: columns.column(i) for i in range(columns.num_columns)}
    for k in range(3):
        vectors = chunks[f"layer_{k}"]
        assert "RLE_DICTIONARY" not in vectors.encodings
        assert (vectors.compression, vectors.is_stats_set) == ("ZSTD" if k == 0 else "UNCOMPRESSED", False)
    assert "RLE_DICTIONARY" in chunks["tokens"].encodings
    assert (chunks["tokens"].compression, chunks["index"].compression) == ("SNAPPY", "SNAPPY")
    assert chunks["index"].is_stats_set and chunks["index"].statistics.max == len(LINES) - 1


def test_the_context_free_layer_takes_a_fraction_of_its_size_where_words_repeat(tmp_path, fixture_dir):
    text = tmp_path / "repeats.txt"  # 80 tokens of 5 words: layer 0 holds 5 distinct vectors
    text.write_text("\n".join(["the bank of the river", "the river bank"] * 10) + "\n", encoding="utf-8")
    _embed(text, tmp_path / "out.parquet", fixture_dir)
    columns = pq.ParquetFile(tmp_path / "out.parquet").metadata.row_group(0)
    sizes = {columns.column(i).path_in_schema.split(".")[0]: (columns.column(i).total_compressed_size,
                                                              columns.column(i).total_uncompressed_size)
             for i in range(columns.num_columns)}
    assert sizes["layer_0"][0] < sizes["layer_0"][1] / 4
    assert sizes["layer_1"][0] == sizes["layer_1"][1]


@pytest.mark.parametrize("pooling", POOLINGS)
def test_pooled_vectors_equal_pool_of_the_unpooled_run(pooling, text, tmp_path, fixture_dir, expected):
    _embed(text, tmp_path / "out.parquet", fixture_dir, "--layers", "top", "--pooling", pooling)
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.schema.field("vectors").type == pa.list_(pa.float32(), 32)
    got = np.array(table.column("vectors").to_pylist(), np.float32)
    np.testing.assert_allclose(got, [pool(array[-1], pooling) for array in expected], rtol=1e-6, atol=1e-7)
    assert not got[1].any()  # the empty line pools to zeros


def test_npy_of_pooled_layers_is_one_array_in_line_order(text, tmp_path, fixture_dir, expected):
    _embed(text, tmp_path / "out.npy", fixture_dir, "--pooling", "mean")
    got = np.load(tmp_path / "out.npy")
    assert got.shape == (len(LINES), 3, 32) and got.dtype == np.float32
    np.testing.assert_allclose(got, [pool(array, "mean") for array in expected], rtol=1e-6, atol=1e-7)


def test_float16_is_within_a_thousandth_of_float32(text, tmp_path, fixture_dir, expected):
    _embed(text, tmp_path / "half.hdf5", fixture_dir, "--dtype", "float16")
    with h5py.File(tmp_path / "half.hdf5", "r") as handle:
        for i, array in enumerate(expected):
            assert handle[str(i)].dtype == np.float16
            np.testing.assert_allclose(handle[str(i)][...].astype(np.float32), array, rtol=1e-3, atol=1e-7)
    _embed(text, tmp_path / "half.parquet", fixture_dir, "--dtype", "float16", "--pooling", "max")
    assert pq.read_table(tmp_path / "half.parquet").schema.field("layer_0").type == pa.list_(pa.float16(), 32)


def test_hdf5_datasets_carry_their_tokens_as_a_string_attribute(text, tmp_path, fixture_dir):
    long_line = " ".join(f"w{i}" for i in range(9000))  # its tokens' attribute is past HDF5's compact 64 KiB
    text.write_text("\n".join([*LINES, long_line]) + "\n", encoding="utf-8")
    _embed(text, tmp_path / "out.h5", fixture_dir, "--layers", "top")
    with h5py.File(tmp_path / "out.h5", "r") as handle:
        for i, line in enumerate([*LINES, long_line]):
            assert [token.decode() if isinstance(token, bytes) else token
                    for token in handle[str(i)].attrs["tokens"]] == line.split()
        assert json.loads(handle["sentence_to_index"][0])[long_line] == "5"


def test_standard_input_is_read_like_a_file(text, tmp_path, fixture_dir, monkeypatch, expected):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.read_bytes())))
    _embed("-", tmp_path / "out.hdf5", fixture_dir, "--layers", "top")
    with h5py.File(tmp_path / "out.hdf5", "r") as handle:
        for i, array in enumerate(expected):
            np.testing.assert_array_equal(handle[str(i)][...], array[-1])


def test_json_lines_take_text_or_tokens_and_keep_the_id(tmp_path, fixture_dir, expected):
    records = [{"id": "a", "text": LINES[0]}, {"id": 7, "text": LINES[2].split(), "other": 1}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    for output in ("out.parquet", "out.hdf5"):
        _embed(tmp_path / "in.jsonl", tmp_path / output, fixture_dir, "--text-field", "text", "--id-field", "id")
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.column_names[:3] == ["index", "id", "tokens"]
    assert table.column("id").to_pylist() == ["a", "7"]
    np.testing.assert_array_equal(np.array(table.column("layer_2")[1].as_py(), np.float32), expected[2][2])
    with h5py.File(tmp_path / "out.hdf5", "r") as handle:
        assert [handle[name].attrs["id"] for name in ("0", "1")] == ["a", "7"]
        np.testing.assert_array_equal(handle["0"][...], expected[0])


def test_a_json_escaped_nul_in_text_is_a_space_and_in_a_token_or_id_is_refused_before_the_model_loads(
        tmp_path, fixture_dir, capsys, no_model_load):
    """JSON can spell the NUL that a text file may not hold; HDF5's strings cannot store it."""
    text = '{"text": "the\\u0000bank", "id": "a"}\n'
    (tmp_path / "in.jsonl").write_text(text)
    parsed = list(read_source(Source(tmp_path / "in.jsonl", "in.jsonl", "text", "id"), EmbedReport()))
    assert parsed[0].sentence.split() == ["the", "bank"]
    bad = ['{"text": ["a", "b\\u0000"], "id": "b"}\n', '{"text": "c", "id": "\\u0001"}\n']
    (tmp_path / "bad.jsonl").write_text(text + "".join(bad))
    assert main(["embed", str(tmp_path / "bad.jsonl"), str(tmp_path / "out.hdf5"), "--text-field", "text",
                 "--id-field", "id", "--model", str(fixture_dir), "--quiet"]) == 2
    message = capsys.readouterr().err
    assert "line 1: field 'text': token 1 holds the control character U+0000" in message
    assert "line 2: id field 'id' holds the control character U+0001" in message
    assert not (tmp_path / "out.hdf5").exists()


def test_a_token_without_text_is_refused_naming_its_line_before_the_model_loads(tmp_path, fixture_dir, capsys,
                                                                               no_model_load):
    """An empty or blank token was embedded as the empty word (the character CNN's start and end marks alone)."""
    lines = ['{"text": ["a", "b"]}\n', '{"text": ["a", ""]}\n', '{"text": [" ", "b"]}\n']
    (tmp_path / "in.jsonl").write_text("".join(lines))
    assert main(["embed", str(tmp_path / "in.jsonl"), str(tmp_path / "out.hdf5"), "--text-field", "text",
                 "--model", str(fixture_dir), "--quiet"]) == 2
    message = capsys.readouterr().err
    assert "line 1: field 'text': token 1 is empty or only white space; a token must be printable text" in message
    assert "line 2: field 'text': token 0 is empty or only white space" in message
    assert not (tmp_path / "out.hdf5").exists()


def test_use_sentence_keys_names_the_datasets_by_their_sentences_stripped_as_allennlp_did(tmp_path, fixture_dir,
                                                                                            expected):
    (tmp_path / "in.txt").write_text(f"{LINES[0]}\n  {LINES[2]} \n")
    _embed(tmp_path / "in.txt", tmp_path / "out.hdf5", fixture_dir, "--use-sentence-keys")
    with h5py.File(tmp_path / "out.hdf5", "r") as handle:
        assert sorted(handle) == sorted([LINES[0], LINES[2]])  # and no sentence_to_index, as AllenNLP
        np.testing.assert_array_equal(handle[LINES[2]][...], expected[2])
    _embed(tmp_path / "in.txt", tmp_path / "numbered.hdf5", fixture_dir)
    with h5py.File(tmp_path / "numbered.hdf5", "r") as handle:
        assert json.loads(handle["sentence_to_index"][0]) == {LINES[0]: "0", LINES[2]: "1"}


def test_the_model_as_options_and_weight_files_gives_the_same_vectors(text, tmp_path, fixture_dir, expected):
    assert main(["embed", str(text), str(tmp_path / "out.hdf5"), "--options-file", str(fixture_dir / "options.json"),
                 "--weight-file", str(fixture_dir / "lm_weights.hdf5"), "--quiet"]) == 0
    with h5py.File(tmp_path / "out.hdf5", "r") as handle:
        np.testing.assert_array_equal(handle["2"][...], expected[2])


def test_lines_to_table_round_trips_and_checks_shapes():
    shape = VectorShape(None, 4, False, np.dtype(np.float16))
    rng = np.random.default_rng(0)
    lines = [(3, ["a", "b"], rng.normal(size=(2, 4))), EmbeddedLine(8, [], np.zeros((0, 4)))]
    table = lines_to_table(lines, shape)
    assert table.column("index").to_pylist() == [3, 8]
    np.testing.assert_array_equal(np.array(table.column("vectors")[0].as_py()), lines[0][2].astype(np.float16))
    assert table.column("vectors")[1].as_py() == []
    with pytest.raises(ValueError, match=r"line 3: vectors of shape \(2, 4\); expected \(2, 5\)"):
        lines_to_table(lines, shape._replace(dim=5))


# --- resume: every format keeps every finished line across an interrupt, and finishes as a fresh run would -------

RESUME_LINES = [f"line {i} : the bank of the river {'and more words ' * (i % 5)}" for i in range(70)]


@pytest.mark.parametrize("on_thread", [False, True], ids=["in-line", "on-a-thread"])
@pytest.mark.parametrize(("name", "options"), [
    ("out.hdf5", []), ("out.parquet", []), ("out.npy", ["--pooling", "last"])])
def test_an_interrupted_run_resumes_to_the_fresh_result(name, options, on_thread, tmp_path, fixture_dir,
                                                        capsys, monkeypatch, interrupt_after):
    monkeypatch.setattr(job, "spare_core", lambda embedder: on_thread)  # both ways the chunks can be stored
    (tmp_path / "in.txt").write_text("\n".join(RESUME_LINES) + "\n")
    command = ["embed", str(tmp_path / "in.txt"), str(tmp_path / name), "--model", str(fixture_dir), "--quiet",
               "--batch-size", "2", *options]  # a chunk of 2 * 16 = 32 lines
    with monkeypatch.context() as patch:
        interrupt_after(patch, 44, signal.SIGINT)
        assert main(command) == 130
    assert "holds the first 44 of 70 lines; run the same command with --resume" in capsys.readouterr().err
    assert not (tmp_path / name).exists()
    chunk = {"out.hdf5": "h5", "out.parquet": "arrow", "out.npy": "npy"}[name]  # Parquet's chunks are Arrow IPC
    assert sorted(path.name for path in (tmp_path / f"{name}.partial").iterdir()) == [
        f"chunk-000000.{chunk}", f"chunk-000001.{chunk}", "settings.json"]
    assert not list(tmp_path.glob(f".{name}.*"))  # the output being built beside it is dropped
    (tmp_path / f".{name}.killed.partial").write_bytes(b"PAR1")  # as a SIGKILL would leave it
    assert main([*command, "--resume", "--dtype", "float16"]) == 2
    assert "made with another dtype" in capsys.readouterr().err
    assert main([*command, "--resume"]) == 0
    assert "resumed: 44 lines already done" in capsys.readouterr().out
    assert not (tmp_path / f"{name}.partial").exists() and not list(tmp_path.glob(f".{name}.*"))
    fresh = Embedder.load(str(fixture_dir)).embed(RESUME_LINES, "all")
    if name.endswith(".npy"):
        got = list(np.load(tmp_path / name))
        fresh = [pool(array, "last") for array in fresh]
    elif name.endswith(".hdf5"):
        with h5py.File(tmp_path / name, "r") as handle:
            assert sorted(handle) == sorted([*map(str, range(70)), "sentence_to_index"])
            got = [handle[str(k)][...] for k in range(70)]
    else:
        table = pq.read_table(tmp_path / name)
        assert table.column("index").to_pylist() == list(range(70))
        got = [np.array(row, np.float32).reshape(-1, 32) for row in table.column("layer_2").to_pylist()]
        fresh = [array[2] for array in fresh]
    for got_array, fresh_array in zip(got, fresh, strict=True):  # a cold token cache changes float32 rounding only
        np.testing.assert_allclose(got_array, fresh_array, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("name", "options", "records"), [
    ("out.hdf5", [], True), ("out.parquet", [], True), ("out.npy", ["--pooling", "mean"], False)])
def test_resume_skips_a_whole_output_of_the_same_job_and_refuses_one_of_another(name, options, records, text,
                                                                                 tmp_path, fixture_dir, capsys):
    """A job rerun with --resume after it finished (a scheduler's retry) re-embedded the whole input; now HDF5 and
    Parquet, which record their settings, are kept as they are, and one made otherwise is refused as a partial
    output of another job is. npy has no place for settings: embedded again, as before."""
    output = tmp_path / name
    _embed(text, output, fixture_dir, *options)
    made = output.stat().st_mtime_ns
    capsys.readouterr()
    _embed(text, output, fixture_dir, *options, "--resume")
    assert (output.stat().st_mtime_ns == made) is records
    said = capsys.readouterr().out
    assert (f"{output} is already whole; skipped" in said) is records
    if not records:
        return
    assert main(["embed", str(text), str(output), "--model", str(fixture_dir), "--quiet", *options, "--resume",
                 "--dtype", "float16"]) == 2
    assert f"{output} was made with another dtype; run without --resume to embed it again" in capsys.readouterr().err
    assert output.stat().st_mtime_ns == made
    text.write_text(text.read_text() + "one more line\n")
    assert main(["embed", str(text), str(output), "--model", str(fixture_dir), "--quiet", *options, "--resume"]) == 2
    assert "has changed since" in capsys.readouterr().err
    _embed(text, output, fixture_dir, *options, "--dtype", "float16")  # without --resume: embedded again
    assert output.stat().st_mtime_ns != made
    _embed(text, output, fixture_dir, *options, "--dtype", "float16", "--resume")
    assert "already whole; skipped" in capsys.readouterr().out


def test_chunks_go_to_a_thread_only_where_the_model_leaves_this_process_a_core(fixture_dir, monkeypatch):
    embedder = Embedder.load(str(fixture_dir))
    monkeypatch.setattr(job.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    for threads, spare in ((4, False), (3, True), (1, True)):
        monkeypatch.setattr(job.torch, "get_num_threads", lambda threads=threads: threads)
        assert job.spare_core(embedder) is spare, threads
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # torchrun: two processes on these 4 cores
    assert job.spare_core(embedder) is True  # 1 thread of its 2
    monkeypatch.setattr(job.torch, "get_num_threads", lambda: 2)
    assert job.spare_core(embedder) is False


# --- every mistake is named before the model loads, and leaves no file -----------------------------------------


BAD = [
    (["out.npy"], "npy holds one (N, D) array, so it needs --pooling"),
    (["out.hdf5", "--format", "parquet"], "--format parquet but out.hdf5 names a hdf5 file"),
    (["out.parquet", "--id-field", "id"], "--id-field names a field of JSON lines: give --text-field too"),
    (["out.parquet", "--use-sentence-keys"], "--use-sentence-keys names HDF5 datasets"),
    (["out.hdf5", "--text-field", "text"], "in.txt has 5 bad line(s), counting from 0: line 0: not JSON"),
    (["out.hdf5", "--options-file", "options.json"], "--options-file and --weight-file go together"),
    (["out.hdf5", "--use-sentence-keys"], "line 3: the same sentence as line 1; sentence keys must be unique"),
]


@pytest.mark.parametrize(("arguments", "message"), BAD, ids=[message[:30] for _, message in BAD])
def test_a_bad_option_or_line_is_refused_before_the_model_loads(arguments, message, tmp_path, fixture_dir, capsys,
                                                                no_model_load, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("a b\nsame\nc d\nsame\ne\n")
    model = [] if "--options-file" in arguments else ["--model", str(fixture_dir)]
    assert main(["embed", "in.txt", *arguments, *model, "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt"]


def test_binary_standard_input_is_refused_naming_it(tmp_path, fixture_dir, capsys, monkeypatch, no_model_load):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"text\n\x00\x01binary")))
    assert main(["embed", "-", str(tmp_path / "out.hdf5"), "--model", str(fixture_dir), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "standard input holds a NUL byte at byte 5 (line 2, counting from 1), as binary" in error
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_each_lines_hdf5_dataset_is_byte_for_byte_what_h5pys_high_level_calls_write(tmp_path, dtype):
    from elmo.embed_job.hdf5 import _LIBVER, _write_dataset

    rows = np.random.default_rng(0).standard_normal((3, 4, 8)).astype(dtype)
    lines = [("0", rows, ["the", "bank", "of", "日本語"]), ("1", rows[:, :0], []),
             ("小米 手机", rows[:, :2], ["小米", "手机"])]  # an empty line; a sentence as the name
    with h5py.File(tmp_path / "low.h5", "w", libver=_LIBVER) as low, \
            h5py.File(tmp_path / "high.h5", "w", libver=_LIBVER) as high:
        for name, vectors, tokens in lines:
            _write_dataset(low, name, vectors, tokens)
            high.create_dataset(name, data=vectors).attrs.create("tokens", tokens, dtype=h5py.string_dtype())
    assert (tmp_path / "low.h5").read_bytes() == (tmp_path / "high.h5").read_bytes()


@pytest.mark.parametrize(("output", "options"), [("out.hdf5", []), ("out.parquet", []),
                                                ("out.npy", ["--pooling", "mean"])])
def test_the_output_is_on_the_disk_before_it_is_renamed_into_place(output, options, text, tmp_path, fixture_dir,
                                                                   monkeypatch):
    """A rename whose file a power loss could leave short would look complete, with its chunks already removed."""
    events = []
    fsync, replace = os.fsync, os.replace

    def recording_fsync(descriptor):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{descriptor}")))
        fsync(descriptor)

    def recording_replace(source, destination):
        events.append(("replace", str(source), str(destination)))
        replace(source, destination)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "replace", recording_replace)
    _embed(text, tmp_path / output, fixture_dir, *options)
    final = [k for k, event in enumerate(events) if event[0] == "replace" and event[2] == str(tmp_path / output)]
    assert len(final) == 1, events
    source = events[final[0]][1]
    assert ("fsync", str(Path(source).resolve())) in events[: final[0]], events


def test_json_lines_get_the_warnings_of_text_lines_by_number(tmp_path, fixture_dir, caplog):
    """Control characters in the text field (escaped or raw) were replaced quietly, and an empty sentence went
    unreported: the checks looked at the raw JSON line, never blank. Text lines get both warnings (docs)."""
    lines = ['{"text": "the\\u0007bank"}', '{"text": "  "}', '{"text": []}', '{"text": "a\x02b"}', '{"text": "fine"}']
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    _embed(tmp_path / "in.jsonl", tmp_path / "out.parquet", fixture_dir, "--text-field", "text")
    warnings = sorted(record.getMessage() for record in caplog.records if record.levelname == "WARNING")
    assert warnings == ["line 0: control characters replaced by spaces", "line 1: empty; it has 0 tokens",
                        "line 2: empty; it has 0 tokens", "line 3: control characters replaced by spaces"]
    assert pq.read_table(tmp_path / "out.parquet").column("tokens").to_pylist() == [
        ["the", "bank"], [], [], ["a", "b"], ["fine"]]


def test_a_null_field_is_named_null_not_missing(tmp_path, fixture_dir, capsys, no_model_load):
    (tmp_path / "in.jsonl").write_text('{"t": "x", "id": null}\n{"t": null, "id": "b"}\n{"t": "y"}\n')
    assert main(["embed", str(tmp_path / "in.jsonl"), str(tmp_path / "out.hdf5"), "--text-field", "t", "--id-field",
                 "id", "--model", str(fixture_dir), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "line 0: id field 'id': null; expected" in error and "line 1: field 't': null; expected" in error
    assert "line 2: id field 'id': no such field" in error


def test_a_line_of_only_characters_the_tokenizers_drop_is_reported_empty(tmp_path, fixture_dir, caplog):
    """A zero-width space or a soft hyphen alone is no text: the line got 0 tokens without the warning."""
    (tmp_path / "in.txt").write_text("the bank\n\u200b\n\u00ad \n", encoding="utf-8")
    _embed(tmp_path / "in.txt", tmp_path / "out.parquet", fixture_dir)
    warnings = sorted(record.getMessage() for record in caplog.records if record.levelname == "WARNING")
    assert warnings == ["line 1: empty; it has 0 tokens", "line 2: empty; it has 0 tokens"]
    assert pq.read_table(tmp_path / "out.parquet").column("tokens").to_pylist() == [["the", "bank"], [], []]
