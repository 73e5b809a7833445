"""The ``elmo`` command line refuses a bad number or device while it reads its arguments: exit status 2, a
message naming the option and what it expects, before any model loads or file is made."""

import pytest
import torch

from elmo.cli import main

TRAIN = ["task", "train", "classifier", "--train", "t", "--dev", "d", "--test", "e", "--model", "m", "--out", "o"]
NEIGHBORS = ["neighbors", "--index", "i", "--sentence", "a b", "--word", "a"]
SENSES = ["senses", "word", "--index", "i", "--out", "o.png"]

BAD_NUMBERS = [
    (["embed", "in.txt", "out.hdf5", "--batch-size", "0"], "--batch-size: 0: expected a whole number >= 1"),
    (["embed", "in.txt", "out.hdf5", "--batch-size", "-3"], "--batch-size: -3: expected a whole number >= 1"),
    (["embed", "in.txt", "out.hdf5", "--batch-size", "2.5"], "--batch-size: '2.5': expected a whole number >= 1"),
    (["embed", "in.txt", "out.hdf5", "--layers", "nan,0,1"], "mixing weights must be finite float32 numbers"),
    (["embed", "in.txt", "out.hdf5", "--layers", "1e400,0,0"], "mixing weights must be finite float32 numbers"),
    (["embed", "in.txt", "out.hdf5", "--shard", "2/2"], "--shard: shard 2/2: expected I/N with 0 <= I < N"),
    (["embed", "in.txt", "out.hdf5", "--shard", "1/"], "--shard: shard '1/': expected I/N, two whole numbers"),
    (["export-onnx", "en", "--out", "x.onnx", "--opset", "-1"], "--opset: -1: expected a whole number >= 1"),
    (["index", "c.txt", "--out", "i", "--batch-size", "0"], "--batch-size: 0: expected a whole number >= 1"),
    (["index", "c.txt", "--out", "i", "--threads", "0"], "--threads: 0: expected a whole number >= 1"),
    (["index", "c.txt", "--out", "i", "--nprobe", "-1"], "--nprobe: -1: expected a whole number >= 1"),
    (["index", "c.txt", "--out", "i", "--layer", "all"], "layers is 'all'; an index keeps one vector per token"),
    ([*NEIGHBORS, "--k", "0"], "--k: 0: expected a whole number >= 1"),
    ([*NEIGHBORS, "--occurrence", "-1"], "--occurrence: -1: expected a whole number >= 0"),
    ([*NEIGHBORS, "--static-k", "0"], "--static-k: 0: expected a whole number >= 1"),
    ([*SENSES, "--clusters", "0"], "--clusters: 0: expected a whole number >= 1"),
    ([*SENSES, "--max-occurrences", "0"], "--max-occurrences: 0: expected a whole number >= 3"),
    ([*TRAIN, "--epochs", "0"], "--epochs: 0: expected a whole number >= 1"),
    ([*TRAIN, "--patience", "0"], "--patience: 0: expected a whole number >= 1"),
    ([*TRAIN, "--min-epochs", "0"], "--min-epochs: 0: expected a whole number >= 1"),
    ([*TRAIN, "--batch-size", "0"], "--batch-size: 0: expected a whole number >= 1"),
    ([*TRAIN, "--hidden", "0"], "--hidden: 0: expected a whole number >= 1"),
    ([*TRAIN, "--max-words", "0"], "--max-words: 0: expected a whole number >= 1"),
    ([*TRAIN, "--seed", "-1"], "--seed: -1: expected a whole number >= 0"),
    ([*TRAIN, "--lr", "0"], "--lr: 0: expected a finite number > 0"),
    ([*TRAIN, "--lr", "nan"], "--lr: nan: expected a finite number > 0"),
    ([*TRAIN, "--lr", "inf"], "--lr: inf: expected a finite number > 0"),
    ([*TRAIN, "--dropout", "1"], "--dropout: 1: expected a finite number >= 0 and < 1"),
    ([*TRAIN, "--dropout", "-0.1"], "--dropout: -0.1: expected a finite number >= 0 and < 1"),
    ([*TRAIN, "--mix-l2", "-0.5"], "--mix-l2: -0.5: expected a finite number >= 0"),
    (["train", "--corpus", "c.txt", "--batch-size", "0"], "--batch-size: 0: expected a whole number >= 1"),
    (["train", "--corpus", "c.txt", "--negatives", "-5"], "--negatives: -5: expected a whole number >= 1"),
    (["train", "--corpus", "c.txt", "--lr", "nan"], "--lr: nan: expected a finite number > 0"),
    (["train", "--corpus", "c.txt", "--dropout", "1.5"], "--dropout: 1.5: expected a finite number >= 0 and < 1"),
    (["train", "--corpus", "c.txt", "--checkpoint-every", "0"],
     "--checkpoint-every: 0: expected a whole number >= 1"),
    (["vocab", "c.txt", "--out", "v.txt", "--min-count", "-1"], "--min-count: -1: expected a whole number >= 1"),
    (["serve", "--model", "en", "--max-queue", "0"], "--max-queue: 0: expected a whole number >= 1"),
    (["serve", "--model", "en", "--request-timeout", "inf"], "--request-timeout: inf: expected a finite number > 0"),
    (["serve", "--model", "en", "--max-wait-ms", "-1"], "--max-wait-ms: -1: expected a finite number >= 0"),
]


