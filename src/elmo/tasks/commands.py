"""``elmo task train {tagger,classifier,qa}`` and ``elmo task predict``.

``add_subcommands`` registers ``task`` on the ``elmo`` subparsers action; `elmo.cli.main` checks the ``tasks``
extra before a command starts, and reports bad input (ValueError, FileNotFoundError) as one line without a
traceback. The handlers import the library when they run, so ``elmo --help`` does not import PyTorch.
"""

import argparse
import json
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elmo.command_line import (
    dropout_rate,
    flags,
    given_options,
    non_negative_float,
    positive_float,
    positive_int,
    whole_number,
)
from elmo.files import (
    atomic_path,
    check_not_an_input,
    check_output_directory,
    check_output_file,
    write_text_atomic,
)
from elmo.tasks.data import (
    SEGMENTERS,
    TASK_KINDS,
    check_input_file,
    classification_examples,
    conll_fields,
    entity_types,
    read_labelled,
    read_tagged,
    tagging_examples,
    text_lines,
    write_labelled,
    write_tagged,
)
from elmo.tasks.options import (
    DROPOUT,
    ENCODER,
    ENCODER_HEADS,
    ENCODER_KINDS,
    ENCODER_LAYERS,
    HIDDEN,
    MAX_ANSWER_TOKENS,
    MIX_L2,
    TrainOptions,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from elmo.embedder import Embedder
    from elmo.tasks.data import Example
    from elmo.tasks.qa_data import QAExample
    from elmo.tasks.spec import TaskSpec

# The largest sizes `task train` takes: past them a run fails late (torch cannot allocate the encoder, numpy takes
# no larger seed) or never ends, after the features were embedded; each is far above any useful setting.
MAX_HIDDEN = 16_384
MAX_EPOCHS = 10_000
MAX_BATCH_SIZE = 65_536
MAX_ENCODER_LAYERS = 64
MAX_ENCODER_HEADS = 1_024
MAX_SEED = 2**32 - 1  # numpy's seeds


def _train(args: argparse.Namespace) -> int:
    from elmo.tasks.pipeline import (
        embed_examples,
        features_embedder,
        load_static,
        read_examples,
        require_examples,
        static_source,
        train_and_test,
        warn_of_low_static_coverage,
    )
    from elmo.tasks.spec import TaskSpec
    from elmo.tasks.train import labels_of

    _check_train_options(args)
    if args.kind == "qa":
        return _train_qa(args)
    elmo = None if args.elmo == "none" else args.elmo
    static_name, static_sha256 = static_source(args.static)
    splits = {name: read_examples(args.kind, getattr(args, name), args.model, args.segment, args.max_words)
              for name in ("train", "dev", "test")}
    require_examples(splits, {name: getattr(args, name) for name in splits})
    labels = labels_of(args.kind, splits["train"])
    _check_labels(args.kind, labels, splits, {name: Path(getattr(args, name)) for name in splits})
    static = load_static(static_name)
    warn_of_low_static_coverage(static, args.static, (word for example in splits["train"] for word in example.words))
    layers = embedder = None
    n_layers = elmo_dim = 0
    if args.fine_tune:
        from elmo.model_dir import ModelDir

        config = ModelDir.find(args.model).load_bilm().config
        n_layers, elmo_dim = config.n_output_layers, config.output_dim
    elif elmo is not None:
        embedder = features_embedder(args.model)
        layers = embed_examples(embedder, splits, args.cache or Path(args.out) / "features", progress=not args.quiet)
        n_layers, _, elmo_dim = layers["train"][0].shape
    spec = TaskSpec(args.kind, labels, elmo, _recorded_model(args.model), n_layers, elmo_dim,
                    static_name, static.dim if static is not None else 0, args.segment, args.segment is not None,
                    args.max_words, args.hidden, args.dropout, args.mix_l2, args.fine_tune,
                    encoder=args.encoder, encoder_layers=args.encoder_layers, encoder_heads=args.encoder_heads,
                    static_sha256=static_sha256, **_bilm_reading(embedder))
    options = TrainOptions(args.epochs, args.patience, args.min_epochs, args.batch_size, args.lr, seed=args.seed)
    model, summary = train_and_test(spec, splits, layers, static, options)
    spec.save(model, args.out, summary)
    weights = summary["mix_weights"]
    mix = f"; mixing weights {', '.join(f'{w:.3f}' for w in weights)}" if weights else ""
    print(f"{summary['metric']}: dev {summary['dev']:.4f}, test {summary['test']:.4f} (best epoch "
          f"{summary['best_epoch']} of {summary['epochs_run']}, {summary['seconds']:.0f} s){mix}; model in {args.out}")
    return 0


def _bilm_reading(embedder: "Embedder | None") -> dict[str, Any]:
    """What a task model records of the biLM that embedded its features (none without ELMo features): its
    fingerprint and its windows, which prediction checks and reads with."""
    return {"bilm_fingerprint": None if embedder is None else embedder.fingerprint,
            "max_window_tokens": None if embedder is None else embedder.max_window_tokens,
            "window_context": None if embedder is None else embedder.window_context}


def _check_labels(kind: str, labels: Sequence[str], splits: dict[str, list["Example"]],
                  files: dict[str, Path]) -> None:
    """ValueError, before any embedding, for a tagger's train split without an entity tag (every tag ``O``: its
    model could only ever tag ``O``, entity F1 0), naming the train file; and naming the file, line and split of
    the first dev or test label that train lacks, a tagger's entity type or a class: the model learns only train's
    labels, and one met only in dev or test (a typo) would have become a class it never saw. A tagger's labels
    hold ``B-`` and ``I-`` of each of train's types (``labels_of``), so a tag is refused for its type alone, and
    quoted as the file writes it (``E-LOC``, not the ``I-LOC`` it is read as)."""
    types = entity_types(labels) if kind == "tagger" else []
    if kind == "tagger" and not types:
        raise ValueError(f"{files['train']}: every tag of the train split is O; a tagger learns the entity types "
                         "its train split tags (B-/I-, BMES or BIOES), and with none it can only tag O (entity F1 0)")
    known = set(labels)
    for name in ("dev", "test"):
        for index, example in enumerate(splits[name]):
            for position, label in enumerate((example.tags or ()) if kind == "tagger" else (example.label or "",)):
                if label in known:
                    continue
                number, line = _source_line(files[name], kind, index, position)
                if kind == "tagger":
                    raise ValueError(f"{files[name]}:{number}: tag {conll_fields(line)[-1].strip()!r} of the {name} "
                                     f"split is of entity type {label.partition('-')[2]!r}, which the train split "
                                     f"lacks (its types: {', '.join(types)}); a model learns only the labels it "
                                     "trains on")
                raise ValueError(f"{files[name]}:{number}: label {label!r} of the {name} split is not in the train "
                                 f"split ({', '.join(labels)}); a model learns only the labels it trains on")


def _source_line(path: Path, kind: str, index: int, position: int) -> tuple[int, str]:
    """The number and text of the line of ``path`` that token ``position`` of example ``index`` was read from: a
    classifier's examples are its non-blank lines, a tagger's are blocks of them between blank lines, a token a
    line."""
    blocks: list[list[tuple[int, str]]] = []
    after_blank = True
    for number, line in enumerate(text_lines(path), start=1):
        if not line.strip():
            after_blank = True
            continue
        if kind != "tagger" or after_blank:
            blocks.append([])
        blocks[-1].append((number, line))
        after_blank = False
    return blocks[index][position]


def _check_train_options(args: argparse.Namespace) -> None:
    """Every check of ``task train``'s options that needs no file read, before any is: an option the run would
    ignore, an encoder that cannot be built, an --out or --cache where no directory can be written, an --out
    whose replacement would delete other files or a --cache inside it."""
    from elmo.tasks.spec import FEATURES_DIR, check_task_model_target

    if args.segment is not None and args.kind != "tagger":
        raise ValueError(f"--segment makes the words a character tagger's biLM reads; a {args.kind} reads the "
                         "model tokenizer's words: leave it out")
    if args.max_words is not None and args.kind != "classifier":
        raise ValueError(f"--max-words cuts classification texts; a {args.kind} reads whole texts: leave it out")
    given = given_options(args.train_parser, args.argv[args.argv.index("task") + 2 :],
                          ("max_answer_tokens", "passage_only", "encoder_layers", "encoder_heads", "mix_l2"))
    if args.min_epochs > args.epochs:
        raise ValueError(f"--min-epochs {args.min_epochs} is more than --epochs {args.epochs}: a run stops at "
                         "--epochs, so it would be ignored; give at most --epochs")
    # Warned of, not refused: scripts give every method of a task the same flags (scripts/run_tasks.py, the
    # commands docs/results.md prints), so these are expected where a method does without them.
    if "mix_l2" in given and args.elmo != "mix":
        log.warning("--mix-l2 pulls a learned scalar mix towards even weights; --elmo %s learns no mix, so it has no "
                    "effect", args.elmo)
    if args.cache is not None and (args.fine_tune or args.elmo == "none"):
        reason = "--fine-tune runs the biLM inside the task model" if args.fine_tune else "--elmo none reads no biLM"
        log.warning("--cache holds the biLM layers read once for training; %s, so nothing is cached there", reason)
    if args.kind != "qa" and {"max_answer_tokens", "passage_only"} & set(given):
        named = flags(name for name in ("max_answer_tokens", "passage_only") if name in given)
        raise ValueError(f"{named} shape a qa model's answers; a {args.kind} has none: leave them out")
    if args.encoder != "transformer" and {"encoder_layers", "encoder_heads"} & set(given):
        named = flags(name for name in ("encoder_layers", "encoder_heads") if name in given)
        raise ValueError(f"{named} shape the transformer encoder; --encoder {args.encoder} has no such blocks: "
                         "leave them out, or give --encoder transformer")
    if args.encoder == "transformer":
        from elmo.tasks.encoders import check_transformer_width

        check_transformer_width(args.hidden, args.encoder_heads)
    if args.fine_tune and args.elmo == "none":
        raise ValueError("--fine-tune trains the biLM with the task; it needs --elmo mix or top")
    check_output_directory(args.out, "--out")
    check_task_model_target(args.out, "--out")
    if args.cache is not None:
        check_output_directory(args.cache, "--cache")
        out, cache = Path(args.out).resolve(), Path(args.cache).resolve()
        if cache.is_relative_to(out) and cache != out / FEATURES_DIR:
            raise ValueError(f"--cache {args.cache} lies in --out {args.out}, which is replaced whole when the model "
                             f"is saved: give {Path(args.out) / FEATURES_DIR} (the default) or a directory outside it")


def _train_qa(args: argparse.Namespace) -> int:
    from elmo.tasks.pipeline import (
        features_embedder,
        load_static,
        require_examples,
        static_source,
        text_tokenizer_of,
        warn_of_low_static_coverage,
    )
    from elmo.tasks.qa_data import read_qa
    from elmo.tasks.qa_pipeline import embed_qa, train_and_test_qa
    from elmo.tasks.spec import TaskSpec

    if args.fine_tune:
        raise ValueError("--fine-tune is not available for qa; its biLM layers are read from the cache")
    elmo = None if args.elmo == "none" else args.elmo
    static_name, static_sha256 = static_source(args.static)
    tokenize = text_tokenizer_of(args.model)
    splits = {name: read_qa(getattr(args, name), tokenize) for name in ("train", "dev", "test")}
    require_examples(splits, {name: getattr(args, name) for name in splits})
    for name, examples in splits.items():  # before any embedding, which takes minutes on a real set
        _require_answer_spans(getattr(args, name), examples)
    static = load_static(static_name)
    warn_of_low_static_coverage(static, args.static, (word for example in splits["train"]
                                                      for word in (*example.question_words, *example.passage_words)))
    layers = embedder = None
    n_layers = elmo_dim = 0
    if elmo is not None:
        embedder = features_embedder(args.model)
        layers = embed_qa(embedder, splits, args.cache or Path(args.out) / "features", progress=not args.quiet)
        n_layers, _, elmo_dim = layers["train"]["passage"][0].shape
    spec = TaskSpec("qa", (), elmo, _recorded_model(args.model), n_layers, elmo_dim, static_name,
                    static.dim if static is not None else 0, hidden=args.hidden, dropout=args.dropout,
                    mix_l2=args.mix_l2,
                    max_answer_tokens=args.max_answer_tokens, passage_only=args.passage_only, encoder=args.encoder,
                    encoder_layers=args.encoder_layers, encoder_heads=args.encoder_heads,
                    static_sha256=static_sha256, **_bilm_reading(embedder))
    options = TrainOptions(args.epochs, args.patience, args.min_epochs, args.batch_size, args.lr, seed=args.seed)
    model, summary = train_and_test_qa(spec, splits, layers, static, options)
    spec.save(model, args.out, summary)
    print(f"f1: dev {summary['dev']:.2f}, test {summary['test']:.2f}, test exact match "
          f"{summary['test_exact_match']:.2f} (best epoch {summary['best_epoch']} of {summary['epochs_run']}, "
          f"{summary['seconds']:.0f} s); model in {args.out}")
    return 0


def _recorded_model(model: str) -> str:
    """``--model`` as ``task.json`` records it for predict: a shipped model by its name, a directory by its absolute
    path (as typed, a relative one named another directory, or none, when predict ran elsewhere)."""
    from elmo.model_dir import locate_model

    return model if locate_model(model) != Path(model) else str(Path(model).resolve())


def _require_answer_spans(path: str, examples: Sequence["QAExample"]) -> None:
    """ValueError naming ``path`` and the first question whose gold span is unknown: one without answers, or none
    of whose answers covers a token of its passage (each training and scored question needs one)."""
    missing = [example for example in examples if example.span is None]
    if missing:
        first = missing[0]
        why = "none of its answers covers a token of its passage" if first.answers else "it has no answers"
        raise ValueError(f"{path}: {len(missing)} question(s) without an answer span, first {first.key!r}: {why}; "
                         "every question of train, dev and test needs 'answers' [{text, start}] within its passage")


def _predict_qa(spec: "TaskSpec", args: argparse.Namespace) -> int:
    """Answers as JSON lines ``{"id", "answer"}``, in input order."""
    from elmo.tasks.pipeline import load_static, text_tokenizer_of
    from elmo.tasks.qa_data import read_qa
    from elmo.tasks.qa_pipeline import answer_questions

    examples = read_qa(args.input, text_tokenizer_of(spec.bilm_model), with_answers=False)
    _require_input(args.input, len(examples), "questions")
    model = spec.load_weights(args.task_model, spec.build_qa())
    answers = answer_questions(spec, model, examples, load_static(spec.static, spec.static_sha256))
    text = "".join(json.dumps({"id": example.key, "answer": answer}, ensure_ascii=False) + "\n"
                   for example, answer in zip(examples, answers, strict=True))
    if args.output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    write_text_atomic(Path(args.output), text)
    print(f"wrote {len(answers)} answers to {args.output}", file=sys.stderr)
    return 0


def _predict(args: argparse.Namespace) -> int:
    """The input is read and checked before the task model's weights load (a biLM, when fine-tuned): a bad or
    empty input is told at once."""
    from elmo.tasks.pipeline import load_static, predict_examples, segmenter, text_tokenizer_of
    from elmo.tasks.spec import TaskSpec

    if args.output == "-":  # the usual name of standard output, not a file named "-"
        args.output = None
    if args.output is not None:
        check_output_file(args.output, "--output")
        check_not_an_input(args.output, [args.input], "--output")
        if Path(args.output).resolve().is_relative_to(Path(args.task_model).resolve()):
            raise ValueError(f"--output {args.output} is inside the task model {args.task_model}: writing it could "
                             "replace the model's own files; give a path outside it")
    spec = TaskSpec.read(args.task_model)
    if spec.kind == "qa":
        return _predict_qa(spec, args)
    texts: list[str] = []  # a classifier's inputs, one per input line, written back beside its labels
    if spec.kind == "tagger":
        sentences = read_tagged(args.input, require_tags=False)
        _require_input(args.input, len(sentences), "sentences to tag")
        examples = tagging_examples(sentences, segmenter(spec.segment))
    else:
        texts = _texts_to_classify(args.input, spec.labels)
        _require_input(args.input, sum(1 for text in texts if text), "texts to classify")
        # The label is a placeholder: prediction reads no targets.
        examples = classification_examples([(spec.labels[0], text) for text in texts if text],
                                           text_tokenizer_of(spec.bilm_model), spec.max_words)
    model = spec.load_weights(args.task_model, spec.build_labeller())
    guesses = predict_examples(spec, model, examples, load_static(spec.static, spec.static_sha256))
    if spec.kind == "classifier":  # a blank line's label is empty, so output line i answers input line i
        guessed = iter(guesses)
        guesses = [next(guessed) if text else "" for text in texts]
    _write_predictions(spec.kind, examples, guesses, texts, args.output)
    if args.output:
        print(f"wrote {len(examples)} predictions to {args.output}", file=sys.stderr)
    return 0


def _require_input(path: str, count: int, items: str) -> None:
    """ValueError for an --input with nothing to predict (empty, or blank lines only), as `task train` refuses
    an empty split: writing no predictions and exiting 0 looked like success."""
    if count == 0:
        raise ValueError(f"--input {path} holds no {items} (it is empty or blank); nothing to predict")


def _write_predictions(kind: str, examples: list, guesses: list, texts: list[str], output: str | None) -> None:
    """To ``output`` whole or not at all (a failed run leaves no half file), or to ``sys.stdout``: a
    redirected standard output is written to, never reopened by name (which truncated it)."""

    def write(path: Path) -> None:
        if kind == "tagger":
            write_tagged(path, [(example.tokens, tags) for example, tags in zip(examples, guesses, strict=True)])
        else:
            write_labelled(path, list(zip(guesses, texts, strict=True)))

    if output is not None:
        with atomic_path(Path(output)) as temporary:
            write(temporary)
        return
    with tempfile.TemporaryDirectory() as folder:  # the writers take a path
        path = Path(folder) / "predictions"
        write(path)
        sys.stdout.write(path.read_text(encoding="utf-8"))
        sys.stdout.flush()


def _texts_to_classify(path: str, labels: Sequence[str]) -> list[str]:
    """The text of each line, "" for a blank one, of ``label TAB text`` lines (every non-blank line starts with
    one of the model's ``labels`` and a tab; the labels are ignored) or of plain text lines (none does, and none
    holds a tab). A file of both is refused, naming a line of each kind, rather than read with labels inside the
    texts, and so is a plain line with a tab (a tagger's CoNLL file, or labels of another model: their fields
    would be classified as one text)."""
    lines = text_lines(check_input_file(path, "text"))
    numbered = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    known = set(labels)
    labelled = [number for number, line in numbered
                if "\t" in line and line.partition("\t")[0].strip() in known]
    if not labelled:
        tabbed = next(((number, line) for number, line in numbered if "\t" in line), None)
        if tabbed is not None:
            number, line = tabbed
            raise ValueError(f"{path}: line {number} holds a tab, but {line.partition(chr(9))[0].strip()[:40]!r} "
                             f"before it is no label of the model ({', '.join(sorted(known))}): give plain text "
                             "lines, or 'label<TAB>text' with the model's labels (a tagger's CoNLL file?)")
        return [line.strip() for line in lines]
    if len(labelled) == len(numbered):
        texts = iter(text for _, text in read_labelled(path))  # its rows: the non-blank lines
        return [next(texts) if line.strip() else "" for line in lines]
    labelled_numbers = set(labelled)
    plain = next(number for number, _ in numbered if number not in labelled_numbers)
    raise ValueError(f"{path}: line {labelled[0]} starts with a label of the model and a tab, line {plain} does "
                     f"not (labels: {', '.join(sorted(known))}); give every line as 'label<TAB>text' or none")


def add_subcommands(commands: argparse._SubParsersAction) -> None:
    task = commands.add_parser("task", help="train or apply a task model (tagger, classifier, qa) on ELMo "
                                            "features")
    task_commands = task.add_subparsers(dest="task_command", required=True, metavar="TASK_COMMAND")

    train = task_commands.add_parser("train", help="train on cached biLM layers, early-stopped on --dev, "
                                                   "scored on --test")
    train.add_argument("kind", choices=TASK_KINDS,
                       help="tagger: CoNLL token<TAB>tag files (BIO; BMES/BIOES converted); "
                            "classifier: label<TAB>text files; qa: JSON lines of id, question, passage, "
                            "answers [{text, start}]")
    train.add_argument("--train", required=True, help="training split (the task's file format, docs/results.md)")
    train.add_argument("--dev", required=True, help="development split: early stopping and model choice")
    train.add_argument("--test", required=True, help="test split, scored once at the end")
    train.add_argument("--model", required=True, help="biLM directory or shipped name (en, zh); its tokenizer "
                                                      "splits classification text")
    train.add_argument("--out", required=True,
                       help="directory for task.json, model.safetensors, metrics.json, replaced whole when the "
                            "model is saved (a failed or interrupted run leaves the old model, and the feature "
                            "cache); refused if it holds other files")
    train.add_argument("--elmo", choices=("mix", "top", "none"), default="mix",
                       help="learned scalar mix of all layers (default), the top layer, or no ELMo")
    train.add_argument("--static", default="none", help="static word vectors: none (default), glove, or an .npz "
                                                        "written by StaticVectors.save (e.g. word2vec; task.json "
                                                        "records its absolute path and sha256, and predict "
                                                        "refuses another file there)")
    train.add_argument("--segment", choices=SEGMENTERS, default=None,
                       help="tagger tokens are characters; the biLM reads the words this segmenter makes")
    train.add_argument("--max-words", type=positive_int, default=None,
                       help="cut classification texts to this many words")
    train.add_argument("--cache", type=Path, default=None, help="feature cache directory (default: OUT/features)")
    train.add_argument("--seed", type=whole_number(0, MAX_SEED), default=TrainOptions.seed,
                       help=f"seeds initialization, order, dropout (at most {MAX_SEED:,})")
    train.add_argument("--epochs", type=whole_number(1, MAX_EPOCHS), default=TrainOptions.max_epochs,
                       help=f"at most this many epochs (at most {MAX_EPOCHS:,})")
    train.add_argument("--patience", type=whole_number(1, MAX_EPOCHS), default=TrainOptions.patience,
                       help=f"stop after this many epochs without a better dev (at most {MAX_EPOCHS:,})")
    train.add_argument("--min-epochs", type=whole_number(1, MAX_EPOCHS), default=TrainOptions.min_epochs,
                       help=f"never stop early before this epoch (at most {MAX_EPOCHS:,})")
    train.add_argument("--batch-size", type=whole_number(1, MAX_BATCH_SIZE), default=TrainOptions.batch_size,
                       help=f"examples per step (at most {MAX_BATCH_SIZE:,})")
    train.add_argument("--lr", type=positive_float, default=TrainOptions.learning_rate, help="Adam learning rate")
    train.add_argument("--hidden", type=whole_number(1, MAX_HIDDEN), default=HIDDEN,
                       help=f"BiLSTM cells per direction, at most {MAX_HIDDEN:,}; a Transformer encoder is 2 * HIDDEN "
                            "wide")
    train.add_argument("--encoder", choices=ENCODER_KINDS, default=ENCODER,
                       help="the contextual encoder over the token features (elmo.tasks.encoders)")
    train.add_argument("--encoder-layers", type=whole_number(1, MAX_ENCODER_LAYERS), default=ENCODER_LAYERS,
                       help=f"transformer: self-attention blocks (at most {MAX_ENCODER_LAYERS})")
    train.add_argument("--encoder-heads", type=whole_number(1, MAX_ENCODER_HEADS), default=ENCODER_HEADS,
                       help=f"transformer: attention heads, at most {MAX_ENCODER_HEADS:,} (2 * HIDDEN must be "
                            "divisible by them)")
    train.add_argument("--dropout", type=dropout_rate, default=DROPOUT,
                       help="dropout on the features and on the encoder's output (a Transformer encoder keeps "
                            "PyTorch's 0.1 inside its blocks)")
    train.add_argument("--mix-l2", type=non_negative_float, default=MIX_L2,
                       help="weight of ||softmax(s) - 1/L||^2 (the paper's 0.001, read on the softmax weights; bilm-tf "
                            "puts it on the raw s)")
    train.add_argument("--fine-tune", action="store_true",
                       help="train the biLM along with the task model (no cache; much slower)")
    train.add_argument("--max-answer-tokens", type=positive_int, default=MAX_ANSWER_TOKENS,
                       help="qa: the longest answer span decoded, in tokens")
    train.add_argument("--passage-only", action="store_true",
                       help="qa: a diagnostic model that never reads the question (no attention flow)")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.set_defaults(func=_train, extra="tasks", train_parser=train)

    predict = task_commands.add_parser("predict", help="tag, classify or answer a file with a trained task "
                                                       "model")
    predict.add_argument("task_model", help="directory written by `elmo task train`")
    predict.add_argument("--input", required=True, help="tagger: CoNLL file, one token a line (other columns "
                                                        "optional, ignored); "
                                                        "classifier: text lines without tabs, or label<TAB>text "
                                                        "lines (read as labelled when every line starts with one "
                                                        "of the model's labels and a tab), answered line for line "
                                                        "(a blank line with an empty label); "
                                                        "qa: JSON lines of id, question, passage (answers, "
                                                        "if any, not read), answered as JSON lines of id, answer")
    predict.add_argument("--output", default=None, help="file to write the predictions to (default, or -: "
                                                        "standard output)")
    predict.set_defaults(func=_predict, extra="tasks")
