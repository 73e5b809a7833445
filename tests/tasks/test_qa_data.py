import itertools
import json

import pytest

from elmo.tasks.qa_data import answer_span, passage_offsets, qa_example, read_qa, token_offsets
from elmo.tokenizers import clean_text, get_tokenizer


def test_token_offsets_give_back_each_token_characters():
    text = "Seurat's  work (1884), in Paris."
    words = get_tokenizer("english")(text)
    offsets = token_offsets(text, words)
    assert [text[begin:end] for begin, end in offsets] == words
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(offsets))


def test_answer_span_covers_every_token_the_characters_touch():
    offsets = [(0, 3), (4, 9), (10, 12), (13, 18)]  # "The quick go-ahead" style layout
    assert answer_span(offsets, 4, 5) == (1, 1)
    assert answer_span(offsets, 5, 7) == (1, 2)  # starts inside token 1, ends inside token 2
    assert answer_span(offsets, 3, 1) is None  # only the space between tokens 0 and 1


def test_a_row_maps_its_character_answer_to_tokens_and_back():
    passage = "Anna Karenina was written by Leo Tolstoy in 1878."
    row = {"id": "q", "question": "Who wrote it?", "passage": passage,
           "answers": [{"text": "Leo Tolstoy", "start": passage.index("Leo")}]}
    example = qa_example(row, get_tokenizer("english"))
    assert example.passage_words[example.span[0]:example.span[1] + 1] == ("Leo", "Tolstoy")
    assert example.answer_text(*example.span) == "Leo Tolstoy"


def test_an_answer_not_at_its_stated_offset_is_refused_with_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "q", "question": "x?", "passage": "a b c",
                                "answers": [{"text": "b", "start": 0}]}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: .*not at character 0"):
        read_qa(path, str.split)


@pytest.mark.parametrize(("line", "expected"), [
    ('"just a string"', 'expected a JSON object {"id", "question", "passage", "answers"}, got "just a string"'),
    ("[1, 2]", 'expected a JSON object {"id", "question", "passage", "answers"}, got [1, 2]'),
])
def test_a_line_that_is_json_but_no_object_is_refused_naming_its_line(tmp_path, line, expected):
    """It raised AttributeError ('str' object has no attribute 'get'), a traceback naming no file."""
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"id": "q", "question": "x?", "passage": "a b c"}) + f"\n{line}\n", encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        read_qa(path, str.split)
    assert str(raised.value) == f"{path}:2: {expected}"


@pytest.mark.parametrize(("answers", "expected"), [
    ([{"text": "b"}], "question 'q', answer 1: 'start' must be a whole number of characters, 0 or more; got null"),
    ([{"text": "b", "start": 2.0}], "question 'q', answer 1: 'start' must be a whole number of characters, 0 or "
                                    "more; got 2.0"),
    ([{"text": "a", "start": True}], "question 'q', answer 1: 'start' must be a whole number of characters, 0 or "
                                     "more; got true"),
    ([{"text": "b", "start": 2}, {"start": 2}], "question 'q', answer 2: 'text' must be a non-empty string; got "
                                                "null"),
    ("b", "question 'q': 'answers' must be a list of objects {\"text\": string, \"start\": character offset}; got "
          '"b"'),
    (["b"], "question 'q', answer 1: 'answers' must be a list of objects {\"text\": string, \"start\": character "
            'offset}; got "b"'),
])
def test_malformed_answers_are_refused_naming_the_line_question_and_what_is_wrong(tmp_path, answers, expected):
    """They raised KeyError (read as "file:1: 'start'"), TypeError ("string indices must be integers"), or took
    True for character 1."""
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "q", "question": "x?", "passage": "a b c", "answers": answers}) + "\n",
                    encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        read_qa(path, str.split)
    assert str(raised.value) == f"{path}:1: {expected}"


def test_questions_to_answer_are_read_without_their_answers(tmp_path):
    """``elmo task predict`` says a file's answers are ignored; a wrong one refused the file."""
    path = tmp_path / "questions.jsonl"
    path.write_text(json.dumps({"id": "q", "question": "x?", "passage": "a b c",
                                "answers": [{"text": "b", "start": 0}, "junk"]}) + "\n", encoding="utf-8")
    [example] = read_qa(path, str.split, with_answers=False)
    assert (example.key, example.passage_words, example.answers, example.span) == ("q", ("a", "b", "c"), (), None)


def test_a_repeated_id_is_refused_naming_both_lines(tmp_path):
    """Answers and gold answers are matched by id: of two questions with one id only the last would be scored."""
    path = tmp_path / "twice.jsonl"
    rows = [{"id": key, "question": "x?", "passage": passage, "answers": [{"text": "b", "start": 2}]}
            for key, passage in (("q1", "a b c"), ("q2", "a b d"), ("q1", "b b e"))]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(ValueError, match=r"twice\.jsonl:3: duplicate id 'q1' \(first on line 1\)"):
        read_qa(path, str.split)