@pytest.mark.parametrize(("argv", "expected"), BAD_NUMBERS, ids=[" ".join(argv[-2:]) for argv, _ in BAD_NUMBERS])
def test_a_bad_number_is_refused_while_the_arguments_are_read(argv, expected, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    assert expected in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["embed", "in.txt", "out.hdf5"], ["index", "c.txt", "--out", "i"]])
def test_an_unknown_device_is_refused_while_the_arguments_are_read(command, capsys):
    with pytest.raises(SystemExit) as exit:
        main([*command, "--device", "gpu"])
    assert exit.value.code == 2
    assert "--device: 'gpu': expected cpu, cuda, cuda:N or mps" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("command", [["embed", "in.txt", "out.hdf5"], ["index", "c.txt", "--out", "i"]])
def test_cuda_without_a_gpu_is_refused_while_the_arguments_are_read(command, capsys):
    with pytest.raises(SystemExit) as exit:
        main([*command, "--device", "cuda"])
    assert exit.value.code == 2
    error = capsys.readouterr().err
    assert "--device: cuda: " in error and "use --device cpu" in error


def test_a_cuda_device_past_the_last_is_refused(capsys):
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(SystemExit):
        main(["embed", "in.txt", "out.hdf5", "--device", f"cuda:{count}"])
    assert "--device: cuda:" in capsys.readouterr().err


def test_good_numbers_and_devices_still_parse():
    from elmo.cli import build_parser

    args = build_parser().parse_args([*TRAIN, "--lr", "1e-3", "--dropout", "0", "--mix-l2", "0", "--seed", "0"])
    assert (args.lr, args.dropout, args.mix_l2, args.seed) == (1e-3, 0.0, 0.0, 0)
    args = build_parser().parse_args(["embed", "in.txt", "out.hdf5", "--device", "cpu", "--batch-size", "1",
                                      "--layers", "0.5,0.25,-0.25"])
    assert (args.device, args.batch_size, args.layers) == ("cpu", 1, [0.5, 0.25, -0.25])


def test_info_shows_a_clip_of_zero_as_none(fixture_dir, tmp_path, capsys):
    """bilm-tf reads a written 0.0 as clip to zero; the model has no clip, which info must not suggest."""
    import json
    import shutil

    unclipped = tmp_path / "model"
    shutil.copytree(fixture_dir, unclipped)
    options = json.loads((unclipped / "options.json").read_text())
    options["lstm"]["cell_clip"] = None
    (unclipped / "options.json").write_text(json.dumps(options))
    assert main(["info", str(unclipped)]) == 0
    out = capsys.readouterr().out
    assert "cell clip none, projection clip " in out and "cell clip 0" not in out


def test_prepare_refuses_a_limit_below_one(tmp_path, capsys):
    from elmo.datasets.__main__ import main as datasets_main

    with pytest.raises(SystemExit) as exited:
        datasets_main(["prepare", "en", "--out", str(tmp_path / "en"), "--limit", "0"])
    assert exited.value.code == 2 and "--limit" in capsys.readouterr().err
    assert not (tmp_path / "en").exists()


