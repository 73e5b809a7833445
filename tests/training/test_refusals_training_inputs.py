"""Refusals of the training commands' inputs before any work: an --out that is not a new run's to write, a log.jsonl
that is not a run's, text that is not UTF-8, a directory or file given where the other is expected, and batch
sizes past any machine's memory."""

import json
from pathlib import Path

import pytest
from run_helpers import micro_options

import elmo.training.trainer as trainer
from elmo import files
from elmo.cli import build_parser, main
from elmo.training import TrainingOptions, Vocabulary, train
from elmo.training.checkpoints import resolve_checkpoint
from elmo.training.corpus import Corpus, CorpusError
from elmo.training.run_log import LOG_FILE
from elmo.training.vocab import VocabularyError

MODEL_FILES = ("options.json", "weights.hdf5", "vocab.txt", "softmax.safetensors", "tokenizer.json")


class ReachedTheCorpus(Exception):
    """Raised in place of reading the corpus: the checks before it passed."""


@pytest.fixture
def corpus_never_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def reached(*_args, **_kwargs):
        raise ReachedTheCorpus

    monkeypatch.setattr(trainer, "Corpus", reached)


def _model_directory(path: Path) -> Path:
    """A directory laid out as an exported model (the checks never read the files' contents)."""
    path.mkdir()
    for name in MODEL_FILES:
        (path / name).write_text(f"the model's {name}\n")
    return path


def _options(tmp_path: Path, **overrides) -> TrainingOptions:
    (tmp_path / "corpus.txt").write_text("a b c\n")
    settings: dict = dict(corpus=[str(tmp_path / "corpus.txt")], init_from=None, vocab=str(tmp_path / "v.txt"),
                          max_steps=1)
    settings.update(overrides)
    return TrainingOptions(**settings)


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in directory.iterdir()}


def test_a_new_run_in_the_init_from_models_own_directory_is_refused_under_any_name_before_the_corpus_is_read(
    tmp_path: Path, corpus_never_read: None
):
    model = _model_directory(tmp_path / "mcopy")
    before = _snapshot(model)
    for out in (model, tmp_path / "mcopy" / ".." / "mcopy"):
        with pytest.raises(ValueError, match=r"is the directory of --init-from .*mcopy.*ruining it"):
            train(_options(tmp_path, init_from=str(model), vocab=None), out, progress=False)
    assert _snapshot(model) == before


@pytest.mark.parametrize("held", [MODEL_FILES, ("weights.hdf5", LOG_FILE), ("vocab.txt",), ("train.log", "vocab.txt")],
                         ids=["a model", "a model's weights beside a log", "a user's vocab.txt without a run log",
                              "a user's vocab.txt beside another file"])
def test_a_new_run_refuses_a_directory_holding_what_is_not_a_runs_and_leaves_it_as_it_was(
    tmp_path: Path, corpus_never_read: None, held: tuple[str, ...]
):
    out = tmp_path / "out"
    out.mkdir()
    for name in held:
        (out / name).write_text("" if name == LOG_FILE else f"the user's {name}\n")
    before = _snapshot(out)
    with pytest.raises(ValueError, match=f"--out {out} holds"):
        train(_options(tmp_path), out, progress=False)
    assert _snapshot(out) == before


