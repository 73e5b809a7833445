"""A model's training corpus: its sources, read, split into train/valid/test, cleaned of task test text, and
tokenized with the model's tokenizer into one-sentence-a-line files that the trainer reads as whitespace.

The held-out rule (documented in docs/data.md; later task splits rely on it): a passage's split depends only
on its key, ``sha256(NFKC, casefolded, whitespace-free key)``, first 8 bytes as a big-endian integer, modulo
1000: below 50 is ``test`` (5%), below 60 ``valid`` (1%), the rest ``train``. Identical text therefore always
lands in the same split, whatever source it comes from. Separately, any sentence equal (same key
normalization) to a sentence of a later task's evaluation text is dropped from every split.
"""

import hashlib
import json
import unicodedata
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from elmo.datasets.archives import fetch
from elmo.datasets.sources import SOURCES, Source, split_chinese_sentences, split_english_sentences
from elmo.tokenizers import get_tokenizer

SPLITS = ("train", "valid", "test")
BUCKETS = 1000
TEST_BUCKETS = 50
VALID_BUCKETS = 10


def text_key(text: str) -> str:
    """What "the same text" means for splits and exclusion: NFKC, casefolded, all whitespace removed (so
    tokenization and full-width digits do not matter)."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


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

    @property
    def default_tokenizer(self) -> str:
        return self.tokenizers[0]


MODEL_CORPORA: dict[str, ModelCorpus] = {
    "en": ModelCorpus("en", ("wikipedia-en", "brown"), ("wnut16", "movie-reviews"), ("english",),
                      split_english_sentences),
    "zh": ModelCorpus("zh", ("peoples-daily", "msra-train"), ("msra-test", "chinese-reviews"), ("jieba", "chars"),
                      split_chinese_sentences),
}

_TOKENIZER_PACKAGES = {"english": "sacremoses", "jieba": "jieba"}


def excluded_keys(corpus: ModelCorpus, cache: Path | None = None) -> tuple[set[str], dict[str, int]]:
    """Keys of every excluded text and of each of its sentences, and the number of texts per source."""
    keys: set[str] = set()
    n_texts: dict[str, int] = {}
    for name in corpus.excluded:
        source = SOURCES[name]
        n_texts[name] = 0
        for passage in source.read(fetch(source.archive, cache)):
            for text in passage.sentences:
                keys.add(text_key(text))
                keys.update(text_key(sentence) for sentence in corpus.split_sentences(text))
                n_texts[name] += 1
    keys.discard("")
    return keys, n_texts


def prepare(model: str, out_dir: Path, cache: Path | None = None, tokenizer: str | None = None,
            limit: int | None = None) -> dict[str, Any]:
    """Write ``train.txt``, ``valid.txt``, ``test.txt``, ``sources.json`` and ``SOURCES.md`` into ``out_dir``
    and return the report (counts per source and split). ``limit`` reads only the first passages of each
    source, for smoke runs."""
    if model not in MODEL_CORPORA:
        raise ValueError(f"unknown model corpus {model!r}; expected one of {sorted(MODEL_CORPORA)}")
    corpus = MODEL_CORPORA[model]
    tokenizer = tokenizer or corpus.default_tokenizer
    if tokenizer not in corpus.tokenizers:
        raise ValueError(f"the {model} corpus is tokenized with {' or '.join(corpus.tokenizers)}, not {tokenizer!r}")
    tokenize = get_tokenizer(tokenizer)
    exclude, n_excluded_texts = excluded_keys(corpus, cache)
    report_sources = []
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = {split: out_dir / f".{split}.txt.partial" for split in SPLITS}
    with ExitStack() as stack:
        handles = {split: stack.enter_context(path.open("w", encoding="utf-8")) for split, path in partial.items()}
        for name in corpus.sources:
            source = SOURCES[name]
            counts, dropped = _write_source(source, fetch(source.archive, cache), tokenize, exclude, handles, limit)
            report_sources.append({**_describe(source), "splits": counts, "dropped_as_task_text": dropped})
    for split, path in partial.items():  # only complete files get their final names
        path.replace(out_dir / f"{split}.txt")
    report = {
        "model": model, "tokenizer": tokenizer,
        "tokenizer_package": (f"{_TOKENIZER_PACKAGES[tokenizer]}=={version(_TOKENIZER_PACKAGES[tokenizer])}"
                              if tokenizer in _TOKENIZER_PACKAGES else None),
        "limit": limit, "sources": report_sources,
        "totals": {split: {field: sum(s["splits"][split][field] for s in report_sources)
                           for field in ("passages", "sentences", "tokens")} for split in SPLITS},
        "excluded": [{**_describe(SOURCES[name]), "texts": n_excluded_texts[name]} for name in corpus.excluded],
    }
    (out_dir / "sources.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out_dir / "SOURCES.md").write_text(sources_markdown(report), encoding="utf-8")
    return report


def _write_source(source: Source, archive_path: Path, tokenize: Callable[[str], list[str]], exclude: set[str],
                  handles: dict[str, Any], limit: int | None) -> tuple[dict[str, dict[str, int]], int]:
    counts = {split: Counter(passages=0, sentences=0, tokens=0) for split in SPLITS}
    dropped = 0
    for index, passage in enumerate(source.read(archive_path)):
        if limit is not None and index >= limit:
            break
        split = heldout_split(passage.key)
        counts[split]["passages"] += 1
        for sentence in passage.sentences:
            if text_key(sentence) in exclude:
                dropped += 1
                continue
            tokens = tokenize(sentence)
            if tokens:
                handles[split].write(" ".join(tokens) + "\n")
                counts[split]["sentences"] += 1
                counts[split]["tokens"] += len(tokens)
    return {split: dict(count) for split, count in counts.items()}, dropped


def _describe(source: Source) -> dict[str, str]:
    archive = source.archive
    return {"name": source.name, "package": f"{archive.registry}:{archive.spec}", "archive": archive.filename,
            "sha256": archive.sha256, "member": source.member, "license": source.license,
            "description": source.description}


def sources_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown tables (SOURCES.md and the model cards)."""
    lines = [f"Corpus `{report['model']}`, tokenized with `{report['tokenizer']}`"
             + (f" ({report['tokenizer_package']})" if report["tokenizer_package"] else "")
             + (f", first {report['limit']} passages of each source only" if report["limit"] else "") + ".", "",
             "| source | package | what | license | train tokens | valid tokens | test tokens | dropped |",
             "|---|---|---|---|---|---|---|---|"]
    for source in report["sources"]:
        tokens = [f"{source['splits'][split]['tokens']:,} ({source['splits'][split]['sentences']:,} sent.)"
                  for split in SPLITS]
        lines.append(f"| {source['name']} | `{source['package']}` `{source['member']}` | {source['description']} | "
                     f"{source['license']} | {' | '.join(tokens)} | {source['dropped_as_task_text']} |")
    totals = [f"{report['totals'][split]['tokens']:,} ({report['totals'][split]['sentences']:,} sent.)"
              for split in SPLITS]
    lines += [f"| **total** | | | | {' | '.join(totals)} | |", "",
              "Held out: a passage (Wikipedia article, Brown or People's Daily line, MSRA sentence) is `test` when "
              "sha256 of its NFKC-casefolded, whitespace-free key, first 8 bytes big-endian, modulo 1000 is below "
              "50, `valid` below 60 (`elmo.datasets.heldout_split`). *dropped*: sentences equal to a sentence of a "
              "later task's evaluation text, removed from every split. Never trained on:", ""]
    lines += [f"- {source['name']}: `{source['package']}` `{source['member']}`, {source['texts']:,} texts; "
              f"{source['license']}" for source in report["excluded"]]
    lines += ["", "Archives (sha256 checked before reading):", ""]
    archives = {(s["package"], s["archive"], s["sha256"]) for s in [*report["sources"], *report["excluded"]]}
    lines += [f"- `{package}` `{archive}` sha256 `{sha256}`" for package, archive, sha256 in sorted(archives)]
    return "\n".join(lines) + "\n"
