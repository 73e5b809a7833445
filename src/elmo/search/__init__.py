"""Contextual nearest neighbours: index every token of a corpus, find the uses of a word nearest to its use in
a sentence, contrast them with static vectors, and cluster a word's uses into senses. See docs/search.md."""

from elmo.search.index import (
    AnnOptions,
    ContextIndex,
    IndexReport,
    Occurrence,
    build_ann,
    build_index,
    exact_search,
)
from elmo.search.neighbors import Neighbor
from elmo.search.senses import Senses, plot_senses, senses

__all__ = [
    "AnnOptions",
    "ContextIndex",
    "IndexReport",
    "Neighbor",
    "Occurrence",
    "Senses",
    "build_ann",
    "build_index",
    "exact_search",
    "plot_senses",
    "senses",
]
