"""Which lines one worker embeds, and the directory of parts that N workers fill.

Shard ``I/N`` holds the lines whose 0-based number modulo N is I: lines are dealt out in turn, so the shards
are the same size to one line whatever the input, and each keeps the global line numbers. The union of
shards ``0/N`` .. ``N-1/N`` is the whole input, each line once.

A worker learns its shard from ``--shard`` or from its launcher: torchrun sets ``RANK`` and ``WORLD_SIZE``,
a Slurm job array ``SLURM_ARRAY_TASK_ID`` and ``SLURM_ARRAY_TASK_COUNT`` (counted from
``SLURM_ARRAY_TASK_MIN`` in steps of ``SLURM_ARRAY_TASK_STEP``). Workers do not talk to each other: each
writes its part and then a record of it, both atomically, and whichever finds every part recorded writes the
manifest, so the manifest exists only once every part is whole. The records and the manifest are named with a
leading ``_``, which Parquet readers (pyarrow, Ray, Spark) skip, as they skip Ray's ``_settings.json``: a
directory of Parquet parts reads as one dataset.
"""

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from elmo.embed_job.settings import check_same
from elmo.files import write_text_atomic

MANIFEST = "_manifest.json"
_PART = re.compile(r"part-\d{5,}-of-(?P<count>\d{5,})\.(?P<extension>\w+)(\.partial)?")  # a part, or one in progress
_RECORD = re.compile(r"_part-\d{5,}-of-(?P<count>\d{5,})\.json")
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.\w+\.partial")  # elmo.files' .NAME.RANDOM.partial, renamed onto NAME
_EARLIER = re.compile(r"manifest\.json|part-\d{5,}-of-\d{5,}\.json")  # the names before the leading _
_NAMES_SHOWN = 3


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"shard {self}: expected I/N with 0 <= I < N")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> "Shard":
        """``"I/N"`` -> Shard; ValueError naming what was given."""
        index, slash, count = text.partition("/")
        if not (slash and index.isascii() and index.isdigit() and count.isascii() and count.isdigit()):
            raise ValueError(f"shard {text!r}: expected I/N, two whole numbers with 0 <= I < N (e.g. 0/4)")
        return cls(int(index), int(count))

    def holds(self, line: int) -> bool:
        return line % self.count == self.index

    def size(self, total: int) -> int:
        """How many of ``total`` lines this shard holds."""
        return len(range(self.index, total, self.count))


WHOLE = Shard(0, 1)


