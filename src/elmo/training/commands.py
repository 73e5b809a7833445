"""The training subcommands: ``vocab``, ``train``, ``perplexity``, ``export``.

``add_subcommands`` registers them on an argparse subparsers action; each handler takes the parsed
namespace and returns an exit code; `elmo.cli.main` turns bad input (ValueError, FileNotFoundError) into a
one-line error without a traceback. ``train`` exits 1 when the run diverges, and 130 / 143 after SIGINT /
SIGTERM (the checkpoint written, one line saying how to continue). ``train``, ``perplexity`` and ``export``
need the ``train`` extra (``extra`` in their defaults, checked by `elmo.cli.main` before they start); the
handlers import the library when they run, so ``elmo --help`` does not import PyTorch.
"""

import argparse
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, overload

from elmo.command_line import (
    dropout_rate,
    flags,
    given_options,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    whole_number,
)
from elmo.tokenizers import TOKENIZERS
from elmo.training.presets import TRAINING_PRESETS

if TYPE_CHECKING:
    from elmo.training.trainer import TrainingOptions

# Bounds past any real use that stop a typo (an extra 000) at the command line rather than in a MemoryError: the
# batch's tensors grow with rows x tokens, and a row's LSTM state and gradients with its unrolled tokens.
MAX_BATCH_ROWS = 65_536
MAX_UNROLL_STEPS = 10_000
_BATCH_ROWS = whole_number(1, MAX_BATCH_ROWS)
_UNROLL_STEPS = whole_number(1, MAX_UNROLL_STEPS)


def _vocab(args: argparse.Namespace) -> int:
    from elmo.files import check_not_an_input, check_output_file
    from elmo.training.corpus import Corpus
    from elmo.training.vocab import Vocabulary

    check_output_file(args.out, "--out")
    corpus = Corpus(args.corpus, args.tokenizer)
    check_not_an_input(args.out, corpus.paths, "--out")
    counts = corpus.count_tokens()
    vocab = Vocabulary.from_counts(counts, args.min_count, args.max_size)
    vocab.save(args.out)
    print(f"{len(vocab)} tokens ({sum(counts.values())} in the corpus, {len(counts)} distinct) -> {args.out}")
    return 0


@overload
def _absolute(paths: str) -> str: ...
@overload
def _absolute(paths: list[str]) -> list[str]: ...
@overload
def _absolute(paths: None) -> None: ...
def _absolute(paths: str | list[str] | None) -> str | list[str] | None:
    """File names or glob patterns made absolute against the current directory."""
    if paths is None or isinstance(paths, list):
        return None if paths is None else [str(Path(path).absolute()) for path in paths]
    return str(Path(paths).absolute())


def _config_name(config: str | None) -> str | None:
    """A preset's name as it is, an options.json path made absolute (the run records it)."""
    return config if config is None or config in TRAINING_PRESETS else _absolute(config)


