"""The search subcommands: ``index``, ``neighbors``, ``senses``.

``add_subcommands`` registers them on the ``elmo`` command's subparsers; `elmo.cli.main` checks the ``search``
extra before they start and turns bad input (ValueError, FileNotFoundError) into a one-line error without a
traceback.
"""

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from elmo.command_line import (
    MAX_THREADS,
    device,
    non_negative_int,
    positive_int,
    thread_count,
    whole_number,
)
from elmo.search.ann import MAX_NPROBE, AnnOptions  # numpy only: faiss loads at the first index built or read
from elmo.search.senses import MAX_OCCURRENCES
from elmo.stop_signals import interruptible
from elmo.tokenizers import TOKENIZERS, clean_text

STATIC_K = 10  # nearest words by static vectors that elmo neighbors shows

if TYPE_CHECKING:
    from elmo.layer_choice import LayerChoice


def _layer(value: str) -> "LayerChoice":
    """An argparse type: a layer index, ``top`` or ``average`` (``elmo.layer_choice``), checked as the command
    line is read."""
    from elmo.layer_choice import stored_layer_argument

    return stored_layer_argument(value)


def _index(args: argparse.Namespace) -> int:
    import torch

    from elmo.embedder import Embedder
    from elmo.search.ann import AnnOptions
    from elmo.search.build import build_index, check_corpus
    from elmo.search.layout import partial_directory

    check_corpus(Path(args.corpus))  # before the model loads; build_index checks it again
    _check_index_options(args)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        with interruptible():
            embedder = Embedder.load(args.model, tokenizer=args.tokenizer, device=args.device)
            ann = AnnOptions(factory=args.factory, nprobe=args.nprobe)
            report = build_index(args.corpus, args.out, embedder, layers=args.layer, words_only=args.words_only,
                                 batch_size=args.batch_size, resume=args.resume, progress=not args.quiet, ann=ann,
                                 model_name=args.model)
    except KeyboardInterrupt as interrupt:
        if partial_directory(args.out).exists():
            interrupt.add_note("run the same command with --resume to continue after its last checkpoint")
        raise
    resumed = f" (resumed: {report.resumed_from} lines already done)" if report.resumed_from else ""
    factories = ", ".join(f"{layer}: {factory}" for layer, factory in report.factories.items())
    print(f"indexed {report.indexed_tokens:,} of {report.tokens:,} tokens in {report.sentences:,} sentences "
          f"({report.words:,} word types; {factories}) -> {args.out}{resumed}")
    return 0


def _check_index_options(args: argparse.Namespace) -> None:
    """``build_index``'s checks of --out, --factory, --layer and --words-only, made before the model loads: its
    options.json gives the vector width and the layer count without the weights. ``build_index`` makes them
    again (a library caller gets them all the same)."""
    from elmo.config import BiLMConfig
    from elmo.model_dir import ModelDir
    from elmo.search.build import check_index_options

    config = BiLMConfig.load(ModelDir.find(args.model).options_file)
    check_index_options(Path(args.out), args.layer, config.n_output_layers, config.output_dim, args.factory,
                        args.words_only)


def _neighbors(args: argparse.Namespace) -> int:
    from elmo.search.index import ContextIndex
    from elmo.search.neighbors import neighbors

    if args.json and (args.glove or args.static_k is not None):
        given = "--glove" if args.glove else "--static-k"
        raise ValueError(f"{given} adds the nearest words by static vectors to the printed table; --json prints the "
                         "neighbours only: leave one of them out")
    static_k = STATIC_K if args.static_k is None else args.static_k
    index = ContextIndex.load(args.index)
    found = neighbors(index, args.sentence, args.word, k=args.k, layer=args.layer, same_word=args.same_word,
                      exact=args.exact, occurrence=args.occurrence)
    if args.json:
        print(json.dumps([neighbor.to_json() for neighbor in found], ensure_ascii=False, indent=2))
        return 0
    start, end = ("\033[1;4m", "\033[0m") if sys.stdout.isatty() else ("[", "]")
    restriction = f" (only {args.word!r})" if args.same_word else ""
    print(f"{args.word!r} in {args.sentence!r}: nearest {len(found)} uses in {index.meta['n_indexed']:,} indexed "
          f"tokens, {index.layer(args.layer)}{restriction}; corpus lines counted from 0")
    for neighbor in found:
        print(f"  {neighbor.score:6.3f}  line {neighbor.line}: {neighbor.highlighted(start, end)}")
    form = index.vocabulary_form(args.word)
    if form is not None:
        lines = _table(f"nearest words to {form!r} under the model's layer 0 (no context):",
                       index.static_vectors.nearest(form, static_k))
        print("\n".join(["", *lines]))
    else:
        print(f"\nno layer-0 neighbours: the corpus's vocabulary lacks {args.word!r}")
    if args.glove:
        from elmo.static_vectors import StaticVectors

        glove = StaticVectors.glove()
        word = clean_text(args.word).strip()  # as the corpus and the index read it (GloVe lowercases it)
        if word in glove:
            lines = _table(f"nearest words to {word!r} under GloVe 6B 50d:", glove.nearest(word, static_k))
            print("\n".join(["", *lines]))
        else:
            print(f"\nGloVe 6B 50d has no vector for {word!r}")
    return 0


