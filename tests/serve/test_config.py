"""How ``elmo serve``'s --model and --index values name the models and indexes requests ask for, and the flags
refused before anything is served."""

from pathlib import Path

import pytest

from elmo.serve.config import IndexSpec, ModelSpec, read_api_keys

from .conftest import FIXTURE_MODEL


def test_a_directory_is_served_under_its_folders_name_even_given_as_dot(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    model = tmp_path / "legal-en"
    model.mkdir()
    monkeypatch.chdir(model)
    assert ModelSpec.parse(".") == ModelSpec("legal-en", ".")
    assert ModelSpec.parse(str(model) + "/") == ModelSpec("legal-en", str(model) + "/")
    assert ModelSpec.parse("en") == ModelSpec("en", "en")  # no such folder here: a shipped model's name
    assert ModelSpec.parse("mine=.") == ModelSpec("mine", ".")


def test_an_existing_path_holding_an_equals_sign_is_a_bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    directory = tmp_path / "lr=0.1" / "model"
    directory.mkdir(parents=True)
    assert ModelSpec.parse(str(directory)) == ModelSpec("model", str(directory))
    assert IndexSpec.parse(str(directory)) == IndexSpec("model", directory)
    monkeypatch.chdir(tmp_path)
    assert ModelSpec.parse("lr=0.1/model") == ModelSpec("model", "lr=0.1/model")  # exists here: not NAME=DIR
    assert IndexSpec.parse("lr=0.1/model") == IndexSpec("model", Path("lr=0.1/model"))
    assert ModelSpec.parse("en=lr=0.1/model") == ModelSpec("en", "lr=0.1/model")  # a name still names it
    assert IndexSpec.parse("en=lr=0.1/model") == IndexSpec("en", Path("lr=0.1/model"))


def test_a_missing_path_with_a_separator_before_its_equals_sign_is_reported_whole(tmp_path: Path):
    missing = str(tmp_path / "no=such" / "model")
    assert ModelSpec.parse(missing) == ModelSpec(missing, missing)  # not NAME=f"{tmp_path}/no", DIR="such/model"
    assert IndexSpec.parse(missing) == IndexSpec("model", Path(missing))
    assert ModelSpec.parse("en=no/such") == ModelSpec("en", "no/such")  # a missing path under a name is named


@pytest.mark.parametrize(("make", "expected"), [
    # "key-one\n" is bytes 0 to 7, "k" byte 8: the Latin-1 é is byte 9
    (lambda path: path.write_bytes(b"key-one\nk\xe9y\n"),
     "--api-key-file {keys} is not UTF-8 text: byte 9 (line 2, counting from 1) is 0xe9 (invalid continuation "
     "byte); convert it to UTF-8 first (e.g. iconv -f CHARSET -t utf-8)"),
    (lambda path: path.mkdir(), "--api-key-file {keys} is a directory; expected a file of API keys, one per line"),
    (lambda path: None, "--api-key-file {keys}: no such file"),
])
def test_an_unreadable_key_file_is_refused_naming_the_option(tmp_path: Path, make, expected: str):
    """A binary file gave Python's bare UTF-8 error, a directory "[Errno 21] Is a directory", neither naming
    --api-key-file."""
    keys = tmp_path / "keys"
    make(keys)
    with pytest.raises((ValueError, FileNotFoundError)) as refused:
        read_api_keys(keys)
    assert str(refused.value) == expected.format(keys=keys)


def test_a_byte_order_mark_is_not_part_of_the_first_key(tmp_path: Path):
    """A key file saved by a Windows editor begins with one; the first key never matched."""
    keys = tmp_path / "keys"
    keys.write_bytes(b"\xef\xbb\xbfkey-one\r\n# a comment\r\n\r\n  key-two  \r\n")
    assert read_api_keys(keys) == ("key-one", "key-two")


def test_a_key_file_that_is_a_directory_exits_2_before_serving(tmp_path: Path, capsys, monkeypatch):
    """It exited 1, as a failed run does, not 2 as other bad flags do."""
    from elmo.serve import commands

    def no_serving(*args, **kwargs):
        raise AssertionError("served although the key file is a directory")

    monkeypatch.setattr(commands, "_run", no_serving)
    assert commands.main(["--model", str(FIXTURE_MODEL), "--api-key-file", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"elmo serve: error: --api-key-file {tmp_path} is a directory; expected a file "
                                       "of API keys, one per line\n")


def test_threads_past_the_maximum_are_refused_naming_the_option(capsys, monkeypatch):
    """torch said only "Overflow when unpacking long", after the command line was accepted."""
    from elmo.serve import commands

    def no_serving(*args, **kwargs):
        raise AssertionError("served with an impossible thread count")

    monkeypatch.setattr(commands, "_run", no_serving)
    with pytest.raises(SystemExit) as exited:
        commands.main(["--model", str(FIXTURE_MODEL), "--threads", "99999999999999"])
    assert exited.value.code == 2
    assert "argument --threads: 99999999999999: expected a whole number >= 1 and <= 1024" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "expected"), [
    (["--long-sentences", "refuse", "--window-context", "5"], "--window-context sets the windows long sentences are "
                                                              "cut into; --long-sentences refuse cuts none"),
    (["--max-sentence-tokens", "5000"], "--max-sentence-tokens 5000 is more than --max-request-tokens 4096"),
    (["--log-level", "warning", "--access-log"], "--access-log writes at the info level, which --log-level warning "
                                                 "hides"),
    # settings two flags decide, checked by ServeConfig itself, name the flags (they named only the fields)
    (["--max-request-tokens", "20000"], "max_queue_tokens (--max-queue-tokens, 16384) must be at least "
                                        "max_request_tokens (--max-request-tokens, 20000)"),
    (["--max-sentence-tokens", "4", "--window-context", "2"], "max_sentence_tokens (--max-sentence-tokens) (4) must "
                                                              "exceed 2 x window_context (--window-context) (2)"),
])
def test_flags_that_would_do_nothing_or_contradict_each_other_are_refused_before_serving(flags, expected, capsys,
                                                                                         monkeypatch):
    """Each was accepted and did nothing: no window is cut where long sentences are refused, a sentence over the
    request limit is refused before any window, uvicorn's access lines are at the info level."""
    from elmo.serve import commands

    def no_serving(*args, **kwargs):
        raise AssertionError("served with a flag that does nothing")

    monkeypatch.setattr(commands, "_run", no_serving)
    assert commands.main(["--model", str(FIXTURE_MODEL), *flags]) == 2
    assert expected in capsys.readouterr().err


def test_a_port_in_use_is_refused_before_any_model_loads(capsys, monkeypatch):
    """uvicorn found it after every model had loaded and warmed up, and exited 3 with its own log line."""
    import socket

    from elmo.serve import commands

    def no_serving(*args, **kwargs):
        raise AssertionError("went on to load the models")

    monkeypatch.setattr(commands, "_run", no_serving)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert commands.main(["--model", str(FIXTURE_MODEL), "--port", str(port)]) == 2
    assert f"--host 127.0.0.1 --port {port}: cannot listen there (Address already in use)" in capsys.readouterr().err