def test_a_new_path_an_empty_directory_and_a_run_stopped_before_its_first_checkpoint_may_take_a_new_run(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path
):
    (tmp_path / "empty").mkdir()
    teed = tmp_path / "teed"  # `elmo train ... --out teed | tee teed/train.log` makes the file before the run starts
    teed.mkdir()
    (teed / "train.log").write_text("the user's log\n")
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    (stopped / LOG_FILE).write_text(json.dumps({"step": 7, "loss": 3.0}) + "\n")
    (stopped / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nold\n")
    (stopped / ".log.jsonl.x1.partial").write_text("a killed write's")
    for out in (tmp_path / "new", tmp_path / "empty", teed, stopped):
        train(micro_options(tmp_path, synthetic_corpus, micro_options_file, max_steps=2, log_every=1), out,
              progress=False)
        steps = [json.loads(line)["step"] for line in (out / LOG_FILE).read_text().splitlines()]
        assert steps == [1, 2]  # the new run's log alone
        assert Vocabulary.load(out / "vocab.txt") == Vocabulary.load(tmp_path / "vocab.txt")
    assert (teed / "train.log").read_text() == "the user's log\n"  # a file the run does not write is left alone


def test_a_new_run_refuses_to_write_its_vocabulary_over_the_vocab_it_reads(tmp_path: Path, corpus_never_read: None):
    out = tmp_path / "out"
    out.mkdir()
    (out / LOG_FILE).write_text("")
    (out / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nwords\n")
    before = _snapshot(out)
    with pytest.raises(ValueError, match=r"vocab\.txt is an input of this command"):
        train(_options(tmp_path, vocab=str(out / "vocab.txt"), init_from=str(tmp_path / "model")), out,
              progress=False)
    assert _snapshot(out) == before


def test_text_inside_the_run_directory_is_refused_before_it_is_read(tmp_path: Path, corpus_never_read: None):
    """A pattern over the run directory would train on the run's own vocab.txt and log and, once they changed,
    refuse --resume; a run stopped before its first checkpoint may be started again there, so the files exist."""
    out = tmp_path / "texts"
    out.mkdir()
    (out / "a.txt").write_text("a b c\n")
    (out / LOG_FILE).write_text("")
    (out / "vocab.txt").write_text("<S>\n</S>\n<UNK>\na\n")
    with pytest.raises(CorpusError, match=rf"--corpus names {out}/(a|vocab)\.txt, inside the run directory {out}"):
        train(_options(tmp_path, corpus=[str(out / "*.txt")]), out, progress=False)
    with pytest.raises(CorpusError, match=rf"--valid names {out}/a\.txt, inside the run directory"):
        train(_options(tmp_path, valid=[str(out / "a.txt")]), out, progress=False)


def test_validation_text_that_is_also_training_text_is_refused_under_any_name(tmp_path: Path,
                                                                              corpus_never_read: None):
    options = _options(tmp_path)  # writes corpus.txt
    (tmp_path / "same.txt").symlink_to(tmp_path / "corpus.txt")
    with pytest.raises(CorpusError, match=r"--valid .*same\.txt is also a --corpus file"):
        train(_options(tmp_path, valid=[str(tmp_path / "same.txt")]), tmp_path / "run", progress=False)
    assert options.corpus == [str(tmp_path / "corpus.txt")]
    (tmp_path / "held-out.txt").write_text("d e\n")
    with pytest.raises(ReachedTheCorpus):
        train(_options(tmp_path, valid=[str(tmp_path / "held-out.txt")]), tmp_path / "run", progress=False)


@pytest.mark.parametrize("content", ['{"mine": 1}\n', "[1, 2]\n", '{"step": "one"}\n', "not json\n{\"step\": 1}\n"],
                         ids=["no step", "not an object", "a step that is not a number", "not JSON"])
def test_a_log_jsonl_that_is_not_a_runs_is_refused_naming_it_and_its_line(tmp_path: Path, corpus_never_read: None,
                                                                             content: str):
    out = tmp_path / "d"
    out.mkdir()
    (out / LOG_FILE).write_text(content)
    with pytest.raises(ValueError, match=rf"{out / LOG_FILE}: line 1 is not"):
        train(_options(tmp_path), out, progress=False)
    assert (out / LOG_FILE).read_text() == content


def test_a_last_log_line_cut_short_by_a_kill_is_dropped_not_refused(tmp_path: Path, corpus_never_read: None):
    out = tmp_path / "d"
    out.mkdir()
    (out / LOG_FILE).write_text(json.dumps({"step": 10, "loss": 2.5}) + '\n{"step": 20, "lo')
    with pytest.raises(ReachedTheCorpus):
        train(_options(tmp_path), out, progress=False)


def test_an_out_under_a_file_is_refused_before_the_corpus_is_read(tmp_path: Path, corpus_never_read: None):
    (tmp_path / "voc.txt").write_text("a file\n")
    with pytest.raises(ValueError, match=f"--out {tmp_path / 'voc.txt' / 'x'}: {tmp_path / 'voc.txt'} is a file"):
        train(_options(tmp_path), tmp_path / "voc.txt" / "x", progress=False)


def _line_and_offset(good_lines: list[bytes], bad_prefix: bytes) -> tuple[int, int]:
    """The 1-based line and byte offset of the byte after ``bad_prefix`` on the line after ``good_lines``."""
    return len(good_lines) + 1, sum(map(len, good_lines)) + len(bad_prefix)


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 1 << 20])
def test_a_corpus_that_is_not_utf8_is_refused_at_its_first_bad_byte_whatever_the_chunks_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
):
    monkeypatch.setattr(files, "TEXT_BLOCK", chunk)  # the blocks elmo.files reads the corpus in
    good = ["ναί café 中文 🙂 ok\n".encode(), b"second line\n"]
    clean = tmp_path / "clean.txt"
    clean.write_bytes(b"".join(good))
    Corpus([str(clean)])  # every multi-byte character, however a chunk cuts it, is accepted
    cases = {"latin1.txt": (b"caf", b"\xe9 au lait\n", "is not UTF-8 text: byte {} is 0xe9 \\(invalid continuation"),
             "binary.txt": (b"ELF", b"\x00\x01\x02\n", "holds a NUL byte at byte {}"),
             "cut.txt": ("中".encode(), "文".encode()[:2], "ends inside a character: byte {} is 0xe6, the start of a")}
    for name, (prefix, rest, problem) in cases.items():
        (tmp_path / name).write_bytes(b"".join(good) + prefix + rest)
        line, offset = _line_and_offset(good, prefix)
        where = rf"{offset} \(line {line}, counting from 1\)"
        with pytest.raises(CorpusError, match=rf"{tmp_path / name} {problem.format(where)}"):
            Corpus([str(clean), str(tmp_path / name)])