def shard_from_environment(environ: Mapping[str, str] = os.environ) -> Shard | None:
    """The shard torchrun (``RANK``/``WORLD_SIZE``) or a Slurm job array gives this process; None outside
    both. ValueError when the variables are malformed."""
    for index_name, count_name, first_name, step_name in (
            ("RANK", "WORLD_SIZE", None, None),
            ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_STEP")):
        if index_name in environ and count_name in environ:
            values = {name: environ.get(name, "1" if name == step_name else "0")
                      for name in (index_name, count_name, first_name, step_name) if name}
            bad = [f"{name}={value!r}" for name, value in values.items() if not value.isdigit()]
            if bad:
                raise ValueError(f"{', '.join(bad)}: expected a whole number (set by the launcher)")
            first = int(values[first_name]) if first_name else 0
            step = int(values[step_name]) if step_name else 1
            offset = int(values[index_name]) - first
            try:
                if step < 1 or offset % step:
                    raise ValueError
                return Shard(offset // step, int(values[count_name]))
            except ValueError:
                raise ValueError(f"{index_name}={values[index_name]} and {count_name}={values[count_name]} "
                                 f"(first {first}, step {step}) do not make a shard I/N with 0 <= I < N") from None
    return None


@dataclass(frozen=True)
class PartsDirectory:
    """``directory/part-IIIII-of-NNNNN.EXT`` per shard, each with ``_part-IIIII-of-NNNNN.json`` (its settings
    and line count, written once the part is whole), and ``_manifest.json`` once all N are."""

    directory: Path
    extension: str

    def part(self, shard: Shard) -> Path:
        return self.directory / f"{self._stem(shard)}.{self.extension}"

    def record(self, shard: Shard) -> Path:
        return self.directory / f"_{self._stem(shard)}.json"

    @staticmethod
    def _stem(shard: Shard) -> str:
        return f"part-{shard.index:05d}-of-{shard.count:05d}"

    def check_holds_only_parts(self, count: int) -> None:
        """ValueError, naming the files, unless the directory (if there is one) holds only what a run in ``count``
        shards of this format writes: parts, parts in progress, their records, the manifest. Anything else would
        be mixed with the parts: a Parquet reader reads every file of a directory, and another number of shards
        deals the lines out otherwise, so its parts would repeat lines. Hidden files no run writes (``.DS_Store``,
        NFS's ``.nfsXXXX``) are let be, as Parquet readers skip them; ``elmo.files``' temporary names are checked
        by the name they are renamed to."""
        if not self.directory.is_dir():
            return
        names = sorted(entry.name for entry in self.directory.iterdir() if not _foreign_hidden(entry.name))
        earlier = [name for name in names if _EARLIER.fullmatch(name)]
        if earlier:
            raise ValueError(f"{self.directory} holds the records of an earlier version of elmo embed ({earlier[0]}), "
                             f"named without the leading _ that Parquet readers skip: to keep its parts, rename "
                             f"each part-*.json to _part-*.json and manifest.json to _manifest.json; else remove "
                             f"{self.directory} or write to another directory")
        counts = {name: self._shard_count(_renamed_to(name)) for name in names if _renamed_to(name) != MANIFEST}
        foreign = [name for name, shards in counts.items() if shards is None]
        if foreign:
            more = f" and {len(foreign) - _NAMES_SHOWN} more" if len(foreign) > _NAMES_SHOWN else ""
            raise ValueError(f"{self.directory} holds files that are not parts of a {self.extension} run of elmo embed "
                             f"({', '.join(foreign[:_NAMES_SHOWN])}{more}), which its parts would be mixed with: "
                             "remove them or write to another directory")
        other = next(((name, shards) for name, shards in counts.items() if shards != count), None)
        if other is not None:
            other_name, shards = other
            raise ValueError(f"{self.directory} holds parts of a run in {shards} shards ({other_name}; this run has "
                             f"{count}): to redo one shard of that run, give --shard I/{shards} (a Slurm array task "
                             f"submitted again alone, as by sbatch --array=5, counts itself shard 0/1); to start "
                             f"over, remove {self.directory} or write to another directory")

    def _shard_count(self, name: str) -> int | None:
        """N for a part of a run in N shards of this format, or its record; None for any other name."""
        if (part := _PART.fullmatch(name)) and part["extension"] == self.extension:
            return int(part["count"])
        if record := _RECORD.fullmatch(name):
            return int(record["count"])
        return None

    def finished(self, shard: Shard, settings: dict) -> bool:
        """Whether this shard's part is whole (and so made with ``settings``). ValueError, naming what differs,
        when this part or another recorded part of the N was made with other settings (another input, other
        options or another model), or when the directory holds anything but parts of this run
        (``check_holds_only_parts``, again, as other processes may have written since the run began): parts of
        two runs never make one manifest."""
        self.check_holds_only_parts(shard.count)
        for other in (Shard(index, shard.count) for index in range(shard.count)):
            record = self._read(self.record(other))
            if record is not None:
                self._check_same_run(other, record, settings)
        return self._read(self.record(shard)) is not None and self.part(shard).is_file()

    def _check_same_run(self, shard: Shard, record: dict, settings: dict) -> None:
        """ValueError, naming what differs, when a recorded part was made with other settings than ``settings``
        (another input, other options or another model) but for its shard: parts of two runs never make one."""
        check_same(record["settings"], settings, self.part(shard),
                   f"remove {self.directory} or write to another directory", ignoring=("shard",))

    def reopen(self, shard: Shard) -> None:
        """This shard's part is to be made (again): its record and the manifest go first, so that the directory
        never looks whole while the part is missing or being rewritten (a part removed by hand, or one that
        recorded other settings)."""
        (self.directory / MANIFEST).unlink(missing_ok=True)
        self.record(shard).unlink(missing_ok=True)

    def finish(self, shard: Shard, settings: dict, lines: int) -> bool:
        """Record this shard's whole part; then write the manifest if every part is recorded with the same
        settings but for the shard. Returns whether the manifest is there."""
        write_text_atomic(self.record(shard), json.dumps({"settings": settings, "lines": lines}, indent=1) + "\n")
        return self.write_manifest(shard.count, settings)

    def write_manifest(self, count: int, settings: dict) -> bool:
        common = {key: value for key, value in settings.items() if key != "shard"}
        options = {key: value for key, value in common.items() if key not in ("input", "sha256", "format")}
        parts = []
        for index in range(count):
            shard = Shard(index, count)
            record = self._read(self.record(shard))
            if record is None or not self.part(shard).is_file():
                return False
            self._check_same_run(shard, record, settings)  # a part recorded since this run began, too
            parts.append({"file": self.part(shard).name, "shard": str(shard), "lines": record["lines"]})
        manifest = {"input": common["input"], "sha256": common["sha256"], "lines": sum(p["lines"] for p in parts),
                    "format": common["format"], "options": options, "parts": parts}
        write_text_atomic(self.directory / MANIFEST, json.dumps(manifest, indent=1) + "\n")
        return True

    @staticmethod
    def _read(path: Path) -> dict | None:
        """A part's record, or None when there is none or it is unreadable (the part is then made again)."""
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or not isinstance(record.get("settings"), dict):
            return None
        return record


def _foreign_hidden(name: str) -> bool:
    """Whether ``name`` is a hidden file that no run in parts writes (not an ``elmo.files`` temporary name)."""
    return name.startswith(".") and _TEMPORARY.fullmatch(name) is None


def _renamed_to(name: str) -> str:
    """The name a temporary file of ``elmo.files`` (``.NAME.RANDOM.partial``) is renamed to; else ``name``."""
    temporary = _TEMPORARY.fullmatch(name)
    return temporary["name"] if temporary else name
