import pytest

from elmo.tasks.qa_metrics import exact_match, normalize_answer, score_answers, token_f1


def test_normalization_lowercases_strips_punctuation_and_articles_and_collapses_spaces():
    assert normalize_answer("  The  Eiffel-Tower, in PARIS!  ") == "eiffeltower in paris"
    assert normalize_answer("an apple a day") == "apple day"
    assert normalize_answer("Theatre") == "theatre"  # "the" only as a whole word


def test_exact_match_after_normalization():
    assert exact_match("the Denver Broncos", "Denver Broncos.") == 1.0
    assert exact_match("Denver", "Denver Broncos") == 0.0


def test_token_f1_against_hand_computed_precision_and_recall():
    # prediction tokens: denver broncos won (3); gold: broncos won super bowl (4); shared 2
    # precision 2/3, recall 2/4 -> F1 = 2 * (2/3) * (1/2) / (2/3 + 1/2) = 4/7
    assert token_f1("Denver Broncos won", "the Broncos won Super Bowl") == pytest.approx(4 / 7)
    assert token_f1("x b b", "b b c") == pytest.approx(2 / 3)  # shared counts respect multiplicity: 2 b's
    assert token_f1("a b b", "b b c") == pytest.approx(0.8)  # "a" is dropped: precision 2/2, recall 2/3
    assert token_f1("nothing", "else") == 0.0
    assert token_f1("the", "a") == 0.0  # both normalize to nothing: 0, as SQuAD v1.1's script gives


def test_scores_take_the_best_gold_answer_per_question_and_average_in_percent():
    golds = {"q1": ["Broncos", "Denver Broncos"], "q2": ["1878"], "q3": ["Leo Tolstoy"]}
    predictions = {"q1": "the Denver Broncos", "q2": "in 1878", "q3": "Tolstoy"}
    # q1: EM 1, F1 1; q2: EM 0, F1 2*(1/2)*1/(3/2) = 2/3; q3: EM 0, F1 2*1*(1/2)/(3/2) = 2/3
    scores = score_answers(predictions, golds)
    assert scores["exact_match"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3 + 2 / 3) / 3)


def test_a_missing_prediction_scores_zero():
    assert score_answers({}, {"q": ["x"]}) == {"exact_match": 0.0, "f1": 0.0}
