"""Files on disk: writes that leave either the old file or the new one, never half of one (a run may be killed
anywhere), the sha256 that pins or checks a file, and the one strict UTF-8 reader of text files whose error names
the file, byte and line at fault."""

import codecs
import ctypes
import errno
import glob
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from elmo.tokenizers import BYTE_ORDER_MARK

if TYPE_CHECKING:
    from hashlib import _Hash


def _process_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


# What a file or directory made here may grant, as ``open`` and ``mkdir`` would: ``mkstemp`` and ``mkdtemp``
# make them for the owner alone, and a renamed partial keeps that (read once: reading it sets it for a moment).
_UMASK = _process_umask()
FILE_MODE, DIRECTORY_MODE = 0o666 & ~_UMASK, 0o777 & ~_UMASK


@contextmanager
def atomic_path(path: Path, durable: bool = True) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer that wants a file name; renamed onto ``path`` only if
    the block finishes, once on the disk (``durable``; without it a power loss may leave the file short)."""
    temporary = new_partial_file(path)
    try:
        yield temporary
        if durable:
            publish_file(temporary, path)
        else:
            os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def fsync_file(path: Path) -> None:
    """Wait until ``path``'s data is on the disk, so that a rename after it never names a file that a power
    loss would leave short."""
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def publish_file(partial: Path, final: Path) -> None:
    """Rename a written file onto ``final`` once its data is on the disk."""
    fsync_file(partial)
    os.replace(partial, final)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        os.fchmod(descriptor, FILE_MODE)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(name, path)
    finally:
        Path(name).unlink(missing_ok=True)


def new_partial_file(final: Path) -> Path:
    """An empty file beside ``final`` (``.NAME.*.partial``) to fill and then rename onto it."""
    final.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent)
    os.fchmod(descriptor, FILE_MODE)
    os.close(descriptor)
    return Path(name)


def partial_files_of(final: Path) -> list[Path]:
    """The ``new_partial_file`` files of ``final`` that stand beside it now: a killed run's leftovers."""
    return list(final.parent.glob(f".{glob.escape(final.name)}.*.partial"))


def remove_partial_files_of(final: Path) -> None:
    """The ``new_partial_file`` files of ``final`` that a killed run left beside it (not directories:
    ``remove_partial_directories_of``)."""
    for leftover in partial_files_of(final):
        if not leftover.is_dir():
            leftover.unlink(missing_ok=True)


def new_partial_directory(final: Path) -> Path:
    """An empty directory beside ``final`` to fill and then ``publish_directory`` onto it."""
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent))
    partial.chmod(DIRECTORY_MODE)
    return partial


def publish_directory(partial: Path, final: Path) -> None:
    """Rename a filled directory onto ``final``. A directory already at ``final`` is swapped with it in one step
    where the system can (``_exchange``), elsewhere renamed aside first and put back if the second rename fails:
    a run killed at any point leaves the old directory at ``final`` or the new one (killed between the two
    renames: none, and the old one aside). The new directory first moves from ``partial`` to a fresh
    ``.NAME.*.partial`` name, and the old one is deleted under such a name, never under ``partial``'s: a caller that
    builds into a fixed partial name and resumes from it (search's ``OUT.partial``) would take an old directory
    there, after a kill, for its finished build and publish it again (a kill in that first move costs the caller
    its finished build, never its result). A kill during the delete leaves the old one for
    ``remove_partial_directories_of``. A publish that fails leaves the old directory at ``final`` and the new one
    at ``partial``.

    A symbolic link at ``final`` is refused (``check_not_a_link``), and so is a file (``NotADirectoryError``: the
    swap would set it aside and delete it), before anything moves."""
    check_not_a_link(final)
    if final.exists() and not final.is_dir():
        raise NotADirectoryError(f"{final} is a file, not a directory that {partial} may replace; remove it or "
                                 "publish elsewhere")
    for child in partial.iterdir():
        fsync_file(child)
    if not final.exists():
        os.replace(partial, final)
        return
    staged = new_partial_directory(final)  # the new directory leaves partial's name before the old can take it
    _replace_or_remove(partial, staged)
    try:
        if _exchange(staged, final):
            replaced = staged  # now the old directory
        else:
            replaced = new_partial_directory(final)
            _replace_or_remove(final, replaced)
            try:
                os.replace(staged, final)
            except BaseException:
                os.replace(replaced, final)
                raise
    except BaseException:
        os.replace(staged, partial)  # the new directory back where the caller left it
        raise
    shutil.rmtree(replaced)


