import itertools
import json

import pytest

from elmo.tasks.qa_data import answer_span, qa_example, read_qa, token_offsets
from elmo.tokenizers import get_tokenizer


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


def test_a_repeated_id_is_refused_naming_both_lines(tmp_path):
    """Answers and gold answers are matched by id: of two questions with one id only the last would be scored."""
    path = tmp_path / "twice.jsonl"
    rows = [{"id": key, "question": "x?", "passage": passage, "answers": [{"text": "b", "start": 2}]}
            for key, passage in (("q1", "a b c"), ("q2", "a b d"), ("q1", "b b e"))]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(ValueError, match=r"twice\.jsonl:3: duplicate id 'q1' \(first on line 1\)"):
        read_qa(path, str.split)