def _table(title: str, rows: Sequence[tuple[str, float]]) -> list[str]:
    """A titled list of ``score  text`` lines."""
    return [title, *(f"  {score:6.3f}  {text}" for text, score in rows)]


def _senses(args: argparse.Namespace) -> int:
    from elmo.search.index import ContextIndex
    from elmo.search.senses import occurrences_text, plot_senses, png_path, senses, silhouette_text

    png_path(args.out)  # before the clustering
    result = senses(ContextIndex.load(args.index), args.word, clusters=args.clusters, layer=args.layer,
                    max_occurrences=args.max_occurrences)
    plot_senses(result, args.out)
    print(f"{args.word!r}: {occurrences_text(result)}, {len(result.sizes)} clusters "
          f"({silhouette_text(result)}) -> {args.out}; corpus lines counted from 0")
    start, end = ("\033[1;4m", "\033[0m") if sys.stdout.isatty() else ("[", "]")  # which use, where a line has two
    for cluster, (size, example) in enumerate(zip(result.sizes, result.examples, strict=True)):
        print(f"  sense {cluster + 1} ({size}): line {example.line}: {example.highlighted(start, end)}")
    return 0


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    index = subparsers.add_parser("index", help="embed every token of a corpus into a nearest-neighbour index")
    index.add_argument("corpus", help="text file, one sentence a line")
    index.add_argument("--model", default="en", help="model directory or shipped model name (default: en)")
    index.add_argument("--tokenizer", choices=sorted(TOKENIZERS),
                       help="how corpus lines and later queries are split (default: the model's tokenizer)")
    index.add_argument("--out", required=True, type=Path, help="index directory to write")
    index.add_argument("--layer", action="append", type=_layer, default=None, metavar="N|top|average",
                       help="layer to index, repeatable (default: the top layer)")
    index.add_argument("--words-only", type=Path, help="index only the words in this file (one a line, any case)")
    index.add_argument("--batch-size", type=positive_int, default=32, help="sentences run at once")
    index.add_argument("--device", type=device, default=None, help="cpu, cuda, cuda:1, ... (default: cpu)")
    index.add_argument("--threads", type=thread_count, default=None,
                       help=f"torch CPU threads, at most {MAX_THREADS:,} (default: torch's choice)")
    index.add_argument("--factory", default=None,
                       help="faiss index_factory string (default: IVF-PQ sized to the corpus, Flat below 20k tokens)")
    index.add_argument("--nprobe", type=whole_number(1, MAX_NPROBE), default=AnnOptions().nprobe,
                       help="inverted lists searched per query; more than the index has searches them all")
    index.add_argument("--resume", action="store_true", help="continue an interrupted run of the same command")
    index.add_argument("--quiet", action="store_true", help="no progress bar")
    index.set_defaults(func=_index, extra="search")

    neighbors = subparsers.add_parser("neighbors", help="uses in an indexed corpus nearest to a word in a sentence")
    neighbors.add_argument("--index", required=True, type=Path, help="index directory from `elmo index`")
    neighbors.add_argument("--sentence", required=True, help="the sentence the word is used in")
    neighbors.add_argument("--word", required=True, help="the word (a token of the sentence, any case)")
    neighbors.add_argument("--occurrence", type=non_negative_int, default=0,
                           help="which use of the word in the sentence (0-based)")
    neighbors.add_argument("--k", type=positive_int, default=10, help="how many neighbours to print")
    neighbors.add_argument("--layer", type=_layer, default=None,
                           help="an indexed layer (default: the first the index holds)")
    neighbors.add_argument("--same-word", action="store_true", help="only uses of the same word (the paper's table)")
    neighbors.add_argument("--exact", action="store_true", help="brute force instead of the ANN index")
    neighbors.add_argument("--json", action="store_true",
                           help='print [{"sentence", "token_index", "token", "score"}, ...] only')
    neighbors.add_argument("--glove", action="store_true", help="also show GloVe 6B 50d's nearest words")
    neighbors.add_argument("--static-k", type=positive_int, default=None,
                           help=f"nearest words shown for the static vectors (default: {STATIC_K})")
    neighbors.set_defaults(func=_neighbors, extra="search")

    senses = subparsers.add_parser("senses", help="cluster a word's uses in an indexed corpus into senses (PNG)")
    senses.add_argument("word", help="the word whose uses are clustered into senses")
    senses.add_argument("--index", required=True, type=Path, help="index directory from `elmo index`")
    senses.add_argument("--clusters", type=positive_int, default=None,
                        help="number of senses (default: best silhouette)")
    senses.add_argument("--layer", type=_layer, default=None,
                        help="an indexed layer (default: the first the index holds)")
    senses.add_argument("--max-occurrences", type=whole_number(3), default=MAX_OCCURRENCES,
                        help="a random sample if there are more (at least 3)")
    senses.add_argument("--out", required=True, type=Path, help="PNG to write (a name ending in .png)")
    senses.set_defaults(func=_senses, extra="search")