def test_vocab_refuses_an_out_that_is_a_corpus_file_or_a_directory_and_keeps_the_corpus(tmp_path, monkeypatch,
                                                                                       capsys):
    """--out over the corpus overwrote the text with its vocabulary; --out a directory was a traceback."""
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b a\n")
    (tmp_path / "emptydir").mkdir()
    refused = [(["c.txt", "--out", "c.txt"], "--out c.txt is an input of this command"),
               (["*.txt", "--out", str(corpus)], f"--out {corpus} is an input of this command (the same file as the "
                                                 "input c.txt)"),
               (["c.txt", "--out", "emptydir"], "--out emptydir is a directory; expected the name of a file to write"),
               (["c.txt", "--out", "c.txt/v.txt"], "--out c.txt/v.txt: c.txt is a file, not a directory to write in")]
    for words, expected in refused:
        assert main(["vocab", *words]) == 2
        error = capsys.readouterr().err
        assert expected in error and len(error.splitlines()) == 1, error
    assert corpus.read_text() == "a b a\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["c.txt", "emptydir"]


def test_a_file_that_cannot_be_written_is_one_line_with_exit_status_1(tmp_path, monkeypatch, capsys):
    """The last resort for an OSError no check foresaw (a full disk here): no traceback."""
    import errno

    from elmo.training.vocab import Vocabulary

    def full_disk(self, path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(Vocabulary, "save", full_disk)
    (tmp_path / "c.txt").write_text("a b\n")
    assert main(["vocab", str(tmp_path / "c.txt"), "--out", str(tmp_path / "v.txt")]) == 1
    error = capsys.readouterr().err
    assert error == f"elmo vocab: error: [Errno 28] No space left on device: '{tmp_path / 'v.txt'}'\n"


def test_train_resume_names_resume_when_given_a_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    assert main(["train", "--resume", str(tmp_path / "afile")]) == 2
    error = capsys.readouterr().err
    assert f"--resume {tmp_path / 'afile'} is a file; expected the run directory" in error and "--out" not in \
        error.replace("`elmo train --out`", "")


def test_prepare_refuses_an_out_that_is_a_file_before_any_work(tmp_path, capsys, monkeypatch):
    """It was a FileExistsError traceback."""
    from elmo.datasets import __main__ as datasets

    def no_work(*args, **kwargs):
        raise AssertionError("prepare ran before --out was checked")

    monkeypatch.setattr(datasets, "prepare", no_work)
    (tmp_path / "outfile").write_text("")
    assert datasets.main(["prepare", "en", "--out", str(tmp_path / "outfile"), "--limit", "5"]) == 2
    error = capsys.readouterr().err
    assert error == (f"python -m elmo.datasets prepare: error: --out {tmp_path / 'outfile'} is a file; expected a "
                     "directory (a new path, or one to write in)\n")


def test_prepare_reports_a_file_it_could_not_write_in_one_line(tmp_path, capsys, monkeypatch):
    from elmo.datasets import __main__ as datasets

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / "en" / "train.txt"))

    monkeypatch.setattr(datasets, "prepare", denied)
    assert datasets.main(["prepare", "en", "--out", str(tmp_path / "en"), "--limit", "5"]) == 1
    assert capsys.readouterr().err == (f"python -m elmo.datasets prepare: error: [Errno 13] Permission denied: "
                                       f"'{tmp_path / 'en' / 'train.txt'}'\n")


@pytest.mark.parametrize("command", [["export", "{model}"], ["index", "{text}"]])
def test_an_out_whose_folder_takes_no_file_is_refused_before_the_model_loads(command, fixture_dir, tmp_path, capsys,
                                                                              no_model_load):
    """Found after the model loaded (and, for elmo index, the corpus was hashed), named by an OSError that did
    not say --out."""
    text = tmp_path / "in.txt"
    text.write_text("the bank of the river\n", encoding="utf-8")
    words = [word.format(model=fixture_dir, text=text) for word in command]
    assert main([*words, "--out", str(text / "out")]) == 2
    assert f"--out {text / 'out'}: its folder {text} is a file" in capsys.readouterr().err
