"""What the ``elmo`` subcommand modules share: argument types that refuse a bad number or device while the
command line is parsed (before a model loads or a file is touched), and help that shows defaults.

A type function raises ``argparse.ArgumentTypeError``, so argparse prints ``argument --batch-size: 0:
expected a whole number >= 1`` and exits with status 2.
"""

import argparse
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any


def whole_number(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: a decimal integer in ``[minimum, maximum]``."""
    expected = f"a whole number >= {minimum}" + (f" and <= {maximum}" if maximum is not None else "")

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r}: expected {expected}") from None
        if number < minimum or (maximum is not None and number > maximum):
            raise argparse.ArgumentTypeError(f"{value}: expected {expected}")
        return number

    parse.__name__ = expected
    return parse


def finite_number(minimum: float, above_minimum: bool = False, below: float | None = None) -> Callable[[str], float]:
    """An argparse type: a finite float ``>= minimum`` (``> minimum`` with ``above_minimum``), ``< below``."""
    expected = f"a finite number {'>' if above_minimum else '>='} {minimum:g}" + (
        f" and < {below:g}" if below is not None else "")

    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r}: expected {expected}") from None
        low_ok = number > minimum if above_minimum else number >= minimum
        if not math.isfinite(number) or not low_ok or (below is not None and number >= below):
            raise argparse.ArgumentTypeError(f"{value}: expected {expected}")
        return number

    parse.__name__ = expected
    return parse


positive_int = whole_number(1)
non_negative_int = whole_number(0)
positive_float = finite_number(0.0, above_minimum=True)
non_negative_float = finite_number(0.0)
dropout_rate = finite_number(0.0, below=1.0)
MAX_THREADS = 1_024  # far above any machine's cores; torch overflows on a number past a C int
thread_count = whole_number(1, MAX_THREADS)


def device(value: str) -> str:
    """An argparse type: a torch device this machine has (``cpu``, ``cuda``, ``cuda:1``, ``mps``)."""
    import torch

    try:
        parsed = torch.device(value)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{value!r}: expected cpu, cuda, cuda:N or mps") from None
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            build = "this PyTorch is built without CUDA" if torch.version.cuda is None else "no CUDA GPU is visible"
            raise argparse.ArgumentTypeError(f"{value}: {build}; use --device cpu")
        if parsed.index is not None and parsed.index >= count:
            raise argparse.ArgumentTypeError(f"{value}: this machine has CUDA devices 0..{count - 1}")
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise argparse.ArgumentTypeError(f"{value}: MPS is not available on this machine; use --device cpu")
    elif parsed.type not in ("cpu", "cuda", "mps"):
        raise argparse.ArgumentTypeError(f"{value!r}: expected cpu, cuda, cuda:N or mps")
    return value


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default, unless its text already names one or there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        # Identity, not ==: a default of 0 or 0.0 is shown (0 == False).
        shown = not (default is None or default is argparse.SUPPRESS or isinstance(default, bool)
                     or (isinstance(default, list | tuple) and not default))
        if shown and "default" not in text and (action.option_strings or action.nargs in ("?", "*")):
            if isinstance(default, (list, tuple)):
                default = " ".join(map(str, default))
            text = f"{text} (default: {str(default).replace('%', '%%')})".strip()
        return text


class CommandParser(argparse.ArgumentParser):
    """Every ``elmo`` parser and subparser: help shows defaults (subparsers made by ``add_subparsers`` are of
    this class too, since argparse makes them with the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)


def given_options(parser: argparse.ArgumentParser, words: Sequence[str], names: Sequence[str]) -> list[str]:
    """Which of ``names`` the command line ``words`` gives, whatever their values (one given at its default value
    counts: it was asked for), read by ``parser`` itself (abbreviations too): for refusing options a command
    would ignore."""
    not_given = object()
    given, _ = parser.parse_known_args(list(words), argparse.Namespace(**dict.fromkeys(names, not_given)))
    return [name for name in names if getattr(given, name) is not not_given]


def flags(names: Iterable[str]) -> str:
    """Option names as the command line spells them: ``--max-steps, --epochs``."""
    return ", ".join("--" + name.replace("_", "-") for name in names)
