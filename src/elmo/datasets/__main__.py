"""``python -m elmo.datasets prepare en --out data/en``: a model's corpus files (``en-large``/``zh-large``: the
larger corpora, see docs/data.md); ``fetch``: archives only."""

import argparse
import sys
from pathlib import Path

from elmo.command_line import positive_int
from elmo.datasets.archives import ArchiveError, cache_dir, fetch
from elmo.datasets.prepare import CORPORA, SPLITS, prepare
from elmo.datasets.sources import SOURCES
from elmo.files import check_output_directory
from elmo.stop_signals import exit_status, interruptible


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elmo.datasets")
    parser.add_argument("--cache", type=Path, default=None, help=f"archive cache (default: {cache_dir()})")
    commands = parser.add_subparsers(dest="command", required=True)
    prepare_parser = commands.add_parser("prepare", help="write train.txt, valid.txt, test.txt (a large corpus: also "
                                                          "test-new.txt), SOURCES.md, sources.json")
    prepare_parser.add_argument("model", choices=sorted(CORPORA), help="which corpus to build (docs/data.md)")
    prepare_parser.add_argument("--out", type=Path, required=True,
                                help="folder for the split files and their tables (made if missing; a build "
                                     "replaces them only once it is whole; one build at a time)")
    prepare_parser.add_argument("--tokenizer", help="Chinese corpora (zh, zh-large, zh-law): jieba (default) or "
                                                    "chars; English ones: english (Moses, the only choice)")
    prepare_parser.add_argument("--limit", type=positive_int,
                                help="only the first N passages of each source (smoke runs)")
    prepare_parser.add_argument("--with", dest="extra", default="", metavar="SOURCE[,SOURCE]",
                                help="en-large/zh-large: optional sources to add (docs/data.md lists them)")
    fetch_parser = commands.add_parser("fetch", help="download and verify archives, for later offline use")
    fetch_parser.add_argument("sources", nargs="*", help=f"default: all ({', '.join(sorted(SOURCES))})")
    args = parser.parse_args(argv)
    try:
        # SIGTERM too unwinds the work: a build removes its partial files, a fetch its partial download
        with interruptible():
            if args.command == "fetch":
                unknown = sorted(set(args.sources) - set(SOURCES))
                if unknown:
                    raise ValueError(f"unknown sources {', '.join(unknown)}; expected some of "
                                     f"{', '.join(sorted(SOURCES))}")
                return _fetch_all(args.sources or sorted(SOURCES), args.cache)
            check_output_directory(args.out, "--out")  # before any archive is fetched or read
            report = prepare(args.model, args.out, args.cache, args.tokenizer, args.limit,
                             [name for name in args.extra.split(",") if name])
    except KeyboardInterrupt as interrupt:
        print(f"python -m elmo.datasets {args.command}: interrupted", file=sys.stderr)
        return exit_status(interrupt)
    except (ArchiveError, ValueError, FileNotFoundError) as error:
        print(f"python -m elmo.datasets {args.command}: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the last resort for a file that could not be read or written: one line all the same
        print(f"python -m elmo.datasets {args.command}: error: {error}", file=sys.stderr)
        return 1
    splits = report.get("splits", SPLITS)
    for source in report["sources"]:
        counts = ", ".join(f"{split} {source['splits'][split]['tokens']:,}" for split in splits)
        duplicates = (f", {source['dropped_as_duplicate']} as duplicates" if "dropped_as_duplicate" in source else "")
        print(f"{source['name']}: tokens {counts}; {source['dropped_as_task_text']} sentences dropped as task "
              f"text{duplicates}")
    totals = ", ".join(f"{split} {report['totals'][split]['tokens']:,}" for split in splits)
    print(f"total tokens: {totals} -> {args.out}")
    return 0


def _fetch_all(names: list[str], cache: Path | None) -> int:
    """Fetch every named source's archive, going on past one that fails (a Debian version that the mirror no
    longer lists only hides the optional source that needs it); exit status 2 if any failed, naming each."""
    failed = []
    for name in names:
        try:
            print(f"{name}: {fetch(SOURCES[name].archive, cache)}")
        except ArchiveError as error:
            failed.append(name)
            print(f"{name}: error: {error}", file=sys.stderr)
    if failed:
        print(f"python -m elmo.datasets fetch: error: {len(failed)} of {len(names)} sources could not be fetched: "
              f"{', '.join(failed)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
