from elmo.tasks.qa_cloze import GAP, cloze_rows, most_frequent_answer, window_overlap_answer
from elmo.tasks.qa_data import qa_example

STOP = frozenset({"the", "was", "by", "in", "a", "his", "it", "is", "of"})
LEAD = ["Anna Karenina is a novel by Leo Tolstoy.", "Tolstoy wrote the novel in Moscow.",
        "Critics praised the novel."]


def test_each_question_is_its_sentence_with_one_gap_and_the_answer_is_in_the_rest_of_the_lead():
    rows = cloze_rows("Anna Karenina", LEAD, str.split, STOP)
    assert rows
    for row in rows:
        k = int(row["id"].split("#")[1])
        assert row["question"].count(GAP) == 1
        assert row["passage"] == " ".join(LEAD[:k] + LEAD[k + 1:])  # its own sentence is taken out
        for answer in row["answers"]:
            assert row["passage"][answer["start"]:answer["start"] + len(answer["text"])] == answer["text"]
            assert row["question"].replace(GAP, answer["text"]).casefold() == LEAD[k].casefold()
    # Under str.split "Tolstoy." and "Tolstoy", "novel." and "novel" are different words; "Critics" is nowhere
    # else; "is", "the" are stop words; "Anna" and "Moscow." occur once: "novel" of sentences 0 and 1 qualifies.
    assert {row["id"] for row in rows} == {"Anna Karenina#0#novel", "Anna Karenina#1#novel"}


def test_baselines_pick_the_most_frequent_and_the_best_surrounded_candidate():
    passage = "Paris is large and Paris has the Louvre museum . In winter the silk city Lyon makes wine ."
    row = {"id": "q", "question": "The silk city XXXXX makes wine", "passage": passage,
           "answers": [{"text": "Lyon", "start": passage.index("Lyon")}]}
    example = qa_example(row, str.split)
    stop = STOP | {"has", "and"}
    assert most_frequent_answer(example, stop) == "Paris"
    # question words within 5 tokens: Lyon 4 (silk, city, makes, wine), winter 3, museum 1; silk, city, makes
    # and wine are question words, so no candidates
    assert window_overlap_answer(example, stop) == "Lyon"
