"""Extractive QA examples and their file format.

A file holds one JSON object a line: ``{"id", "question", "passage", "answers": [{"text", "start"}]}``
(SQuAD's fields for one question, ``start`` a character offset into ``passage``); ``answers`` may be absent,
and is not read, when only predictions are wanted. Passage and question are split by the biLM's tokenizer after
``clean_text``, as the embedder reads them; each passage token is found back in the passage as the file holds it
(``passage_offsets``), so a predicted token span maps to the exact characters it covers, invisible formatting
and decomposed accents included, and a gold character span to the tokens that overlap it.
"""

import json
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from elmo.tasks.data import check_input_file, text_lines
from elmo.tokenizers import CONTROL_CHARACTERS, INVISIBLE_FORMATTING, clean_text


@dataclass(frozen=True)
class QAExample:
    """``question`` and ``passage`` as the file holds them; ``offsets[i]``: the characters ``[begin, end)`` of
    ``passage`` that ``passage_words[i]`` was read from; ``span``: the first gold answer as inclusive token
    indices (None without answers); ``answers``: every gold text."""

    key: str
    question: str
    passage: str
    question_words: tuple[str, ...]
    passage_words: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]
    answers: tuple[str, ...] = ()
    span: tuple[int, int] | None = None

    def answer_text(self, start: int, end: int) -> str:
        """The passage characters that tokens ``start..end`` (inclusive) cover."""
        return self.passage[self.offsets[start][0]:self.offsets[end][1]]


def token_offsets(text: str, words: Sequence[str]) -> list[tuple[int, int]]:
    """Where each word is in ``text``, searched left to right; ValueError when the tokenizer changed a word
    (then its characters cannot be given back)."""
    offsets, position = [], 0
    for word in words:
        begin = text.find(word, position)
        if begin < 0:
            raise ValueError(f"token {word!r} is not in the text after character {position} "
                             f"({text[position:position + 40]!r}...)")
        position = begin + len(word)
        offsets.append((begin, position))
    return offsets


def _cleaned_with_sources(text: str) -> tuple[str, list[tuple[int, int]]]:
    """``clean_text(text)`` and, for each of its characters, the characters ``[begin, end)`` of ``text`` it was
    made from: deleted formatting is in no range, and a character composed from a base and its marks (NFC)
    has the range of all of them. Text is composed a cluster at a time (a character and the marks, characters
    decomposing to marks, or jamo that follow it), which gives what composing it whole gives; ValueError if it ever
    does not."""
    clusters: list[tuple[int, int, str]] = []  # begin, end in text, characters before composing
    for index, character in enumerate(text):
        if INVISIBLE_FORMATTING.fullmatch(character):
            continue
        if CONTROL_CHARACTERS.fullmatch(character):
            character = " "
        if clusters and (_is_mark(character) or _composes(clusters[-1][2], character)):
            begin, _, characters = clusters[-1]
            clusters[-1] = (begin, index + 1, characters + character)
        else:
            clusters.append((index, index + 1, character))
    composed = [(unicodedata.normalize("NFC", characters), (begin, end)) for begin, end, characters in clusters]
    cleaned = "".join(characters for characters, _ in composed)
    if cleaned != clean_text(text):
        raise ValueError(f"the characters of {text[:40]!r}... cannot be matched to the text clean_text reads")
    return cleaned, [source for characters, source in composed for _ in characters]


def _is_mark(character: str) -> bool:
    """Whether ``character`` begins with a combining mark once decomposed (NFD), as composing sees it: besides the
    marks themselves, Tibetan U+0F73, U+0F75 and U+0F81, not combining but decomposing to marks, past which a later
    mark still composes with the character before them."""
    return unicodedata.combining(unicodedata.normalize("NFD", character)[0]) > 0


def _composes(cluster: str, character: str) -> bool:
    """Whether ``character`` changes when composed after ``cluster`` (a Hangul vowel after its consonant)."""
    nfc = unicodedata.normalize
    return nfc("NFC", cluster + character) != nfc("NFC", cluster) + nfc("NFC", character)


def passage_offsets(text: str, words: Sequence[str]) -> list[tuple[int, int]]:
    """The characters ``[begin, end)`` of ``text`` that each word was read from, the words being split from
    ``clean_text(text)``: a span covers the formatting characters and marks inside its word, none around it."""
    cleaned, sources = _cleaned_with_sources(text)
    return [(sources[begin][0], sources[end - 1][1]) for begin, end in token_offsets(cleaned, words)]


