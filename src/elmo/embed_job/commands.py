"""``elmo embed``: a file of sentences -> vectors in HDF5, Parquet or npy (docs/embedding.md).

``add_subcommands`` registers it; every check (options, input, output) runs before the model loads, and
``elmo.cli.main`` turns bad input into exit status 2 with one line naming it. The handler imports the library
when it runs, so ``elmo --help`` does not import PyTorch.
"""

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from elmo.command_line import device, non_negative_int, positive_int
from elmo.config import BiLMConfig
from elmo.embed_job.layout import DTYPES, FORMATS, partial_path
from elmo.embed_job.shards import WHOLE, Shard, shard_from_environment
from elmo.embed_job.source import STDIN, Source, check_input, stdin_as_file, text_sample
from elmo.extras import install_command, require
from elmo.pooling import POOLINGS
from elmo.stop_signals import interruptible
from elmo.tokenizers import TOKENIZERS
from elmo.windows import MAX_WINDOW_TOKENS, WINDOW_CONTEXT, check_windows

if TYPE_CHECKING:
    from elmo.embedder import Embedder
    from elmo.layer_choice import LayerChoice


def _layers(value: str) -> "LayerChoice":
    """An argparse type: ``elmo.layer_choice``'s text forms, checked as the command line is read."""
    from elmo.layer_choice import layers_argument

    return layers_argument(value)