def _replace_or_remove(source: Path, empty_directory: Path) -> None:
    """Rename ``source`` onto ``empty_directory`` (made for it), which is removed if the rename fails."""
    try:
        os.replace(source, empty_directory)
    except BaseException:
        empty_directory.rmdir()
        raise


def remove_directory(directory: Path, beside: Path) -> None:
    """Deletes ``directory`` so that no kill leaves it half deleted under its own name (where a resumed run would
    take what is left for its work): it moves to a fresh ``.BESIDE.*.partial`` name first, for
    ``remove_partial_directories_of`` to clear if the delete is killed."""
    aside = new_partial_directory(beside)
    _replace_or_remove(directory, aside)
    shutil.rmtree(aside)


def remove_partial_directories_of(final: Path) -> None:
    """The ``new_partial_directory`` directories of ``final`` that a killed run left beside it (a directory being
    filled, or an old one ``publish_directory`` was deleting)."""
    for leftover in final.parent.glob(f".{glob.escape(final.name)}.*.partial"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)


# renameat2(2)'s flag that swaps two existing paths atomically (Linux 3.15, glibc 2.28); AT_FDCWD: paths as given.
_RENAME_EXCHANGE, _AT_FDCWD = 2, -100
_renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None) if sys.platform == "linux" else None


def _exchange(first: Path, second: Path) -> bool:
    """Swap two existing paths in one atomic step; False, moving nothing, where the C library or the file system
    cannot (no renameat2, or a file system without RENAME_EXCHANGE), so the caller takes the two-rename way."""
    if _renameat2 is None:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(error, os.strerror(error), str(first), None, str(second))


def check_not_a_link(final: Path) -> None:
    """ValueError when ``final``, a directory to be replaced whole, is a symbolic link. Not followed on purpose:
    replacing the directory it names would change a model under another name (``latest`` -> ``v1`` would
    overwrite ``v1``), and replacing the link itself would turn it into a directory; the caller says which."""
    if final.is_symlink():
        raise ValueError(f"{final} is a symbolic link (to {os.readlink(final)}), which would be replaced by a "
                         f"directory: give the directory it names ({final.resolve()}) to replace that, or a new "
                         "path, and point the link there after")


def remove_stale_partials(directory: Path) -> None:
    """Temporary directories and files left by a killed run."""
    for leftover in directory.glob(".*.partial"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


def sha256_of(path: Path) -> str:
    """Hex sha256 of ``path``'s bytes, read in 1 MiB blocks (archives and corpora run to hundreds of MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_not_an_input(output: str | Path, inputs: Iterable[str | Path], option: str = "the output") -> None:
    """ValueError, before any work, when ``output`` is one of ``inputs`` under any name (a link, a relative path,
    ``./``): writing it would replace the text the command reads, and the command would end without an error."""
    for input_path in inputs:
        if same_path(Path(output), Path(input_path)):
            same = "" if str(output) == str(input_path) else f" (the same file as the input {input_path})"
            raise ValueError(f"{option} {output} is an input of this command{same}: writing it would destroy the "
                             "input; give another output")


def same_path(first: Path, second: Path) -> bool:
    """Whether two paths name the same file or directory under any name (a link, ``..``); by resolved name where
    one does not exist (yet)."""
    try:
        return os.path.samefile(first, second)
    except OSError:
        return first.resolve() == second.resolve()


def entries_besides(directory: Path, kept: Collection[str]) -> list[str]:
    """The names in ``directory`` (none where it is not one) other than ``kept``, sorted: what replacing the
    directory whole would delete."""
    return sorted(path.name for path in directory.iterdir() if path.name not in kept) if directory.is_dir() else []


def check_output_file(path: str | Path, option: str = "the output") -> None:
    """ValueError, before any work, when ``path``, a file to write (its missing folders made), is a directory or
    lies under a file: found otherwise only when the written file is renamed onto it, after the work."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{option} {path} is a directory; expected the name of a file to write")
    _check_folders(path, option)