def _run(options: "TrainingOptions", run_dir: Path, resume: bool, quiet: bool) -> int:
    from elmo.training.trainer import TrainingDiverged, TrainingInterrupted, train

    try:
        steps = train(options, run_dir, resume=resume, progress=not quiet)
    except TrainingInterrupted as stopped:
        name = signal.Signals(stopped.signal_number).name
        if stopped.checkpoint is None:
            print(f"elmo train: {name} before the first step; nothing was saved", file=sys.stderr)
        else:
            print(f"elmo train: {name}: stopped after step {stopped.step}, saved in {stopped.checkpoint}; continue "
                  f"with: elmo train --resume {shlex.quote(str(run_dir))}", file=sys.stderr)
        return stopped.exit_code
    except TrainingDiverged as error:
        print(f"elmo train: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # before the loop takes over SIGINT: loading the corpus or the model
        print("elmo train: interrupted before the first step; nothing new was saved", file=sys.stderr)
        return 128 + signal.SIGINT
    if os.environ.get("RANK", "0") in ("", "0"):  # once under torchrun (rank 0 prints), not once a process
        print(f"stopped after step {steps}; run in {run_dir}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from elmo.training.export import model_tokenizer, resolve_model
    from elmo.training.trainer import TrainingOptions

    if args.resume is not None:
        if args.resume.exists() and not args.resume.is_dir():
            raise ValueError(f"--resume {args.resume} is a file; expected the run directory that `elmo train --out` "
                             "wrote")
        # the run's own options given on the command line, whatever their values (at a default value too)
        ignored = given_options(args.train_parser, args.argv[args.argv.index("train") + 1 :], args.run_option_defaults)
        if ignored:
            raise ValueError(f"--resume continues the run with its own options, so {flags(ignored)} would be ignored "
                             "(only --max-steps and --epochs may be given with --resume)")
        options = TrainingOptions(corpus=[], max_steps=args.max_steps, epochs=args.epochs)
        return _run(options, args.resume, resume=True, quiet=args.quiet)
    missing = [name for name in ("corpus", "out") if getattr(args, name) is None]
    if missing:
        raise ValueError(f"give {' and '.join('--' + name for name in missing)} (or --resume DIR)")
    if args.valid is None:
        ignored = given_options(args.train_parser, args.argv[args.argv.index("train") + 1 :],
                                ["valid_every", "valid_batch_size"])
        if ignored:
            raise ValueError(f"{flags(ignored)} set how the --valid text is evaluated, and no --valid is given: "
                             "give the held-out text, or leave them out")
    # A shipped model's name (en) becomes its directory, so the run records where it started from.
    init_from = None if args.init_from is None else resolve_model(args.init_from)
    tokenizer = args.tokenizer or (model_tokenizer(init_from) if init_from is not None else "whitespace")
    options = TrainingOptions(
        # Absolute paths: the run records them, and --resume may be given from another directory.
        corpus=_absolute(args.corpus), vocab=_absolute(args.vocab), tokenizer=tokenizer,
        config=_config_name(args.config),
        valid=_absolute(args.valid or []), init_from=_absolute(None if init_from is None else str(init_from)),
        min_count=args.min_count,
        batch_size=args.batch_size,
        unroll_steps=args.unroll_steps, n_negatives=args.negatives, precision=args.precision,
        optimizer=args.optimizer,
        learning_rate=args.lr if args.lr is not None else (0.2 if args.optimizer == "adagrad" else 1e-3),
        lr_decay_steps=args.lr_decay_steps, lr_final=args.lr_final,
        dropout=args.dropout, state_reset=args.state_reset, clip_norm=args.clip_norm, seed=args.seed,
        max_steps=args.max_steps, epochs=args.epochs, checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints, valid_every=args.valid_every,
        valid_batch_size=args.valid_batch_size, log_every=args.log_every,
    )
    return _run(options, args.out, resume=False, quiet=args.quiet)


def _perplexity(args: argparse.Namespace) -> int:
    from elmo.training.corpus import Corpus
    from elmo.training.export import load_language_model, model_tokenizer
    from elmo.training.perplexity import evaluate

    # The corpus is checked (named files, UTF-8 text) before the model's weights load; its tokenizer needs none.
    corpus = Corpus(args.corpus, args.tokenizer or model_tokenizer(args.model))
    model, vocab = load_language_model(args.model)
    result = evaluate(model, corpus, vocab, args.batch_size, args.unroll_steps)
    print(f"tokens: {result.n_tokens}")
    print(f"unknown (<UNK>): {result.n_unknown}")  # each line "name: number", for scripts that read them
    print(f"unknown share: {result.unknown_share:.4f}")
    if note := result.unknown_note():
        print(f"elmo perplexity: warning: {note}", file=sys.stderr)
    print(f"forward perplexity: {result.forward:.4f}")
    print(f"backward perplexity: {result.backward:.4f}")
    print(f"perplexity: {result.average:.4f}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from elmo.training.export import check_export_target, export_model, load_language_model, model_tokenizer

    check_export_target(args.out)
    model, vocab = load_language_model(args.source)
    export_model(model, vocab, args.out, args.tokenizer or model_tokenizer(args.source))
    print(f"options.json, weights.hdf5, vocab.txt, softmax.safetensors, tokenizer.json -> {args.out}")
    return 0


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    tokenizers = sorted(TOKENIZERS)

    vocab = subparsers.add_parser("vocab", help="count a corpus into a vocab.txt (specials, then by frequency)")
    vocab.add_argument("corpus", nargs="+", help="text files or glob patterns, one sentence a line")
    vocab.add_argument("--out", required=True, type=Path, help="vocab.txt to write")
    vocab.add_argument("--min-count", type=positive_int, default=1, help="drop tokens seen fewer times")
    vocab.add_argument("--max-size", type=whole_number(3), default=None,
                       help="keep at most this many tokens, specials included")
    vocab.add_argument("--tokenizer", choices=tokenizers, default="whitespace", help="how the text is split")
    vocab.set_defaults(func=_vocab)

    train_parser = subparsers.add_parser("train", help="pre-train a biLM, resume a run, or adapt one to new text")
    train_parser.add_argument("--corpus", nargs="+", help="training text: files or glob patterns of shards")
    train_parser.add_argument("--vocab", help="vocab.txt from `elmo vocab` (with --init-from: words to add)")
    train_parser.add_argument("--config", default=None,
                              help=f"options.json or a preset: {', '.join(sorted(TRAINING_PRESETS))} (default: tiny; "
                                   "with --init-from, that model's shape, or this one where it only widens the "
                                   "LSTM cells)")
    train_parser.add_argument("--out", type=Path, help="run directory (checkpoints, log.jsonl, perplexity.png)")
    train_parser.add_argument("--resume", type=Path, help="continue the run in this directory exactly, to its "
                              "own --max-steps and --epochs; giving either of them replaces both (the other is then "
                              "no limit); its other options stay the run's")
    train_parser.add_argument("--init-from", help="continue training this model (shipped name such as en, exported "
                              "dir, or run/checkpoint) on --corpus, growing the vocabulary with its new words and "
                              "ordering it by their frequency there")
    train_parser.add_argument("--min-count", type=positive_int, default=1,
                              help="with --init-from and no --vocab: the corpus's words seen this often join its "
                                   "vocabulary (refused where it would be ignored)")
    train_parser.add_argument("--valid", nargs="+", help="held-out text for the validation perplexity")
    train_parser.add_argument("--tokenizer", choices=tokenizers, default=None,
                              help="how the text is split (default: whitespace; with --init-from, that model's "
                                   "own); give the one `elmo vocab` split --vocab's text with: a vocabulary that maps "
                                   "over half of the frequent words (types seen 5+ times) among the corpus's first "
                                   "50,000 words to <UNK> is refused, over 2 %% warned of")
    train_parser.add_argument("--max-steps", type=positive_int, default=None,
                              help="stop after this many optimizer steps (with --epochs: whichever comes first)")
    train_parser.add_argument("--epochs", type=positive_int, default=None,
                              help="stop after this many passes' worth of the corpus's tokens, as bilm-tf counts them: "
                                   "epochs x (tokens + sentences) / (batch size x unroll steps) steps, rows wrapping "
                                   "around (give it, --max-steps, or both)")
    train_parser.add_argument("--batch-size", type=_BATCH_ROWS, default=128,
                              help=f"rows of the global batch (at most {MAX_BATCH_ROWS:,})")
    train_parser.add_argument("--unroll-steps", type=_UNROLL_STEPS, default=20,
                              help="tokens per row per step (truncated backpropagation through time; at most "
                                   f"{MAX_UNROLL_STEPS:,})")
    train_parser.add_argument("--negatives", type=positive_int, default=8192, help="sampled softmax negatives per step")
    train_parser.add_argument("--optimizer", choices=("adagrad", "adam"), default="adagrad",
                              help="adagrad as bilm-tf, or adam")
    # PRODUCT_DTYPES's names (elmo.modules.low_precision, not imported: --help answers without torch)
    train_parser.add_argument("--precision", choices=("float32", "bfloat16"), default="float32",
                              help="the type the LSTM layers' and sampled softmax's matrix products run in: "
                                   "bfloat16 copies of their operands, accumulated in float32 (weights, optimizer, "
                                   "cell state and all else stay float32); faster on a CPU with AMX or AVX-512 "
                                   "BF16 units, slower where bfloat16 is emulated (docs/training.md)")
    train_parser.add_argument("--lr", type=positive_float, default=None, help="default 0.2 (Adagrad) or 1e-3 (Adam)")
    train_parser.add_argument("--lr-decay-steps", type=non_negative_int, default=0,
                              help="steps over which the rate falls from --lr to --lr-final along a cosine "
                                   "(0: a constant rate)")
    train_parser.add_argument("--lr-final", type=positive_float, default=None,
                              help="the rate after --lr-decay-steps (default: a tenth of --lr)")
    train_parser.add_argument("--dropout", type=dropout_rate, default=0.1,
                              help="dropout on each LSTM layer's input and on the softmax input")
    train_parser.add_argument("--state-reset", type=non_negative_float, default=0.0,
                              help="chance that a row starts a step from a zero LSTM state (bilm-tf: 0)")
    train_parser.add_argument("--clip-norm", type=positive_float, default=10.0, help="global gradient-norm clip")
    train_parser.add_argument("--seed", type=non_negative_int, default=0,
                              help="below 2**64, as PyTorch's generators take; seeds initialization, where a new "
                                   "run's rows start in their shares of the text, shard order, sampling and dropout")
    train_parser.add_argument("--checkpoint-every", type=positive_int, default=500, help="steps between checkpoints")
    train_parser.add_argument("--keep-checkpoints", type=positive_int, default=3, help="newest checkpoints kept")
    train_parser.add_argument("--valid-every", type=positive_int, default=500,
                              help="steps between validation perplexities (with --valid); the run's last step "
                                   "is validated too")
    train_parser.add_argument("--valid-batch-size", type=_BATCH_ROWS, default=32,
                              help="rows evaluated at once in validation (more is faster on a GPU and moves the "
                                   "figure a little: each row's share of the text starts from a zero state; at most "
                                   f"{MAX_BATCH_ROWS:,})")
    train_parser.add_argument("--log-every", type=positive_int, default=10, help="steps between log.jsonl records")
    train_parser.add_argument("--quiet", action="store_true", help="no progress bar")
    # The run's own options: with --resume, any of them given is refused rather than ignored.
    run_options = {name: default for name, default in vars(train_parser.parse_args([])).items()
                   if name not in ("resume", "max_steps", "epochs", "quiet")}
    train_parser.set_defaults(func=_train, extra="train", run_option_defaults=run_options, train_parser=train_parser)

    perplexity = subparsers.add_parser("perplexity", help="full-softmax perplexity of a trained biLM on a corpus")
    perplexity.add_argument("--model", required=True,
                            help="exported model directory, run or checkpoint directory, or shipped model name")
    perplexity.add_argument("--corpus", nargs="+", required=True,
                            help="held-out text: files or glob patterns, one sentence a line")
    perplexity.add_argument("--tokenizer", choices=tokenizers, default=None,
                            help="default: the model's own (tokenizer.json, or the run's)")
    perplexity.add_argument("--batch-size", type=_BATCH_ROWS, default=32,
                            help=f"rows evaluated at once (at most {MAX_BATCH_ROWS:,})")
    perplexity.add_argument("--unroll-steps", type=_UNROLL_STEPS, default=20,
                            help=f"tokens per row per step (at most {MAX_UNROLL_STEPS:,})")
    perplexity.set_defaults(func=_perplexity, extra="train")

    export = subparsers.add_parser("export", help="write options.json + weights.hdf5 (+ vocab, softmax)")
    export.add_argument("source", help="a run directory (its newest checkpoint), a checkpoint directory, or a model "
                        "directory or shipped name (its softmax written as float32)")
    export.add_argument("--out", required=True, type=Path, help="model directory to write")
    export.add_argument("--tokenizer", choices=tokenizers, default=None,
                        help="how users' text is split (tokenizer.json); default: the run's own. Give the corpus's "
                             "tokenizer when the run read text it had split (--tokenizer whitespace)")
    export.set_defaults(func=_export, extra="train")
