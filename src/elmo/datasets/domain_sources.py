"""Domain corpora: text of one field, for adapting a general model (``elmo train --init-from en``) and for
measuring what the adaptation does (docs/domain.md).

``en-licenses``: the English license texts that ScanCode ships as its reference data (2,574 licenses: open
source, proprietary, commercial EULAs, CLAs, patent grants), a legal domain of about 1.4 M words after the
cleaning below. No biomedical or clinical running text was found in any registry package (docs/domain.md
lists what was looked at).

Importing this module adds the source to ``sources.SOURCES`` and the corpus to ``prepare.CORPORA``
(``elmo.datasets`` imports it), so ``python -m elmo.datasets prepare en-licenses --out DIR`` writes it.
"""

import re
from collections.abc import Iterator
from pathlib import Path

from elmo.datasets.archives import PinnedArchive
from elmo.datasets.large_sources import blank_line_paragraphs, english_sentences
from elmo.datasets.prepare import CORPORA, MODEL_CORPORA, ModelCorpus, heldout_split, text_key
from elmo.datasets.sources import SOURCES, Passage, Source, iter_members, split_english_sentences

# A wheel tagged cp311: pip downloads it for Python 3.11 only; elsewhere only a cached copy verifies.
SCANCODE = PinnedArchive("pypi", "scancode-toolkit", "32.5.0", "scancode_toolkit-32.5.0-cp311-none-any.whl",
                         "327d20a0de71d49930d8a6919c2b6d54c2acf4dd0a1d48da9a71dd4ce7b97b78")
SCANCODE_LICENSE_FILE = re.compile(r"licensedcode/data/licenses/([^/]+)\.LICENSE")
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

    License texts copy each other (versions, variants, the same disclaimer in hundreds of licenses): a sentence
    of 20 or more characters is kept once per split, in its first license, and a training sentence that a
    held-out license also has is dropped, so the held-out text is not trained on under another license's name.
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
    held_out = {text_key(sentence) for family, sentences in licenses if heldout_split(family) != "train"
                for sentence in sentences}
    seen: dict[str, set[str]] = {"train": set(), "valid": set(), "test": set()}
    for family, sentences in licenses:
        split = heldout_split(family)
        kept = []
        for sentence in sentences:
            key = text_key(sentence)
            if len(key) >= DEDUPE_MIN_CHARS:
                if key in seen[split] or (split == "train" and key in held_out):
                    continue
                seen[split].add(key)
            kept.append(sentence)
        if kept:
            yield Passage(family, tuple(kept))


SOURCES["scancode-licenses"] = Source(
    "scancode-licenses", "en", SCANCODE, "licensedcode/data/licenses/*.LICENSE (English texts)", SCANCODE_LICENSE,
    "license texts of ScanCode's license database: open source, proprietary, commercial, CLAs, patent grants",
    read_scancode_licenses)

DOMAIN_CORPORA: dict[str, ModelCorpus] = {
    # The en model's tokenizer and sentence splitter; the en tasks' evaluation text kept out as for en.
    "en-licenses": ModelCorpus("en-licenses", ("scancode-licenses",), MODEL_CORPORA["en"].excluded, ("english",),
                               split_english_sentences),
}
CORPORA.update(DOMAIN_CORPORA)