def check_output_directory(path: str | Path, option: str = "the output") -> None:
    """ValueError, before any work, when ``path``, a directory to write (made if missing), is a file or lies
    under one."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {path} is a file; expected a directory (a new path, or one to write in)")
    if path.is_dir():
        _check_takes_a_file(path, path, option)
    else:
        _check_folders(path, option)


def _check_folders(path: Path, option: str) -> None:
    """The nearest of ``path``'s folders that exists must be a directory (the missing ones are made in it) that
    takes a new file."""
    for folder in path.parents:
        if folder.exists():
            if not folder.is_dir():
                raise ValueError(f"{option} {path}: {folder} is a file, not a directory to write in")
            _check_takes_a_file(folder, path, option)
            return


def _check_takes_a_file(folder: Path, path: Path, option: str) -> None:
    """ValueError unless a file can be made in ``folder``: tried with a temporary file, as permission bits do not
    tell for root, a read-only mount or a system folder such as /proc (found otherwise when the output is
    written, after the work)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        reason = error.strerror or error
        raise ValueError(f"{option} {path}: cannot create a file in {folder} ({reason})") from None


# Bytes ``utf8_blocks`` reads at a time: large enough that decoding, not Python, sets its pace, small enough that a
# file of gigabytes needs no memory. Read at each call, so a test can make characters straddle blocks.
TEXT_BLOCK = 1 << 20
_ENDS_INSIDE = "the file ends inside this character"  # NotUtf8Error's reason for a file cut short


class NotUtf8Error(ValueError):
    r"""A file that is not UTF-8 text, at its first bad byte: one that no UTF-8 character holds there, the start of a
    character the file ends inside, or (where the reader refuses it) a NUL byte, which binary and UTF-16 files hold
    and text does not. ``offset``: the byte's position in the file, from 0 (a byte-order mark counts);
    ``line``: its line, from 1, lines ending at ``\n``, ``\r\n`` or a lone ``\r`` (as ``utf8_universal_lines`` reads
    them); ``byte``: its value."""

    def __init__(self, name: str, offset: int, line: int, byte: int, reason: str) -> None:
        where = f"byte {offset:,} (line {line:,}, counting from 1)"
        if byte == 0:  # valid UTF-8, so converting would not help: the file is not text
            message = f"{name} holds a NUL byte at {where}, {reason}; expected UTF-8 text"
        elif reason == _ENDS_INSIDE:  # cut short, not in another encoding: converting would not help either
            message = (f"{name} ends inside a character: {where} is 0x{byte:02x}, the start of a UTF-8 character "
                       "whose other bytes are missing (was the file cut short?)")
        else:
            message = (f"{name} is not UTF-8 text: {where} is 0x{byte:02x} ({reason}); convert it to UTF-8 first "
                       "(e.g. iconv -f CHARSET -t utf-8)")
        super().__init__(message)
        self.name, self.offset, self.line, self.byte, self.reason = name, offset, line, byte, reason

    def __reduce__(self) -> tuple[type["NotUtf8Error"], tuple[str, int, int, int, str]]:
        return type(self), (self.name, self.offset, self.line, self.byte, self.reason)  # a worker's error pickles


