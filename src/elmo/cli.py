"""``elmo`` on the command line: thin wrappers that parse arguments and call the library."""

import argparse
import logging
import math
import sys
from pathlib import Path

from elmo.command_line import device, exit_status, interruptible, positive_int
from elmo.search.commands import add_subcommands as add_search_commands
from elmo.serve.commands import add_subcommands as add_serve_commands
from elmo.tasks.commands import add_subcommands as add_task_commands
from elmo.tokenizers import TOKENIZERS
from elmo.training.commands import add_subcommands as add_training_commands


def _layers(value: str) -> str | list[float]:
    if value in ("all", "top", "average"):
        return value
    try:
        weights = [float(weight) for weight in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: expected all, top, average or comma-separated weights") from None
    if not all(math.isfinite(weight) for weight in weights):
        raise argparse.ArgumentTypeError(f"{value!r}: mixing weights must be finite numbers")
    return weights


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
          f"cell clip {lstm.cell_clip:g}, projection clip {lstm.proj_clip:g}, "
          f"skip connections {'on' if lstm.use_skip_connections else 'off'}")
    print(f"ELMo layers:  {config.n_output_layers} x {config.output_dim} "
          f"(layer 0 = token vector twice, layers 1..{lstm.n_layers} = [forward, backward])")
    return 0


def _shipped_model_for(path: str) -> str:
    """``zh`` when most letters of the file's first 64 KiB are CJK ideographs, else ``en``."""
    with open(path, "rb") as handle:
        text = handle.read(1 << 16).decode("utf-8", errors="ignore")
    letters = [character for character in text if character.isalpha()]
    ideographs = sum("\u4e00" <= character <= "\u9fff" or "\u3400" <= character <= "\u4dbf" for character in letters)
    return "zh" if letters and ideographs > len(letters) / 2 else "en"


def _embed(args: argparse.Namespace) -> int:
    from elmo.config import BiLMConfig
    from elmo.embed_file import check_output_path, check_text_file, embed_file, partial_path
    from elmo.embedder import Embedder, layer_weights
    from elmo.model_dir import ModelDir

    # Every check before the model loads: a mistake costs no time and leaves no file.
    check_text_file(args.input)
    check_output_path(args.output)
    model = args.model
    if model is None:
        model = _shipped_model_for(args.input)
        print(f"elmo embed: no --model given; the text looks {'Chinese' if model == 'zh' else 'English'}, "
              f"so the shipped {model!r} model embeds it", file=sys.stderr)
    model_dir = ModelDir.find(model)
    try:
        layer_weights(args.layers, BiLMConfig.load(model_dir.options_file).n_output_layers)
    except ValueError as error:
        spec = args.layers if isinstance(args.layers, str) else ",".join(f"{weight:g}" for weight in args.layers)
        raise ValueError(f"--layers {spec}: {error} (one weight per layer, e.g. 0,0,1 for layer 2 of 3; "
                         "or all, top, average)") from None
    try:
        with interruptible():
            embedder = Embedder.load(model, tokenizer=args.tokenizer, device=args.device)
            report = embed_file(args.input, args.output, embedder, layers=args.layers, batch_size=args.batch_size,
                                resume=args.resume, progress=not args.quiet)
    except KeyboardInterrupt as interrupt:
        if partial_path(Path(args.output)).exists():
            interrupt.add_note("run the same command with --resume to continue")
        raise
    resumed = f" (resumed after line {report.resumed_from})" if report.resumed_from else ""
    print(f"wrote {report.lines} sentences to {args.output}{resumed}; {len(report.warnings)} warning(s)")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from elmo.demo import run_demo

    return run_demo(args.model, args.out)


def _export_onnx(args: argparse.Namespace) -> int:
    from elmo.onnx_export import export_onnx

    exported = export_onnx(args.model, args.out, opset=args.opset)
    print(f"wrote {exported.path}; onnxruntime's outputs differ from PyTorch's by up to {exported.max_difference:.1e}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="elmo", description="Deep contextualized word representations (ELMo).")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = commands.add_parser("info", help="print a model's configuration, parameter count and layer widths")
    info.add_argument("model", help="model directory or shipped model name")
    info.set_defaults(func=_info)

    embed = commands.add_parser("embed", help="embed a file of sentences (one per line) into HDF5")
    embed.add_argument("input", help="text file, one sentence per line")
    embed.add_argument("output", help="HDF5 file to write (AllenNLP's elmo command layout)")
    embed.add_argument("--model", default=None,
                       help="model directory or shipped model name (default: zh for Chinese text, else en)")
    embed.add_argument("--layers", type=_layers, default="all",
                       help="all (L+1, T, 2P), top, average, or comma-separated mixing weights")
    embed.add_argument("--batch-size", type=positive_int, default=32, help="sentences run at once (default: 32)")
    embed.add_argument("--tokenizer", choices=sorted(TOKENIZERS), help="default: the model's tokenizer")
    embed.add_argument("--device", type=device, default=None, help="cpu, cuda, cuda:1, ... (default: cpu)")
    embed.add_argument("--resume", action="store_true", help="continue an interrupted run of the same command")
    embed.add_argument("--quiet", action="store_true", help="no progress bar")
    embed.set_defaults(func=_embed)

    demo = commands.add_parser("demo", help="show contextual vectors telling word senses apart")
    demo.add_argument("--model", default=None,
                      help="one model for every example (default: the shipped en or zh model of each example)")
    demo.add_argument("--out", default="demo.png", help="where to write the heat map PNG")
    demo.set_defaults(func=_demo)

    export_onnx = commands.add_parser("export-onnx", help="write a model's biLM as an ONNX graph (docs/onnx.md)")
    export_onnx.add_argument("model", help="model directory or shipped model name")
    export_onnx.add_argument("--out", required=True, help="the .onnx file to write")
    export_onnx.add_argument("--opset", type=positive_int, default=18, help="ONNX opset: 18 (default) or later")
    export_onnx.set_defaults(func=_export_onnx)
    add_training_commands(commands)
    add_serve_commands(commands)
    add_search_commands(commands)
    add_task_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError) as error:  # bad input: say what, without a traceback
        print(f"elmo {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM where a command made it one: say what is kept
        notes = "".join(f"; {note}" for note in getattr(interrupt, "__notes__", []))
        print(f"elmo {args.command}: interrupted{notes}", file=sys.stderr)
        return exit_status(interrupt)


if __name__ == "__main__":
    sys.exit(main())
