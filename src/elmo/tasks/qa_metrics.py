"""Extractive QA scores as SQuAD v1.1's evaluation script defines them: exact match and token F1 of the
normalized strings (lower case, punctuation removed, the articles a/an/the dropped, whitespace collapsed),
each the maximum over the question's gold answers, averaged over questions and reported in percent."""

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """The script's order: lower case, drop punctuation, drop articles, collapse whitespace."""
    text = "".join(character for character in text.lower() if character not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall on the normalized strings; 0 when no token is shared
    (so, as in v1.1, also when both normalize to nothing)."""
    predicted, wanted = normalize_answer(prediction).split(), normalize_answer(gold).split()
    shared = sum((Counter(predicted) & Counter(wanted)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(wanted)
    return 2 * precision * recall / (precision + recall)


def score_answers(predictions: Mapping[str, str], golds: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """``{"exact_match", "f1"}`` in percent over every question of ``golds`` (a missing prediction scores 0)."""
    if not golds:
        raise ValueError("no gold answers to score against")
    totals = {"exact_match": 0.0, "f1": 0.0}
    for key, answers in golds.items():
        if not answers:
            raise ValueError(f"question {key!r} has no gold answer")
        if key not in predictions:
            continue
        totals["exact_match"] += max(exact_match(predictions[key], answer) for answer in answers)
        totals["f1"] += max(token_f1(predictions[key], answer) for answer in answers)
    return {name: 100.0 * total / len(golds) for name, total in totals.items()}