def test_a_run_begun_before_the_check_resumes_on_its_text_though_a_new_run_on_it_is_refused(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path
):
    options = micro_options(tmp_path, synthetic_corpus, micro_options_file, max_steps=2, checkpoint_every=2)
    train(options, tmp_path / "run", progress=False)
    text = synthetic_corpus.read_bytes()
    synthetic_corpus.write_bytes(text.replace(b"the", b"th\xe9", 1))  # a Latin-1 byte, at the same size
    options.max_steps = 4
    assert train(options, tmp_path / "run", resume=True, progress=False) == 4
    with pytest.raises(CorpusError, match=rf"{synthetic_corpus} is not UTF-8 text: byte 2 \(line 1, "
                                          r"counting from 1\) is 0xe9"):
        train(options, tmp_path / "new", progress=False)


def test_a_vocabulary_that_is_not_utf8_is_refused_naming_the_file_line_and_byte(tmp_path: Path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"\xef\xbb\xbf<S>\n</S>\n<UNK>\ncaf\xe9\n")  # a byte-order mark, then Latin-1
    with pytest.raises(VocabularyError, match=rf"{path} is not UTF-8 text: byte 21 \(line 4, counting from 1\) "
                                              r"is 0xe9"):
        Vocabulary.load(path)
    path.write_bytes(b"<S>\n</S>\n<UNK>\nab\x00\n")
    with pytest.raises(VocabularyError, match=rf"{path} holds a NUL byte at byte 17 \(line 4, counting from 1\)"):
        Vocabulary.load(path)


def test_a_directory_given_for_a_file_and_a_file_for_a_directory_are_named_as_such(tmp_path: Path):
    (tmp_path / "adir").mkdir()
    (tmp_path / "good.txt").write_text("a b\n")
    with pytest.raises(CorpusError, match=f"{tmp_path / 'adir'} is a directory"):
        Corpus([str(tmp_path / "adir")])
    with pytest.raises(CorpusError, match=rf"{tmp_path / 'adir'} \(matched by .*\) is a directory"):
        Corpus([str(tmp_path / "*")])
    with pytest.raises(VocabularyError, match=f"{tmp_path / 'adir'} is a directory"):
        Vocabulary.load(tmp_path / "adir")
    with pytest.raises(ValueError, match=f"{tmp_path / 'good.txt'} is a file; expected a directory"):
        resolve_checkpoint(tmp_path / "good.txt")


def test_perplexity_finds_a_missing_corpus_before_it_loads_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
):
    import elmo.training.export as export

    def no_model(*_args):
        raise AssertionError("the model was loaded before the corpus was checked")

    monkeypatch.setattr(export, "load_language_model", no_model)
    assert main(["perplexity", "--model", "en", "--corpus", str(tmp_path / "missing.txt")]) == 2
    assert f"{tmp_path / 'missing.txt'}: no such corpus file" in capsys.readouterr().err


@pytest.mark.parametrize(("command", "option", "bound"), [
    (["perplexity", "--model", "en", "--corpus", "c.txt"], "--batch-size", 65_536),
    (["perplexity", "--model", "en", "--corpus", "c.txt"], "--unroll-steps", 10_000),
    (["train", "--corpus", "c.txt", "--out", "o"], "--batch-size", 65_536),
    (["train", "--corpus", "c.txt", "--out", "o"], "--unroll-steps", 10_000),
    (["train", "--corpus", "c.txt", "--out", "o"], "--valid-batch-size", 65_536),
])
def test_batch_and_unroll_sizes_past_their_bound_are_refused_by_the_parser_and_the_bound_is_in_the_help(
    command: list[str], option: str, bound: int, capsys: pytest.CaptureFixture
):
    parser = build_parser()
    assert getattr(parser.parse_args([*command, option, str(bound)]), option[2:].replace("-", "_")) == bound
    with pytest.raises(SystemExit):
        parser.parse_args([*command, option, str(bound + 1)])
    assert f"<= {bound}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args([command[0], "--help"])
    assert f"at most {bound:,}" in " ".join(capsys.readouterr().out.split())


def test_precisions_the_parser_offers_are_the_kernels_product_types():
    """The parser states them as text (its --help runs without torch); PRODUCT_DTYPES is the one list."""
    from elmo.modules.low_precision import PRODUCT_DTYPES

    parser = build_parser()
    train_parser = next(action for action in parser._subparsers._group_actions[0].choices.values()
                        if action.prog.endswith(" train"))
    precision = next(action for action in train_parser._actions if action.dest == "precision")
    assert tuple(precision.choices) == tuple(PRODUCT_DTYPES) and precision.default in PRODUCT_DTYPES
