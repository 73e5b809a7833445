"""Files written beside their final name and renamed: they end with the permissions a plain ``open`` or ``mkdir``
gives under the process's umask, not the owner-only ones of the temporary files they began as; a directory published
onto a symbolic link or a file is refused, moving nothing; a directory published onto an old one leaves one of
the two at its name, whatever fails or is killed, and deletes the old one under a name no caller resumes from.
The strict UTF-8 reader names the first bad byte's offset and line however blocks cut the file, and decodes every
character a block boundary splits."""

import ctypes
import errno
import hashlib
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from elmo import files
from elmo.files import (
    NotUtf8Error,
    atomic_path,
    new_partial_directory,
    publish_directory,
    utf8_blocks,
    utf8_lines,
    utf8_universal_lines,
    write_bytes_atomic,
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_published_files_and_directories_are_as_open_and_mkdir_would_make_them(tmp_path: Path):
    plain_file, plain_directory = tmp_path / "plain.txt", tmp_path / "plain"
    plain_file.write_text("x")
    plain_directory.mkdir()
    written = tmp_path / "written.json"
    write_bytes_atomic(written, b"{}")
    with atomic_path(tmp_path / "part.parquet") as partial:
        partial.write_bytes(b"x")
    published = tmp_path / "index"
    filling = new_partial_directory(published)
    (filling / "meta.json").write_text("{}")
    publish_directory(filling, published)
    assert _mode(written) == _mode(tmp_path / "part.parquet") == _mode(plain_file)
    assert _mode(published) == _mode(plain_directory)
    assert _mode(plain_file) == 0o666 & ~_umask()  # the comparison is not between two owner-only files


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _filled(final: Path) -> Path:
    partial = new_partial_directory(final)
    (partial / "weights.hdf5").write_text("new")
    return partial


def test_publishing_onto_a_symbolic_link_is_refused_and_moves_nothing(tmp_path: Path):
    """It used to fail renaming the link onto an empty directory (IsADirectoryError) and leave that directory."""
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "weights.hdf5").write_text("old")
    (tmp_path / "latest").symlink_to("v1")
    partial = _filled(tmp_path / "latest")
    with pytest.raises(ValueError, match=r"latest is a symbolic link \(to v1\), which would be replaced by a "
                                         r"directory: give the directory it names \(.*v1\)"):
        publish_directory(partial, tmp_path / "latest")
    assert os.readlink(tmp_path / "latest") == "v1" and (tmp_path / "v1" / "weights.hdf5").read_text() == "old"
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(["latest", "v1", partial.name])


def _old_model(tmp_path: Path) -> Path:
    final = tmp_path / "model"
    final.mkdir()
    (final / "weights.hdf5").write_text("old")
    return final


@pytest.mark.parametrize("failing", ["off-partial", "aside", "into-place"])
def test_a_failed_rename_leaves_the_old_directory_at_final_and_the_new_one_at_partial(tmp_path: Path, monkeypatch,
                                                                                      failing: str):
    """Each rename of the two-rename way, failing: the new directory's move off ``partial``, the old one's move
    aside (which left an empty directory beside it), the new one's move into place (which left the old one under
    its partial name, with nothing at ``final``)."""
    final = _old_model(tmp_path)
    partial = _filled(final)
    monkeypatch.setattr(files, "_exchange", lambda first, second: False)  # the two-rename way
    fails = {"off-partial": lambda source, destination: Path(source) == partial,
             "aside": lambda source, destination: Path(source) == final,
             "into-place": lambda source, destination: Path(destination) == final}[failing]
    replace, failed = os.replace, []

    def failing_replace(source, destination):
        if not failed and fails(source, destination):  # once: putting the old directory back must work
            failed.append(source)
            raise OSError("the disk refused")
        replace(source, destination)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="the disk refused"):
        publish_directory(partial, final)
    monkeypatch.undo()
    assert (final / "weights.hdf5").read_text() == "old" and (partial / "weights.hdf5").read_text() == "new"
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(["model", partial.name])


def test_a_file_system_without_an_atomic_swap_still_gets_the_new_directory(tmp_path: Path, monkeypatch):
    final = _old_model(tmp_path)
    partial = _filled(final)

    def renameat2_refusing_the_flag(*args):
        ctypes.set_errno(errno.EINVAL)  # what a file system without RENAME_EXCHANGE answers
        return -1

    monkeypatch.setattr(files, "_renameat2", renameat2_refusing_the_flag)
    publish_directory(partial, final)
    assert (final / "weights.hdf5").read_text() == "new"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model"]


