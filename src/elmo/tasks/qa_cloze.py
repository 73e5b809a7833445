"""A cloze-style extractive reading-comprehension set from held-out Wikipedia leads, and its trivial baselines.

No registry package ships SQuAD or another span-annotated QA set (docs/results.md, "Question answering"), so
this is the closest honest substitute, built the way CNN/Daily Mail and the Children's Book Test were: one
sentence of an article's lead is taken out and becomes the question with one word replaced by ``XXXXX``; the
rest of the lead is the passage, and the answer is that word where it occurs in the passage. An answer is a
content word (letters only, at least 4, not an English stop word) that occurs once in its sentence and
somewhere else in the lead. It is not SQuAD: questions are statements with a gap, not human questions.

Only articles in the ``valid`` and ``test`` splits of the held-out rule (``elmo.datasets.heldout_split``)
are used, which no corpus built by ``elmo.datasets`` ever trains on; articles, not questions, are split
into train/dev/test, so a passage never appears in two splits.
"""

import argparse
import random
from collections import Counter
from pathlib import Path

from elmo.tasks.qa_data import QAExample, qa_example, token_offsets, write_qa

GAP = "XXXXX"
SPLIT_SHARES = (("train", 0.6), ("dev", 0.1), ("test", 0.3))


def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS  # scikit-learn comes with seqeval

    return frozenset(ENGLISH_STOP_WORDS)


def is_candidate(word: str, stop_words: frozenset[str]) -> bool:
    return word.isalpha() and len(word) >= 4 and word.casefold() not in stop_words


def cloze_rows(title: str, sentences: list[str], tokenize, stop_words: frozenset[str]) -> list[dict]:
    """Every question that one article's lead gives (rows of the ``elmo.tasks.qa_data`` format)."""
    rows = []
    for k, sentence in enumerate(sentences):
        passage = " ".join(sentences[:k] + sentences[k + 1:])
        if not passage:
            continue
        passage_words = tokenize(passage)
        passage_offsets = token_offsets(passage, passage_words)
        words = tokenize(sentence)
        counts = Counter(word.casefold() for word in words)
        for (begin, end), word in zip(token_offsets(sentence, words), words, strict=True):
            if not is_candidate(word, stop_words) or counts[word.casefold()] != 1:
                continue
            places = [offset for offset, other in zip(passage_offsets, passage_words, strict=True)
                      if other.casefold() == word.casefold()]
            if places:
                answers = [{"text": passage[a:b], "start": a} for a, b in places]
                rows.append({"id": f"{title}#{k}#{word}", "question": sentence[:begin] + GAP + sentence[end:],
                             "passage": passage, "answers": answers})
    return rows


def wiki_cloze(cache: Path | None = None) -> dict[str, list[dict]]:
    """The set's rows by split (articles shuffled with ``random.Random(0)``, cut 60/10/30 %)."""
    from elmo.datasets import SOURCES, fetch, heldout_split
    from elmo.tokenizers import get_tokenizer

    source = SOURCES["wikipedia-en"]
    articles = [passage for passage in source.read(fetch(source.archive, cache))
                if heldout_split(passage.key) in ("valid", "test")]
    random.Random(0).shuffle(articles)
    tokenize, stop_words = get_tokenizer("english"), _stop_words()
    splits: dict[str, list[dict]] = {}
    start = 0
    for i, (name, share) in enumerate(SPLIT_SHARES):
        stop = len(articles) if i == len(SPLIT_SHARES) - 1 else start + round(share * len(articles))
        splits[name] = [row for article in articles[start:stop]
                        for row in cloze_rows(article.key, list(article.sentences), tokenize, stop_words)]
        start = stop
    return splits


# --- trivial baselines ----------------------------------------------------------------------------------

def most_frequent_answer(example: QAExample, stop_words: frozenset[str]) -> str:
    """The passage's most frequent candidate word (first seen wins a tie), ignoring the question."""
    counts = Counter(word.casefold() for word in example.passage_words if is_candidate(word, stop_words))
    if not counts:
        return example.passage_words[0]
    best = max(counts.values())
    return next(word for word in example.passage_words if counts.get(word.casefold()) == best)


def window_overlap_answer(example: QAExample, stop_words: frozenset[str], window: int = 5) -> str:
    """The candidate occurrence with the most question words (casefolded, stop words aside) within
    ``window`` tokens of it, that is not itself a question word: the sliding-window baseline."""
    question = {word.casefold() for word in example.question_words if word.casefold() not in stop_words}
    words = [word.casefold() for word in example.passage_words]
    best, best_score = example.passage_words[0], -1
    for i, word in enumerate(example.passage_words):
        if not is_candidate(word, stop_words) or words[i] in question:
            continue
        score = sum(other in question for other in words[max(0, i - window):i] + words[i + 1:i + 1 + window])
        if score > best_score:
            best, best_score = word, score
    return best


def main() -> None:
    from elmo.tasks.qa_metrics import score_answers
    from elmo.tokenizers import get_tokenizer

    parser = argparse.ArgumentParser(description="write the held-out Wikipedia cloze set as train/dev/test.jsonl")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tokenize, stop_words = get_tokenizer("english"), _stop_words()
    for name, rows in wiki_cloze().items():
        write_qa(args.out / f"{name}.jsonl", rows)
        examples = [qa_example(row, tokenize) for row in rows]
        golds = {example.key: example.answers for example in examples}
        scores = {baseline.__name__: score_answers({e.key: baseline(e, stop_words) for e in examples}, golds)
                  for baseline in (most_frequent_answer, window_overlap_answer)}
        articles = len({row["id"].split("#")[0] for row in rows})
        print(f"{name}: {len(rows)} questions from {articles} articles; baselines (EM / F1): "
              + "; ".join(f"{b} {s['exact_match']:.1f} / {s['f1']:.1f}" for b, s in scores.items()))


if __name__ == "__main__":
    main()
