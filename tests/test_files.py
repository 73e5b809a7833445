"""Files written beside their final name and renamed: they end with the permissions a plain ``open`` or ``mkdir``
gives under the process's umask, not the owner-only ones of the temporary files they began as; a directory published
onto a symbolic link or a file is refused, moving nothing; a directory published onto an old one leaves one of
the two at its name, whatever fails or is killed, and deletes the old one under a name no caller resumes from."""

import ctypes
import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from elmo import files
from elmo.files import atomic_path, new_partial_directory, publish_directory, write_bytes_atomic


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
