"""``elmo`` on the command line: thin wrappers that parse arguments and call the library.

Building the parser imports no PyTorch (each handler imports the library when it runs), so ``elmo --help``
answers at once. A command that needs an extra names it in its defaults (``extra``); ``main`` checks it
before the command starts and says in one line what to install.
"""

import argparse
import logging
import sys
from importlib.metadata import version

from elmo.command_line import CommandParser, positive_int
from elmo.embed_job.commands import add_subcommands as add_embed_commands
from elmo.extras import DISTRIBUTION, MissingExtra, require
from elmo.search.commands import add_subcommands as add_search_commands
from elmo.serve.commands import add_subcommands as add_serve_commands
from elmo.stop_signals import exit_status
from elmo.tasks.commands import add_subcommands as add_task_commands
from elmo.training.commands import add_subcommands as add_training_commands


def _info(args: argparse.Namespace) -> int:
    from elmo.model_dir import ModelDir

    model_dir = ModelDir.find(args.model)
    bilm = model_dir.load_bilm()
    config = bilm.config
    cnn, lstm = config.char_cnn, config.lstm
    print(f"model:        {model_dir.path}")
    print(f"weights:      {model_dir.weight_file.name}")
    print(f"tokenizer:    {model_dir.tokenizer}")
    print(f"parameters:   {sum(p.numel() for p in bilm.parameters()):,}")
    print(f"char CNN:     {cnn.embedding_dim}-dim characters, filters {[list(f) for f in cnn.filters]} "
          f"({cnn.n_filters} total), {cnn.activation}, {cnn.n_highway} highway layer(s), "
          f"{cnn.max_characters_per_token} characters per token")
    print(f"LSTM:         {lstm.n_layers} layers x {lstm.dim} cells -> {lstm.projection_dim} per direction, "
          f"cell clip {_clip(lstm.cell_clip)}, projection clip {_clip(lstm.proj_clip)}, "
          f"skip connections {'on' if lstm.use_skip_connections else 'off'}")
    print(f"ELMo layers:  {config.n_output_layers} x {config.output_dim} "
          f"(layer 0 = token vector twice, layers 1..{lstm.n_layers} = [forward, backward])")
    return 0


def _clip(clip: float) -> str:
    """A clip as bilm-tf means it: 0 is none (a written 0.0 would clip to zero)."""
    return f"{clip:g}" if clip else "none"


def _demo(args: argparse.Namespace) -> int:
    from elmo.demo import run_demo

    return run_demo(args.model, args.out)


def _export_onnx(args: argparse.Namespace) -> int:
    from elmo.onnx_export import export_onnx

    exported = export_onnx(args.model, args.out, opset=args.opset)
    print(f"wrote {exported.path}; onnxruntime's outputs differ from PyTorch's by up to {exported.max_difference:.1e}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="elmo", description="Deep contextualized word representations (ELMo).")
    parser.add_argument("--version", action="version", version=f"elmo {version(DISTRIBUTION)}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = commands.add_parser("info", help="print a model's configuration, parameter count and layer widths")
    info.add_argument("model", help="model directory or shipped model name")
    info.set_defaults(func=_info)

    add_embed_commands(commands)

    demo = commands.add_parser("demo", help="show contextual vectors telling word senses apart")
    demo.add_argument("--model", default=None,
                      help="one model for every example (default: the shipped en or zh model of each example)")
    demo.add_argument("--out", default="demo.png", help="where to write the heat map PNG")
    demo.set_defaults(func=_demo, extra="demo")

    export_onnx = commands.add_parser("export-onnx", help="write a model's biLM as an ONNX graph (docs/onnx.md)")
    export_onnx.add_argument("model", help="model directory or shipped model name")
    export_onnx.add_argument("--out", required=True, help="the .onnx file to write")
    export_onnx.add_argument("--opset", type=positive_int, default=18,
                             help="ONNX opset: 18 (default) up to the latest the installed onnx knows")
    export_onnx.set_defaults(func=_export_onnx, extra="onnx")
    add_training_commands(commands)
    add_serve_commands(commands)
    add_search_commands(commands)
    add_task_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # what was given, not only the values: a default given on purpose is still given
    try:
        if getattr(args, "extra", None) is not None:
            require(args.extra, f"elmo {args.command}")
    except MissingExtra as missing:
        print(missing, file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError, MissingExtra) as error:  # bad input: say what, without a traceback
        print(f"elmo {args.command}: error: {error}{_notes(error)}", file=sys.stderr)
        return 2
    except OSError as error:  # the last resort for a file that could not be read or written: one line all the same
        print(f"elmo {args.command}: error: {error}{_notes(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM where a command made it one: say what is kept
        print(f"elmo {args.command}: interrupted{_notes(interrupt)}", file=sys.stderr)
        return exit_status(interrupt)


def _notes(error: BaseException) -> str:
    """What the command added to the error on its way out (what is kept, how to go on), on the same line."""
    return "".join(f"; {note}" for note in getattr(error, "__notes__", []))


if __name__ == "__main__":
    sys.exit(main())
