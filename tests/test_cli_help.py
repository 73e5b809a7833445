"""The command line's help: every option of every subcommand described, defaults shown, a version."""

import argparse
import subprocess
import sys
import textwrap
from importlib.metadata import version

import pytest

from elmo.cli import build_parser
from elmo.extras import EXTRAS


def _parsers(parser: argparse.ArgumentParser, path: str = "elmo"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_argument_of_every_subcommand_has_help_text():
    missing = [f"{path} {action.option_strings or action.dest}" for path, parser in _parsers(build_parser())
               for action in parser._actions
               if not action.help and not isinstance(action, argparse._SubParsersAction)]
    assert missing == []


def test_help_shows_defaults_once():
    parsers = dict(_parsers(build_parser()))
    embed_help = parsers["elmo embed"].format_help()
    assert "(default: 32)" in embed_help.replace("\n", " ").replace("  ", " ")  # --batch-size
    train_help = " ".join(parsers["elmo train"].format_help().split())
    assert "(default: 500)" in train_help and "(default: adagrad)" in train_help
    assert "dropout (default: 0)" in train_help  # --seed: a default of 0 is shown, though 0 == False
    serve_help = " ".join(parsers["elmo serve"].format_help().split())
    assert "(default: )" not in serve_help  # --index: an empty list is no default to show
    for path, parser in parsers.items():
        for line in parser.format_help().splitlines():
            assert line.count("default") <= 1, (path, line)


def test_version_prints_the_installed_version():
    result = subprocess.run([sys.executable, "-m", "elmo", "--version"], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == f"elmo {version('elmo-bilm')}"


@pytest.mark.parametrize("argv", [["--max-steps", "0"], ["--dropout", "1"]])
def test_train_numbers_are_still_checked(argv):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["train", *argv])
    assert exit_info.value.code == 2


def test_help_and_version_import_neither_torch_nor_any_extra():
    """``elmo --help``, ``--version`` and every ``elmo COMMAND --help`` answer from the parsers alone: each handler
    imports the library when it runs, so none of this loads PyTorch (seconds) or needs an extra."""
    code = textwrap.dedent("""
        import contextlib, io, sys
        from elmo.cli import main

        for argv in (["--help"], ["--version"], *ARGVS):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
                main(argv)
        print(sorted(name for name in ("torch", *HEAVY) if name in sys.modules))
    """)
    argvs = [[*path.split()[1:], "--help"] for path, _ in _parsers(build_parser()) if path != "elmo"]
    assert ["task", "train", "--help"] in argvs and ["serve", "--help"] in argvs
    heavy = sorted({module for modules in EXTRAS.values() for module in modules})
    code = code.replace("ARGVS", repr(argvs)).replace("HEAVY", repr(heavy))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"
