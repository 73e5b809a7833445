"""Files written beside their final name and renamed: they end with the permissions a plain ``open`` or ``mkdir``
gives under the process's umask, not the owner-only ones of the temporary files they began as; a directory published
onto a symbolic link is refused, moving nothing."""

import os
import stat
from pathlib import Path

import pytest

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


def test_a_failed_move_aside_leaves_the_old_directory_and_no_empty_one_beside_it(tmp_path: Path, monkeypatch):
    final = tmp_path / "model"
    final.mkdir()
    (final / "weights.hdf5").write_text("old")
    partial = _filled(final)

    def failing_replace(source, destination):
        raise OSError("the disk refused")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="the disk refused"):
        publish_directory(partial, final)
    monkeypatch.undo()
    assert (final / "weights.hdf5").read_text() == "old"
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(["model", partial.name])