def test_publishing_onto_a_file_is_refused_and_moves_nothing(tmp_path: Path):
    """The swap used to put the directory at ``model`` and the user's file under the partial name, then fail
    deleting that file as a directory (NotADirectoryError), leaving it there."""
    (tmp_path / "model").write_text("the user's file")
    partial = _filled(tmp_path / "model")
    with pytest.raises(NotADirectoryError, match=r"model is a file, not a directory that .* may replace"):
        publish_directory(partial, tmp_path / "model")
    assert (tmp_path / "model").read_text() == "the user's file"
    assert (partial / "weights.hdf5").read_text() == "new"
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(["model", partial.name])


@pytest.mark.parametrize("swap", [True, False], ids=["swapped", "renamed-aside"])
def test_the_old_directory_is_deleted_under_a_fresh_partial_name_not_the_new_ones(tmp_path: Path, monkeypatch,
                                                                                   swap: bool):
    """Search builds into the fixed name ``OUT.partial`` and resumes from it; the swapped old directory used to be
    deleted there, so a kill during the delete left a half-deleted old index that ``--resume`` published."""
    final = _old_model(tmp_path)
    partial = tmp_path / "model.partial"  # a fixed partial name, as search's
    partial.mkdir()
    (partial / "weights.hdf5").write_text("new")
    if not swap:
        monkeypatch.setattr(files, "_exchange", lambda first, second: False)
    deleted = []

    def killed_deleting(path, *args, **kwargs):
        deleted.append(Path(path))
        raise KeyboardInterrupt

    monkeypatch.setattr(files.shutil, "rmtree", killed_deleting)
    with pytest.raises(KeyboardInterrupt):
        publish_directory(partial, final)
    monkeypatch.undo()
    assert (final / "weights.hdf5").read_text() == "new" and not partial.exists()
    [aside] = deleted
    assert aside.parent == tmp_path and aside.name.startswith(".model.") and aside.name.endswith(".partial")
    assert (aside / "weights.hdf5").read_text() == "old"
    files.remove_partial_directories_of(final)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model"]


# Publishes tmp/partial onto tmp/model and dies (os._exit, as SIGKILL would: no handler runs) right after the
# step-th call to one of the functions that move or delete a directory.
_KILLED_PUBLISH = """
import os, shutil, sys
from pathlib import Path
from elmo import files
root, step = Path(sys.argv[1]), int(sys.argv[2])
calls = 0
def dying_after(function):
    def wrapper(*args, **kwargs):
        global calls
        result = function(*args, **kwargs)
        calls += 1
        if calls == step:
            os._exit(9)
        return result
    return wrapper
os.replace, shutil.rmtree, files._exchange = map(dying_after, (os.replace, shutil.rmtree, files._exchange))
files.publish_directory(root / "partial", root / "model")
"""


@pytest.mark.skipif(files._renameat2 is None, reason="no renameat2: a kill between two renames leaves no directory")
@pytest.mark.parametrize("step", [1, 2, 3])
def test_a_publish_killed_after_any_step_leaves_the_old_or_the_new_directory(tmp_path: Path, step: int):
    """A kill after the old directory was renamed aside used to leave nothing at ``final``."""
    final = _old_model(tmp_path)
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "weights.hdf5").write_text("new")
    result = subprocess.run([sys.executable, "-c", _KILLED_PUBLISH, str(tmp_path), str(step)], timeout=60)
    assert result.returncode in (0, 9)
    assert (final / "weights.hdf5").read_text() in ("old", "new")


# --- the strict UTF-8 reader ------------------------------------------------------------------------------------

# Block sizes that cut every multi-byte character of the test data somewhere, and the default that cuts none.
BLOCKS = [1, 2, 3, 4, 5, 7, 1 << 20]


def _text_file(tmp_path: Path, data: bytes, monkeypatch: pytest.MonkeyPatch, block: int) -> Path:
    monkeypatch.setattr(files, "TEXT_BLOCK", block)
    path = tmp_path / "text.txt"
    path.write_bytes(data)
    return path


def _refusal(path: Path, refuse_nul: bool = False) -> NotUtf8Error:
    with pytest.raises(NotUtf8Error) as refused:
        list(utf8_blocks(path, refuse_nul=refuse_nul))
    return refused.value


