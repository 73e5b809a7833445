"""elmo.datasets.domain_sources on a small wheel in ScanCode's layout (``licensedcode/data/licenses/KEY.LICENSE``,
YAML front matter then the text)."""

import zipfile
from pathlib import Path
from string import ascii_lowercase

from elmo.datasets import CORPORA, SOURCES, heldout_split
from elmo.datasets.domain_sources import license_family, parse_license_file, read_scancode_licenses

SHARED = "The software is provided without any warranty of merchantability or fitness."


def _family_in(split: str) -> str:
    """A family name (letters only: a digit would start its version) whose licenses fall in ``split``."""
    names = (f"fam{first}{second}" for first in ascii_lowercase for second in ascii_lowercase)
    return next(name for name in names if heldout_split(f"license-family:{name}") == split)


def _license(key: str, text: str, **fields: str) -> tuple[str, bytes]:
    front = "".join(f"{name}: {value}\n" for name, value in {"key": key, **fields}.items())
    return f"licensedcode/data/licenses/{key}.LICENSE", f"---\n{front}---\n\n{text}\n".encode()


def test_license_family_drops_versions_and_variants():
    assert license_family("gpl-2.0-plus") == "gpl"
    assert license_family("cc-by-sa-4.0") == "cc-by-sa"
    assert license_family("bsd-new") == "bsd-new"
    assert license_family("0bsd") == "0bsd"


def test_parse_license_file_reads_top_level_fields_and_the_text():
    meta, body = parse_license_file("---\nkey: mit\nlanguage: en\nother_urls:\n    - https://x\n---\n\nMIT License\n")
    assert meta == {"key": "mit", "language": "en", "other_urls": ""}
    assert body.strip() == "MIT License"


def test_reader_keeps_english_prose_shares_a_split_per_family_and_keeps_held_out_sentences_out_of_training(
    tmp_path: Path,
):
    test_family, train_family = _family_in("test"), _family_in("train")
    members = dict([
        _license(f"{test_family}-1.0", f"Permission is granted to copy this work.\n\n{SHARED}"),
        _license(f"{test_family}-2.0", f"Permission is granted to copy and modify this work.\n\n{SHARED}"),
        _license(f"{train_family}-1.0", f"You may redistribute the work under these terms.\n\n{SHARED}\n\n"
                                         "THIS NOTICE IS WRITTEN IN CAPITALS AND IS DROPPED."),
        _license(f"{train_family}-de", "Die Software wird ohne jede Garantie bereitgestellt, wie sie ist.",
                 language="de"),
        _license("unknown-text", "An unknown license whose text is a placeholder here.", is_unknown="yes"),
    ])
    wheel = tmp_path / "scancode.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in {**members, "licensedcode/data/rules/x.RULE": b"---\n---\nnot a license text\n"}.items():
            archive.writestr(name, data)

    by_family: dict[str, list[tuple[str, ...]]] = {}
    for passage in read_scancode_licenses(wheel):
        by_family.setdefault(passage.key, []).append(passage.sentences)

    assert by_family == {
        f"license-family:{test_family}": [("Permission is granted to copy this work.", SHARED),
                                          ("Permission is granted to copy and modify this work.",)],  # SHARED once
        # SHARED is in a held-out license; the capitals, the German text and the placeholder are dropped.
        f"license-family:{train_family}": [("You may redistribute the work under these terms.",)],
    }


def test_the_licenses_corpus_is_registered_with_the_en_tokenizer():
    corpus = CORPORA["en-licenses"]
    assert corpus.sources == ("scancode-licenses",) and corpus.default_tokenizer == "english"
    assert SOURCES["scancode-licenses"].archive.sha256 == (
        "327d20a0de71d49930d8a6919c2b6d54c2acf4dd0a1d48da9a71dd4ce7b97b78")