def answer_span(offsets: Sequence[tuple[int, int]], start: int, length: int) -> tuple[int, int] | None:
    """The inclusive token span that overlaps characters ``[start, start + length)``, None if no token does."""
    covered = [i for i, (begin, end) in enumerate(offsets) if begin < start + length and end > start]
    return (covered[0], covered[-1]) if covered else None


def qa_example(row: dict, tokenize: Callable[[str], list[str]], with_answers: bool = True) -> QAExample:
    """One file row as an example; the first answer that lies in the passage gives the training span. Without
    ``with_answers`` (questions to answer) ``answers`` is not read, whatever it holds."""
    for field in ("id", "question", "passage"):
        if not isinstance(row.get(field), str) or not row[field].strip():
            raise ValueError(f"QA row {str(row)[:80]!r} needs a non-empty string {field!r}")
    passage_words = tokenize(clean_text(row["passage"]))
    question_words = tokenize(clean_text(row["question"]))
    if not passage_words or not question_words:
        raise ValueError(f"question {row['id']!r}: the tokenizer left no words in its question or passage")
    offsets = passage_offsets(row["passage"], passage_words)
    answers, span = [], None
    for text, start in _answers(row) if with_answers else ():
        if row["passage"][start:start + len(text)] != text:
            raise ValueError(f"question {row['id']!r}: answer {text!r} is not at character {start} of its passage")
        answers.append(text)
        if span is None:
            span = answer_span(offsets, start, len(text))
    return QAExample(row["id"], row["question"], row["passage"], tuple(question_words), tuple(passage_words),
                     tuple(offsets), tuple(answers), span)


def _answers(row: dict) -> list[tuple[str, int]]:
    """``row``'s answers as (text, start); none where ``answers`` is absent or null. ValueError naming the question
    and what is wrong where it is not a list of objects each with a non-empty string ``text`` and a whole-number
    ``start`` of 0 or more (a float or a boolean is no character offset)."""
    answers = row.get("answers")
    if answers is None:
        return []
    expected = "'answers' must be a list of objects {\"text\": string, \"start\": character offset}"
    if not isinstance(answers, list):
        raise ValueError(f"question {row['id']!r}: {expected}; got {json.dumps(answers, ensure_ascii=False)[:60]}")
    read = []
    for number, answer in enumerate(answers, start=1):
        where = f"question {row['id']!r}, answer {number}"
        if not isinstance(answer, dict):
            raise ValueError(f"{where}: {expected}; got {json.dumps(answer, ensure_ascii=False)[:60]}")
        text, start = answer.get("text"), answer.get("start")
        if not isinstance(text, str) or not text:
            raise ValueError(f"{where}: 'text' must be a non-empty string; got {json.dumps(text, ensure_ascii=False)}")
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise ValueError(f"{where}: 'start' must be a whole number of characters, 0 or more; got "
                             f"{json.dumps(start, ensure_ascii=False)}")
        read.append((text, start))
    return read


def read_qa(path: str | Path, tokenize: Callable[[str], list[str]], with_answers: bool = True) -> list[QAExample]:
    """The examples of a QA file; ValueError naming the line of a bad row (one that is no JSON object, or whose
    answers are malformed) or of a repeated id (answers and gold are matched by id, so a repeated one would score
    only its last question). Without ``with_answers`` (questions to answer) the answers are not read."""
    path = check_input_file(path, "JSON-lines QA")
    examples = []
    lines_of_ids: dict[str, int] = {}
    for number, line in enumerate(text_lines(path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not JSON ({error.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object {{\"id\", \"question\", \"passage\", "
                             f"\"answers\"}}, got {line.strip()[:60]}")
        try:
            example = qa_example(row, tokenize, with_answers)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}:{number}: {error}") from None
        if example.key in lines_of_ids:
            raise ValueError(f"{path}:{number}: duplicate id {example.key!r} (first on line "
                             f"{lines_of_ids[example.key]}); answers are matched to questions by id")
        lines_of_ids[example.key] = number
        examples.append(example)
    return examples


def write_qa(path: str | Path, rows: Sequence[dict]) -> None:
    Path(path).write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
