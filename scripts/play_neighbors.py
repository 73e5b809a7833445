"""The paper's "play" table on the shipped en corpus: the nearest uses of "play" to a sports use and to a theatre use.

    python scripts/play_neighbors.py [--corpus data/en/train.txt] [--work /tmp/play-index]

Both query sentences are the paper's, and both are in the Brown part of the en corpus (the paper's corpus,
SemCor, is part of Brown), so each is left out of its own neighbours. Only the corpus lines that hold "play" are
indexed. Same-word neighbours are the same as in an index of the whole corpus, because each sentence is embedded
on its own.

The sports uses of the noun in the corpus were picked out by reading every line that holds "play" (below). The
script prints each query's 5 nearest uses per layer, and how the uses in the sports lines rank among all uses (a
line may hold "play" more than once: ranks count uses, every one of them ranked).
"""

import argparse
import shutil
from pathlib import Path

from elmo import Embedder
from elmo.search import ContextIndex, build_index, neighbors
from elmo.search.layout import partial_directory

SPORTS_QUERY = "Chico Ruiz made a spectacular play on Alusik 's grounder"
THEATRE_QUERY = "Olivia De Havilland signed to do a Broadway play for Garson Kanin"
# Lines where "play" is a move or the action in a game or sport (read by hand; 16 of the index's 280 lines
# that hold "play").
SPORTS_USES = (
    "where the play of the game follows", "with each play beginning", "into the field of play",
    "timed play stops", "If regulation play expires", "at the end of play wins", "league or tournament play",
    "style of play , Lomu", "a fast double play", "final play , was a long pass", "the second play of the game",
    "I 'll put that play in the book", "some good infield play", SPORTS_QUERY, "all-round excellent play",
    "he squirms with each play",
)
LAYERS = ("layer1", "layer2", "average")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("data/en/train.txt"),
                        help="the en train.txt (python -m elmo.datasets prepare en --out data/en)")
    parser.add_argument("--work", type=Path, default=Path("data/play-index"))
    args = parser.parse_args()
    lines = [line for line in args.corpus.read_text(encoding="utf-8").splitlines()
             if "play" in line.casefold().split()]
    missing = [use for use in SPORTS_USES if not any(use in line for line in lines)]
    if missing:
        raise SystemExit(f"{args.corpus} is not the en corpus: no line holds {missing[0]!r}")
    args.work.mkdir(parents=True, exist_ok=True)
    subset, text = args.work / "play-lines.txt", "\n".join(lines) + "\n"
    # An index is reused only for the same lines (its hits name lines by number, and `sports` numbers these
    # lines) and the same model (a later shipped en is another model); an interrupted build of them is resumed.
    index_dir = args.work / "index"
    en = Embedder.load("en")
    built_by_another_model = index_dir.is_dir() and ContextIndex.load(index_dir).meta["fingerprint"] != en.fingerprint
    if built_by_another_model or not subset.is_file() or subset.read_text(encoding="utf-8") != text:
        for stale in (index_dir, partial_directory(index_dir)):
            shutil.rmtree(stale, ignore_errors=True)
        subset.write_text(text, encoding="utf-8")
    if not index_dir.is_dir():
        build_index(subset, index_dir, "en", layers=[1, 2, "average"], resume=True, progress=False)
    index = ContextIndex.load(index_dir, embedder=en)  # the model loaded above answers the queries
    sports = {number for number, line in enumerate(lines) if any(use in line for use in SPORTS_USES)}
    queries = {"sports": next(line for line in lines if SPORTS_QUERY in line),
               "theatre": next(line for line in lines if THEATRE_QUERY in line)}
    uses = len(index.rows_of("play"))
    print(f"{uses} uses of 'play' in {len(lines)} lines; {len(sports)} of the lines use it in the sports sense (read "
          "by hand)\n")
    for layer in LAYERS:
        for name, query in queries.items():
            ranked = neighbors(index, query, "play", k=uses, layer=layer, same_word=True, exact=True)
            ranks = [rank for rank, hit in enumerate(ranked, start=1) if hit.line in sports]
            print(f"{layer}, {name} query: uses in sports lines among the nearest 10: {sum(r <= 10 for r in ranks)}; "
                  f"the mean rank of those {len(ranks)} uses {sum(ranks) / len(ranks):.0f} of {len(ranked)}")
            for hit in ranked[:5]:
                mark = "sports " if hit.line in sports else "       "
                print(f"  {hit.score:.3f} {mark}{hit.highlighted()[:110]}")
        print()


if __name__ == "__main__":
    main()
