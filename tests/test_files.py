"""Files written beside their final name and renamed: they end with the permissions a plain ``open`` or ``mkdir``
gives under the process's umask, not the owner-only ones of the temporary files they began as."""

import os
import stat
from pathlib import Path

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