@pytest.mark.parametrize("block", BLOCKS)
def test_a_bad_byte_is_named_by_its_offset_from_0_and_its_line_from_1(tmp_path: Path, monkeypatch, block: int):
    # "ab\n" is bytes 0-2 (line 1), "cd\n" 3-5 (line 2), "é" 6-7 and "x" 8 (line 3): the 0xff is byte 9, line 3
    path = _text_file(tmp_path, "ab\ncd\néx".encode() + b"\xffz\n", monkeypatch, block)
    error = _refusal(path)
    assert (error.offset, error.line, error.byte, error.reason) == (9, 3, 0xFF, "invalid start byte")
    assert str(error) == (f"{path} is not UTF-8 text: byte 9 (line 3, counting from 1) is 0xff (invalid start byte); "
                          "convert it to UTF-8 first (e.g. iconv -f CHARSET -t utf-8)")
    assert error.name == str(path) and isinstance(error, ValueError)


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_a_bad_bytes_line_is_the_line_the_readers_number_whatever_the_line_ends(tmp_path: Path, monkeypatch,
                                                                                  block: int, ending: str):
    """Lines ended by a lone \r (classic Mac OS), which every reader here reads as lines, were all 'line 1'."""
    text = ending.join(["one", "two", "thr"]).encode() + b"\xffee" + ending.encode()
    path = _text_file(tmp_path, text, monkeypatch, block)
    assert _refusal(path).line == 3
    assert _refusal(_text_file(tmp_path, text.replace(b"\xff", b"\0"), monkeypatch, block), refuse_nul=True).line == 3
    lines = list(utf8_universal_lines(_text_file(tmp_path, text.replace(b"\xff", b"x"), monkeypatch, block)))
    assert lines[2] == "thrxee"  # the readers' own third line


def test_offsets_past_a_thousand_are_grouped_and_the_given_name_is_used(tmp_path: Path, monkeypatch):
    path = _text_file(tmp_path, b"x\n" * 600 + b"\xff", monkeypatch, 7)  # 1,200 bytes, 600 line ends before it
    with pytest.raises(NotUtf8Error, match=r"^standard input is not UTF-8 text: byte 1,200 \(line 601, "):
        list(utf8_blocks(path, "standard input"))


@pytest.mark.parametrize("block", BLOCKS)
def test_characters_split_by_a_block_boundary_decode_whole(tmp_path: Path, monkeypatch, block: int):
    text = "ναί café 中文 🙂\nsecond 🙂🙂 line\n\nlast"  # 2-, 3- and 4-byte characters, every one cut by some block
    path = _text_file(tmp_path, text.encode(), monkeypatch, block)
    assert "".join(utf8_blocks(path)) == text
    assert list(utf8_lines(path)) == ["ναί café 中文 🙂", "second 🙂🙂 line", "", "last"]


@pytest.mark.parametrize("block", BLOCKS)
def test_a_character_cut_short_by_a_bad_byte_is_named_at_its_first_byte(tmp_path: Path, monkeypatch, block: int):
    # "ok\n" is bytes 0-2; 中 (e4 b8 ad) begins at byte 3 on line 2 and its third byte is an "A"
    path = _text_file(tmp_path, b"ok\n\xe4\xb8A\n", monkeypatch, block)
    error = _refusal(path)
    assert (error.offset, error.line, error.byte, error.reason) == (3, 2, 0xE4, "invalid continuation byte")


@pytest.mark.parametrize("block", BLOCKS)
def test_a_file_that_ends_inside_a_character_is_named_at_that_characters_first_byte(tmp_path: Path, monkeypatch,
                                                                                   block: int):
    # "one\n" is bytes 0-3, "two " 4-7: 文 (e6 96 87), two of its three bytes, begins at byte 8 on line 2
    path = _text_file(tmp_path, b"one\ntwo \xe6\x96", monkeypatch, block)
    error = _refusal(path)
    assert (error.offset, error.line, error.byte) == (8, 2, 0xE6)
    assert str(error) == (f"{path} ends inside a character: byte 8 (line 2, counting from 1) is 0xe6, the start of a "
                          "UTF-8 character whose other bytes are missing (was the file cut short?)")
    with pytest.raises(NotUtf8Error, match=r"byte 8 \(line 2, counting from 1\)"):
        list(utf8_lines(path))


@pytest.mark.parametrize("block", BLOCKS)
def test_a_nul_byte_is_refused_only_when_asked_and_a_bad_byte_before_it_comes_first(tmp_path: Path, monkeypatch,
                                                                                    block: int):
    path = _text_file(tmp_path, b"a\nbc\x00d\n", monkeypatch, block)  # the NUL is byte 4, on line 2
    assert list(utf8_lines(path)) == ["a", "bc\x00d"]
    error = _refusal(path, refuse_nul=True)
    assert (error.offset, error.line, error.byte) == (4, 2, 0)
    # no advice to convert: a NUL is UTF-8, the file is not text
    assert str(error) == (f"{path} holds a NUL byte at byte 4 (line 2, counting from 1), as binary and UTF-16 files "
                          "hold and text does not; expected UTF-8 text")
    path.write_bytes(b"a\n\xff\x00")  # 0xff (byte 2) before the NUL (byte 3), in one block or two
    assert (_refusal(path, refuse_nul=True).offset, _refusal(path, refuse_nul=True).reason) == (2, "invalid start byte")
    path.write_bytes(b"a\n\xe4\x00")  # a character cut short by the NUL: named at its first byte, as Python names it
    assert (_refusal(path, refuse_nul=True).offset, _refusal(path, refuse_nul=True).reason) == (
        2, "invalid continuation byte")
    path.write_bytes(b"a\n\x00\xff")  # the NUL (byte 2) before a 0xff (byte 3): the NUL is named
    assert (_refusal(path, refuse_nul=True).offset, _refusal(path, refuse_nul=True).byte) == (2, 0)


