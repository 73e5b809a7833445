"""Contextual nearest neighbours: index every token of a corpus, find the uses of a word nearest to its use in
a sentence, contrast them with static vectors, and cluster a word's uses into senses. See docs/search.md.

Modules, in the order data flows: ``layout`` (the on-disk format), ``ann`` (faiss and exact re-ranking),
``build`` (writing an index), ``index`` (reading one), ``neighbors`` and ``senses`` (querying it); ``model`` is
what they ask of an embedder and ``errors`` the one error they raise. A word is matched to tokens by
``elmo.tokenizers.word_key``.

Needs the ``search`` extra (faiss, scikit-learn, matplotlib, pyarrow), checked when a name is first used.
"""

from typing import TYPE_CHECKING

from elmo.lazy import lazy_exports

__all__ = [
    "AnnOptions",
    "ContextIndex",
    "IndexReport",
    "LayerEmbedder",
    "Neighbor",
    "Occurrence",
    "SearchError",
    "Senses",
    "build_ann",
    "build_index",
    "exact_search",
    "neighbors",
    "plot_senses",
    "senses",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "elmo.search.ann": ("AnnOptions", "build_ann", "exact_search"),
    "elmo.search.build": ("IndexReport", "build_index"),
    "elmo.search.errors": ("SearchError",),
    "elmo.search.index": ("ContextIndex", "Occurrence"),
    "elmo.search.model": ("LayerEmbedder",),
    "elmo.search.neighbors": ("Neighbor", "neighbors"),
    "elmo.search.senses": ("Senses", "plot_senses", "senses"),
}, extra="search")

if TYPE_CHECKING:
    from elmo.search.ann import AnnOptions, build_ann, exact_search
    from elmo.search.build import IndexReport, build_index
    from elmo.search.errors import SearchError
    from elmo.search.index import ContextIndex, Occurrence
    from elmo.search.model import LayerEmbedder
    from elmo.search.neighbors import Neighbor, neighbors
    from elmo.search.senses import Senses, plot_senses, senses