# Formatting that clean_text deletes (word joiner, zero-width space, soft hyphen) and a decomposed é (e, U+0301),
# before the answer and inside it; the passage's words as typed text holds them, written out by hand.
FORMATTED_PASSAGE = "The \u2060Wi\u200bFi cafe\u0301 near Caf\u00ade\u0301 Ma\u200bri\u00adne\u0301\u2060 opened ."
FORMATTED_ANSWER = "Caf\u00ade\u0301 Ma\u200bri\u00adne\u0301"
TYPED_WORDS = ("The", "WiFi", "caf\u00e9", "near", "Caf\u00e9", "Marin\u00e9", "opened", ".")


def _cleaning_english(text: str) -> list[str]:
    """The English tokenizer on cleaned text, as ``pipeline.text_tokenizer_of`` gives it for the en models."""
    return get_tokenizer("english")(clean_text(text))


@pytest.mark.parametrize("tokenize", [get_tokenizer("english"), _cleaning_english], ids=["raw", "cleaning"])
def test_a_passage_with_invisible_formatting_and_accents_maps_tokens_to_its_own_characters(tokenize):
    row = {"id": "q", "question": "Where did it \u2060open ?", "passage": FORMATTED_PASSAGE,
           "answers": [{"text": FORMATTED_ANSWER, "start": FORMATTED_PASSAGE.index(FORMATTED_ANSWER)}]}
    example = qa_example(row, tokenize)
    assert example.passage_words == TYPED_WORDS
    assert example.question_words == ("Where", "did", "it", "open", "?")
    assert example.passage == FORMATTED_PASSAGE  # the file's characters, which answers are cut from
    assert [example.passage[begin:end] for begin, end in example.offsets] == [
        "The", "Wi\u200bFi", "cafe\u0301", "near", "Caf\u00ade\u0301", "Ma\u200bri\u00adne\u0301", "opened", "."]
    assert example.passage_words[example.span[0]:example.span[1] + 1] == ("Caf\u00e9", "Marin\u00e9")
    assert example.answer_text(*example.span) == FORMATTED_ANSWER


def test_a_cloze_row_with_a_word_joiner_reads_with_the_cleaning_tokenizer(tmp_path):
    """The row of the cloze test split that ``elmo task train qa`` stopped at (``-\u2060lih-``)."""
    passage = "Kaolinite ( KAY-\u0259-l\u0259-nyte, -\u2060lih-; also called kaolin) is a clay mineral ."
    path = tmp_path / "test.jsonl"
    path.write_text(json.dumps({"id": "k", "question": "XXXXX is a clay", "passage": passage,
                                "answers": [{"text": "kaolin", "start": passage.index("kaolin)")}]}) + "\n",
                    encoding="utf-8")
    [example] = read_qa(path, _cleaning_english)
    assert "-lih-" in example.passage_words
    begin, end = example.offsets[example.passage_words.index("-lih-")]
    assert passage[begin:end] == "-\u2060lih-"
    assert example.answer_text(*example.span) == "kaolin"


def test_a_mark_after_a_tibetan_vowel_that_decomposes_to_marks_composes_with_the_letter_before_it():
    """U+0F73 is not combining but decomposes to U+0F71 U+0F72 (combining classes 129, 130), so NFC composes a
    following U+0301 (230) past them with the a: x a<U+0F73><U+0301> y reads as x, U+00E1 U+0F71 U+0F72, y. The
    check of the clusters raised for it."""
    text = "x a\u0f73\u0301 y"
    words = clean_text(text).split()
    assert words == ["x", "\u00e1\u0f71\u0f72", "y"]
    assert passage_offsets(text, words) == [(0, 1), (2, 5), (6, 7)]
    assert passage_offsets("a\u0f73\u0301", ["\u00e1\u0f71\u0f72"]) == [(0, 3)]


# Characters whose composing depends on their neighbours: marks of several combining classes, characters that are
# not combining but decompose to marks (Tibetan U+0F73, U+0F75, U+0F81) or are excluded from composing (U+0344,
# U+0958, U+0340, U+1D15E, U+0F77, U+0F79), two-part vowels (Oriya U+0B47 U+0B3E), Hangul jamo and syllables, kana
# and its voicing mark, with a space, a letter, deleted formatting and a control character between them.
TRICKY_CHARACTERS = [" ", "a", "e", "\u0301", "\u0323", "\u0345", "\u0313", "\u03b1", "\u00ad", "\u200b", "\x07",
                     "\u0f71", "\u0f72", "\u0f73", "\u0f75", "\u0f81", "\u0f77", "\u0f79", "\u0344", "\u0958",
                     "\u0340", "\U0001d15e", "\u0b47", "\u0b3e", "\u0915", "\u093c", "\u1100", "\u1161", "\u11a8",
                     "\uac00", "\u304b", "\u3099", "\u0e33"]


def test_every_short_string_of_tricky_characters_maps_each_cleaned_word_to_characters_that_clean_to_it():
    """Every string of up to three of them: the mapping is found, and each word's characters, cleaned on their
    own, are the word (clean_text of the whole text split on white space, computed apart from the mapping)."""
    failures = []
    for length in (1, 2, 3):
        for characters in itertools.product(TRICKY_CHARACTERS, repeat=length):
            text = "".join(characters)
            words = clean_text(text).split()
            try:
                offsets = passage_offsets(text, words)
            except ValueError as error:
                failures.append((text, str(error)))
                continue
            spans = [clean_text(text[begin:end]).strip() for begin, end in offsets]
            if spans != words:
                failures.append((text, f"{spans} != {words}"))
    assert failures == []