def test_an_empty_file_has_no_text_and_no_lines(tmp_path: Path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    assert list(utf8_blocks(path, refuse_nul=True)) == [] and list(utf8_lines(path)) == []


@pytest.mark.parametrize("block", BLOCKS)
def test_a_byte_order_mark_at_the_start_is_dropped_but_counted_and_one_later_is_text(tmp_path: Path, monkeypatch,
                                                                                     block: int):
    path = _text_file(tmp_path, b"\xef\xbb\xbfa\n\xef\xbb\xbfb", monkeypatch, block)
    assert list(utf8_lines(path)) == ["a", "\ufeffb"]  # the second mark is where files were joined: the caller's
    path.write_bytes(b"\xef\xbb\xbf")
    assert list(utf8_lines(path)) == []
    path.write_bytes(b"\xef\xbb\xbfok\n\xe9")  # the mark is bytes 0-2, "ok\n" 3-5: the 0xe9 is byte 6, line 2
    error = _refusal(path)
    assert (error.offset, error.line) == (6, 2)


@pytest.mark.parametrize("block", BLOCKS)
def test_lines_end_at_newline_only_and_a_last_line_needs_no_newline(tmp_path: Path, monkeypatch, block: int):
    path = _text_file(tmp_path, b"", monkeypatch, block)
    for data, lines in [(b"a\n", ["a"]), (b"a\nb", ["a", "b"]), (b"a\n\n", ["a", ""]), (b"\n", [""]),
                        (b"a\r\nb\rc\n", ["a\r", "b\rc"]), (b"x" * 20 + b"\ny", ["x" * 20, "y"])]:
        path.write_bytes(data)
        assert list(utf8_lines(path)) == lines, data


@pytest.mark.parametrize("block", BLOCKS)
def test_universal_lines_are_the_lines_python_reads_in_text_mode(tmp_path: Path, monkeypatch, block: int):
    path = _text_file(tmp_path, b"", monkeypatch, block)
    for data in [b"a\r\nb\rc\n", b"a\r", b"a\r\r\n", b"\r\r", b"a\rb", b"\xef\xbb\xbfx\ry\r\n\n",
                 "caf\u00e9\r\u4e2d\u6587\r\nz".encode(), b"a\n\rb\r\n\r\n"]:
        path.write_bytes(data)
        with path.open(encoding="utf-8-sig") as text:  # newline=None: \r\n and \r read as \n
            expected = [line.removesuffix("\n") for line in text]
        assert list(utf8_universal_lines(path)) == expected, data


@pytest.mark.parametrize("block", [3, 1 << 20])
def test_the_digest_sees_every_byte_the_mark_included(tmp_path: Path, monkeypatch, block: int):
    data = "\ufeffcafé 中文\nline two\n".encode()
    path = _text_file(tmp_path, data, monkeypatch, block)
    digest = hashlib.sha256()
    list(utf8_lines(path, digest=digest))
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()


def test_the_error_survives_pickling_with_its_facts():
    """A worker process's error reaches the parent whole."""
    error = pickle.loads(pickle.dumps(NotUtf8Error("a.txt", 9, 3, 0xFF, "invalid start byte")))
    assert (error.name, error.offset, error.line, error.byte, error.reason) == ("a.txt", 9, 3, 0xFF,
                                                                                "invalid start byte")
    assert str(error).startswith("a.txt is not UTF-8 text: byte 9 (line 3, counting from 1) is 0xff")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc here")
def test_an_output_where_no_file_can_be_made_is_refused_before_any_work_even_for_root(tmp_path):
    """Permission bits do not tell for root, so the check makes (and removes) a temporary file."""
    from elmo.files import check_output_directory, check_output_file

    with pytest.raises(ValueError, match=r"--out /proc/elmo/x.txt: cannot create a file in /proc \("):
        check_output_file("/proc/elmo/x.txt", "--out")
    with pytest.raises(ValueError, match=r"--out /proc: cannot create a file in /proc \("):
        check_output_directory("/proc", "--out")  # an existing directory: tried itself, not its parent
    check_output_directory(tmp_path, "--out")
    check_output_file(tmp_path / "new" / "x.txt", "--out")
    assert list(tmp_path.iterdir()) == []  # the trial file is gone, and no folder was made