def _shard(value: str) -> Shard:
    try:
        return Shard.parse(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _shipped_model_for(source: Source) -> str:
    """``zh`` when most letters of the input's first 64 Ki characters of text are CJK ideographs, else ``en``."""
    text = text_sample(source)
    letters = [character for character in text if character.isalpha()]
    ideographs = sum("\u4e00" <= character <= "\u9fff" or "\u3400" <= character <= "\u4dbf" for character in letters)
    return "zh" if letters and ideographs > len(letters) / 2 else "en"


@contextmanager
def _input_file(name: str) -> Iterator[Path]:
    with stdin_as_file() if name == "-" else nullcontext(Path(name)) as path:
        yield path


class _Model(NamedTuple):
    """The model an ``elmo embed`` run reads, as far as it is known before its weights load."""

    config: BiLMConfig
    tokenizer: str
    files: list[Path]  # what the output must not replace: the model would be broken
    load: Callable[[str | None], "Embedder"]  # takes the device


def _model(args: argparse.Namespace, source: Source) -> _Model:
    """The model from --model or from --options-file and --weight-file; the weights are not read yet."""
    from elmo.embedder import Embedder
    from elmo.model_dir import MODEL_FILES, ModelDir
    from elmo.weights import load_bilm

    # How long lines are cut into windows (docs/long-inputs.md): recorded in the output's settings by ``run``.
    windows = {"max_window_tokens": args.max_window_tokens, "window_context": args.window_context}
    if args.options_file is not None or args.weight_file is not None:
        if args.model is not None:
            raise ValueError("give --model, or --options-file with --weight-file, not both")
        if args.options_file is None or args.weight_file is None:
            raise ValueError("--options-file and --weight-file go together (a model as its two files)")
        if not Path(args.weight_file).is_file():
            raise FileNotFoundError(f"--weight-file {args.weight_file}: no such file")
        tokenizer = args.tokenizer or "whitespace"  # AllenNLP's elmo command splits lines on white space
        files = [Path(args.options_file), Path(args.weight_file)]
        return _Model(BiLMConfig.load(args.options_file), tokenizer, files,
                      lambda on: Embedder(load_bilm(*files), tokenizer, device=on, **windows))
    model = args.model
    if model is None:
        check_input(source)  # an empty or binary file is named, not guessed English
        model = _shipped_model_for(source)
        print(f"elmo embed: no --model given; the text looks {'Chinese' if model == 'zh' else 'English'}, "
              f"so the shipped {model!r} model embeds it", file=sys.stderr)
    model_dir = ModelDir.find(model)
    tokenizer = args.tokenizer or model_dir.tokenizer
    others = [model_dir.path / name for name in sorted(MODEL_FILES) if (model_dir.path / name).is_file()]
    return _Model(BiLMConfig.load(model_dir.options_file), tokenizer,
                  list(dict.fromkeys([model_dir.options_file, model_dir.weight_file, *others])),
                  lambda on: Embedder.load(model, tokenizer, device=on, **windows))


def _embed(args: argparse.Namespace) -> int:
    from elmo.embed_job.job import EmbedOptions, plan, run
    from elmo.layer_choice import LayerChoiceError

    if args.output == "-":
        raise ValueError("OUTPUT - would be standard output, which elmo embed does not write (HDF5, Parquet and npy "
                         "are binary files, written whole under a partial name and then renamed): give a file name")
    check_windows(args.max_window_tokens, args.window_context, ("--max-window-tokens", "--window-context"))
    if args.workers != 1 and args.engine != "ray":
        raise ValueError("--workers is for --engine ray; locally, run a process per shard (torchrun, Slurm, --shard)")
    launched = shard_from_environment() if args.shard is None else None
    named_directory = args.output.endswith(("/", os.sep)) or Path(args.output).is_dir()
    if launched is not None and launched.count == 1 and not named_directory:
        launched = None  # a launcher of one process (torchrun --nproc-per-node 1, an array of one) embeds it all
    shard = args.shard or launched or WHOLE
    # A name without "/" is a file, as without a launcher (the Ray engine, which a launcher must not start, says so)
    if launched is not None and not named_directory and args.engine != "ray":
        raise ValueError(f"this process is shard {launched} of a launcher (torchrun's RANK/"
                         f"WORLD_SIZE or a Slurm array's SLURM_ARRAY_TASK_ID/COUNT), which would embed only one "
                         f"line in {launched.count} of the input into a directory of parts, but {args.output} names "
                         f"a file: to embed the whole input here, give --shard 0/1; to share it out, give OUTPUT as "
                         f"a directory ({Path(args.output).with_suffix('')}/)")
    if launched is not None and args.input == "-":
        raise ValueError(f"this process is shard {launched} of a launcher, whose processes share one standard "
                         "input and would each read a different piece of it: write the input to a file first")
    parts = launched is not None or named_directory
    options = EmbedOptions(layers=args.layers, pooling=args.pooling, dtype=args.dtype, format=args.format,
                           batch_size=args.batch_size, sentence_keys=args.use_sentence_keys, shard=shard, parts=parts)
    with _input_file(args.input) as input_path:
        source = Source(input_path, STDIN if args.input == "-" else args.input, args.text_field, args.id_field)
        model = _model(args, source)
        try:  # a --layers that does not fit the model is named as the option, on either engine
            if args.engine == "ray":
                require("parquet", "the Ray engine")  # ray_data imports pyarrow; Ray itself after the options
                from elmo.embed_job.ray_data import embed_command

                return embed_command(args, source, model.config, model.tokenizer, model.load, model.files)
            job = plan(source, args.output, options, model.config, model.tokenizer, model.files)
        except LayerChoiceError as error:
            raise ValueError(f"--layers: {error}") from None
        output = job.target.output
        on = args.device
        if on == "cuda" and "LOCAL_RANK" in os.environ:  # one GPU per process under torchrun
            on = f"cuda:{os.environ['LOCAL_RANK']}"
        try:
            with interruptible():
                report = run(job, model.load(on), resume=args.resume, progress=not args.quiet)
        except (KeyboardInterrupt, OSError) as stopped:  # Ctrl-C or SIGTERM; a full disk, say
            if partial_path(output).exists():
                stopped.add_note("run the same command with --resume to continue")
            raise
    shard_note = f" (shard {shard})" if shard != WHOLE else ""
    if report.already_whole:
        print(f"{output}{shard_note} is already whole; skipped")
        return 0
    resumed = f" (resumed: {report.resumed_from} lines already done)" if report.resumed_from else ""
    print(f"wrote {report.lines} sentences to {output}{shard_note}{resumed}; {len(report.warnings)} warning(s)")
    return 0


def add_subcommands(commands: argparse._SubParsersAction) -> None:
    embed = commands.add_parser("embed", help="embed a file of sentences (one per line) into HDF5, Parquet or npy")
    embed.add_argument("input", help="text file, one sentence per line; - for standard input")
    embed.add_argument("output", help="file to write (format from --format or the extension: .hdf5/.h5, .parquet/.pq, "
                                      ".npy; else HDF5), or a directory (ends in /) for one part per shard")
    model = embed.add_argument_group("model (--model, or the two files as AllenNLP takes them)")
    model.add_argument("--model", default=None,
                       help="model directory or shipped model name (default: zh for Chinese text, else en)")
    model.add_argument("--options-file", default=None, help="options.json (with --weight-file)")
    model.add_argument("--weight-file", default=None, help="weights in bilm-tf's HDF5 layout (with --options-file)")
    embed.add_argument("--layers", type=_layers, default="all",
                       help="all (L+1, T, 2P), top, average, a layer index (-1: the top), or comma-separated "
                            "mixing weights")
    embed.add_argument("--pooling", choices=POOLINGS, default=None,
                       help="one vector per sentence: mean over its tokens, max, first or last token")
    embed.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="of the vectors written")
    embed.add_argument("--format", choices=FORMATS, default=None, help="default: from the output's extension")
    embed.add_argument("--text-field", default=None, help="the input is JSON lines; this field holds the sentence "
                                                          "(text, or a list of tokens)")
    embed.add_argument("--id-field", default=None, help="with --text-field: a field kept with the vectors")
    embed.add_argument("--use-sentence-keys", action="store_true",
                       help="HDF5 datasets named by their sentences, not line numbers (as allennlp elmo)")
    embed.add_argument("--shard", type=_shard, default=None,
                       help="I/N: only the lines whose number modulo N is I (default: RANK/WORLD_SIZE under "
                            "torchrun, SLURM_ARRAY_TASK_ID/COUNT in a Slurm array, else all)")
    embed.add_argument("--batch-size", type=positive_int, default=32, help="sentences run at once (default: 32)")
    embed.add_argument("--max-window-tokens", type=positive_int, default=MAX_WINDOW_TOKENS,
                       help="a line of more tokens is embedded in overlapping windows, not whole "
                            "(docs/long-inputs.md); AllenNLP's elmo command ran every line whole: give more than the "
                            "longest line's tokens for its vectors")
    embed.add_argument("--window-context", type=non_negative_int, default=WINDOW_CONTEXT,
                       help="tokens of context each window adds on either side of its core")
    embed.add_argument("--tokenizer", choices=sorted(TOKENIZERS), help="default: the model's tokenizer")
    embed.add_argument("--device", type=device, default=None,
                       help="cpu, cuda, cuda:1, ... (default: cpu; cuda under torchrun: cuda:LOCAL_RANK)")
    embed.add_argument("--resume", action="store_true",
                       help="continue an interrupted run of the same command; an HDF5 or Parquet output already "
                            "whole from the same command is kept")
    embed.add_argument("--engine", choices=("local", "ray"), default="local",
                       help="local: this process (or one per shard); ray: Ray Data workers write OUTPUT, a directory "
                            f"of Parquet files ({install_command('ray')}; docs/scale.md)")
    embed.add_argument("--workers", type=positive_int, default=1, help="with --engine ray: workers, each holding the "
                                                                       "model (one CPU or, --device cuda, one GPU)")
    embed.add_argument("--quiet", action="store_true", help="no progress bar")
    embed.set_defaults(func=_embed)