def utf8_blocks(path: Path, name: str | None = None, *, refuse_nul: bool = False,
                digest: "_Hash | None" = None) -> Iterator[str]:
    """``path``'s text, strictly decoded a block of at most ``TEXT_BLOCK`` bytes at a time (a character the block
    ends inside is carried into the next), so a file of any size is read in bounded memory. NotUtf8Error naming the
    file (as ``name``, if given) at its first byte that is not UTF-8, at the start of a character it ends inside,
    and, with ``refuse_nul``, at its first NUL byte. A byte-order mark at the file's start is not text: left out
    (offsets still count it). Each block's bytes go to ``digest`` as they are read."""
    name = name or str(path)
    carried = b""  # the start of a character the last block ended inside (at most 3 bytes)
    start = lines = 0  # the file offset of ``carried``'s first byte, and how many line ends come before it
    after_cr = False  # whether the byte before ``carried`` is a \r (a \n first in the next block ends no line)
    with path.open("rb") as handle:
        while block := handle.read(TEXT_BLOCK):
            if digest is not None:
                digest.update(block)
            data = carried + block
            nul = data.find(b"\0") if refuse_nul else -1
            try:  # up to the NUL, if any: a bad byte before it comes first
                text, used = codecs.utf_8_decode(data if nul < 0 else data[:nul + 1], "strict", nul >= 0)
            except UnicodeDecodeError as error:
                raise _not_utf8(name, data, error.start, start, lines, after_cr, error.reason) from None
            if nul >= 0:
                raise _not_utf8(name, data, nul, start, lines, after_cr,
                                "as binary and UTF-16 files hold and text does not")
            if start == 0:
                text = text.removeprefix(BYTE_ORDER_MARK)
            lines += _line_ends(data, used, after_cr)
            after_cr = data[used - 1 : used] == b"\r" if used else after_cr
            start += used
            carried = data[used:]
            if text:
                yield text
    if carried:
        raise _not_utf8(name, carried, 0, start, lines, after_cr, _ENDS_INSIDE)


def _line_ends(data: bytes, stop: int, after_cr: bool) -> int:
    """The line ends in ``data[:stop]`` as every reader here counts them (``utf8_universal_lines``): ``\n``,
    ``\r\n`` (one) and a lone ``\r``; ``after_cr``: the byte before ``data`` is a ``\r``, whose line a ``\n``
    first in ``data`` only finishes."""
    ends = data.count(b"\n", 0, stop) + data.count(b"\r", 0, stop) - data.count(b"\r\n", 0, stop)
    return ends - int(after_cr and stop > 0 and data[:1] == b"\n")


def _not_utf8(name: str, data: bytes, index: int, start: int, lines: int, after_cr: bool,
              reason: str) -> NotUtf8Error:
    """The error at ``data[index]``, where ``data`` begins at file offset ``start`` after ``lines`` line ends
    (``after_cr``: just after a \r)."""
    return NotUtf8Error(name, start + index, lines + _line_ends(data, index, after_cr) + 1, data[index], reason)


def utf8_lines(path: Path, name: str | None = None, *, refuse_nul: bool = False,
               digest: "_Hash | None" = None) -> Iterator[str]:
    r"""``utf8_blocks`` cut at ``\n``: each line without its ``\n`` (a ``\r`` before it is left to the caller's
    rule), held whole however many blocks it spans. As when Python reads a file, text after the last ``\n`` is a
    line and nothing after it is none (``a\n`` is one line, ``a\nb`` two, an empty file none)."""
    head: list[str] = []  # the line the last block ended inside
    for text in utf8_blocks(path, name, refuse_nul=refuse_nul, digest=digest):
        *ended, tail = text.split("\n")
        if ended:
            head.append(ended[0])
            ended[0] = "".join(head)
            head = []
            yield from ended
        if tail:
            head.append(tail)
    if head:
        yield "".join(head)


def utf8_universal_lines(path: Path, name: str | None = None, *, refuse_nul: bool = False,
                         digest: "_Hash | None" = None) -> Iterator[str]:
    r"""``utf8_lines`` with the line ends Python's text mode reads: ``\r\n`` and a lone ``\r`` (classic Mac OS
    files) end a line too. A line without ``\r``, most lines, is passed on as it comes (no list made per line)."""
    for text in utf8_lines(path, name, refuse_nul=refuse_nul, digest=digest):
        if "\r" in text:
            yield from text.removesuffix("\r").split("\r")
        else:
            yield text
