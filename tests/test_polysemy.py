import itertools
from collections import Counter

import numpy as np
import pytest

from elmo import Embedder
from elmo.polysemy import SenseSentence, evaluate_model, load_sentences, nn_agreement, triplet_rate
from elmo.sense_examples import POLYSEMY_EXAMPLES
from elmo.tokenizers import english_tokenize, jieba_tokenize


def _random_words(rng: np.random.Generator, n_words: int, dim: int) -> dict[str, dict[str, np.ndarray]]:
    """Words of 2-3 senses with 2-5 occurrences each, random vectors."""
    return {f"w{w}": {f"s{s}": rng.normal(size=(int(rng.integers(2, 6)), dim)).astype(np.float32)
                      for s in range(int(rng.integers(2, 4)))}
            for w in range(n_words)}


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _brute_force(words: dict[str, dict[str, np.ndarray]]) -> tuple[float, float]:
    """Triplet rate and nearest-neighbour agreement by enumerating every triple and every neighbour."""
    passed = total = nn_passed = nn_total = 0
    for senses in words.values():
        occurrences = [(sense, vector) for sense, vectors in senses.items() for vector in vectors]
        for a, (sense_a, anchor) in enumerate(occurrences):
            same = [v for i, (s, v) in enumerate(occurrences) if s == sense_a and i != a]
            other = [v for s, v in occurrences if s != sense_a]
            for p, n in itertools.product(same, other):
                total += 1
                passed += _cos(anchor, p) > _cos(anchor, n)
            nn_total += 1
            nn_passed += max(_cos(anchor, p) for p in same) > max(_cos(anchor, n) for n in other)
    return passed / total, nn_passed / nn_total


def test_triplet_rate_and_nn_agreement_equal_a_brute_force_count_on_random_vectors():
    rng = np.random.default_rng(0)
    for dim in (3, 16):
        words = _random_words(rng, 6, dim)
        rate, agreement = _brute_force(words)
        assert 0 < rate < 1
        assert triplet_rate(words) == rate
        assert nn_agreement(words) == agreement


def test_static_vectors_tie_everywhere_and_score_zero():
    rng = np.random.default_rng(1)
    static = {}
    for word, senses in _random_words(rng, 5, 8).items():
        vector = rng.normal(size=(1, 8)).astype(np.float32)  # every occurrence of the word, whatever its sense
        static[word] = {sense: np.repeat(vector, len(vectors), axis=0) for sense, vectors in senses.items()}
    assert triplet_rate(static) == 0.0
    assert nn_agreement(static) == 0.0


def test_perfectly_separated_senses_score_one():
    rng = np.random.default_rng(2)
    dim = 12
    words = {}
    for w, senses in _random_words(rng, 5, dim).items():
        directions = np.eye(dim, dtype=np.float32)[rng.permutation(dim)[: len(senses)]] * 10
        words[w] = {sense: direction + rng.uniform(0, 1, size=vectors.shape).astype(np.float32)
                    for (sense, vectors), direction in zip(senses.items(), directions, strict=True)}
    assert triplet_rate(words) == 1.0
    assert nn_agreement(words) == 1.0


def test_a_word_with_one_sense_has_no_triples():
    with pytest.raises(ValueError, match="two senses"):
        triplet_rate({"w": {"only": np.ones((4, 3), np.float32)}})


@pytest.mark.parametrize("measure", [triplet_rate, nn_agreement])
def test_vectors_with_nan_or_infinity_are_refused_naming_the_word_and_sense(measure):
    # NaN cosines compare False both ways: a NaN word would score 0, like a static layer, not fail
    good = np.eye(3, dtype=np.float32)[:2]
    for bad_value in (np.nan, np.inf):
        bad = good.copy()
        bad[1, 0] = bad_value
        with pytest.raises(ValueError, match=r"word 'w' sense 'b': vectors hold NaN or infinite values"):
            measure({"w": {"a": good, "b": bad}})


@pytest.mark.parametrize("measure", [triplet_rate, nn_agreement])
def test_a_single_vector_per_sense_is_refused_not_read_as_dim_one_number_uses(measure):
    # two 4-dim vectors: read as 4 + 4 one-number uses, they once gave a triplet rate of 0.208
    with pytest.raises(ValueError, match=r"word 'w' sense 'a': vectors of shape \(4,\); expected \(occurrences, dim\)"):
        measure({"w": {"a": np.array([1.0, 2.0, 3.0, 4.0]), "b": np.array([4.0, 3.0, 2.0, 1.0])}})


def test_the_measures_of_many_uses_hold_one_row_of_cosines_at_a_time_not_every_product():
    """200 uses of 256 dimensions: all products at once, (200, 200, 256) in float64, are 82 MB."""
    import tracemalloc

    rng = np.random.default_rng(3)
    words = {"w": {"a": rng.normal(size=(100, 256)), "b": rng.normal(size=(100, 256))}}
    tracemalloc.start()
    try:
        triplet_rate(words)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000, peak


@pytest.mark.parametrize(("language", "min_words", "tokenize"), [("en", 45, english_tokenize),
                                                                  ("zh", 35, jieba_tokenize)])
def test_polysemy_sets_have_enough_words_senses_and_sentences_tokenized_as_the_model_reads_them(
        language, min_words, tokenize):
    sentences = load_sentences(language)
    per_sense = Counter((s.word, s.sense) for s in sentences)
    senses_per_word = Counter(word for word, _ in per_sense)
    assert len(senses_per_word) >= min_words
    assert min(senses_per_word.values()) >= 2
    assert min(per_sense.values()) >= 6
    assert len({s.text for s in sentences}) == len(sentences)
    for s in sentences:
        assert s.tokens[s.index] == s.word and s.tokens.count(s.word) == 1, s.text
        assert 6 <= len(s.tokens) <= 25, s.text
        # the stored tokens are the tokenizer's: for zh, jieba keeps the word one token at that place
        assert tuple(tokenize(s.text)) == s.tokens, s.text


def test_polysemy_sets_share_no_sentence_with_the_demo_examples():
    demo = {" ".join(sentence.tokens) for example in POLYSEMY_EXAMPLES for sentence in example.sentences}
    for language in ("en", "zh"):
        assert not demo & {" ".join(s.tokens) for s in load_sentences(language)}


def test_shipped_en_model_scores_a_rate_per_layer_and_its_context_free_layer_ties_to_zero():
    scores = evaluate_model(Embedder.load("en"), "en")
    assert scores.n_layers == 3
    for rates in (scores.triplet_rate, scores.nn_agreement):
        assert all(0.0 <= rate <= 1.0 for rate in rates)
        assert rates[0] == 0.0  # layer 0: every occurrence of a word is the same vector, so every triple ties
    assert all(word.triplets[0] == 0 and word.nn_agreements[0] == 0 for word in scores.words)
    assert len(scores.words) == len({s.word for s in load_sentences("en")})


def test_a_model_reading_characters_gets_a_words_vector_as_the_mean_of_its_characters(fixture_bilm):
    """A Chinese model trained on characters reads the stored jieba tokens as characters; the target word's vector
    is the mean of its characters' (by hand here, from the same embedder's own output)."""
    from elmo.polysemy import word_vectors

    sentences = [SenseSentence("小米", "food", "我喜欢吃小米粥", ("我", "喜欢", "吃", "小米", "粥"), 3),
                 SenseSentence("小米", "phone", "小米手机很好用", ("小米", "手机", "很", "好用"), 0)]
    embedder = Embedder(fixture_bilm, tokenizer="chars")
    vectors = word_vectors(embedder, sentences)
    first = embedder.embed([list("我喜欢吃小米粥")], "all")[0]
    second = embedder.embed([list("小米手机很好用")], "all")[0]
    np.testing.assert_allclose(vectors[:, 0], first[:, 4:6].mean(axis=1), rtol=0, atol=1e-6)
    np.testing.assert_allclose(vectors[:, 1], second[:, 0:2].mean(axis=1), rtol=0, atol=1e-6)
    words = Embedder(fixture_bilm, tokenizer="jieba")  # a model reading words: the stored tokens as they are
    np.testing.assert_allclose(word_vectors(words, sentences)[:, 1],
                               words.embed([list(sentences[1].tokens)], "all")[0][:, 0], rtol=0, atol=1e-6)


@pytest.mark.parametrize("index", [0, 5])
def test_a_sentence_whose_index_is_not_the_word_is_refused(index):
    """The measures read the vector at ``index``; token 0 of this sentence is another word, 5 is past its end."""
    with pytest.raises(ValueError, match="not the word 'bank'"):
        SenseSentence("bank", "river", "we sat by the bank", ("we", "sat", "by", "the", "bank"), index)


def test_a_zero_vector_is_refused_not_read_as_cosine_zero():
    """Read as cosine 0, a zero same-sense vector would beat every negative other-sense cosine."""
    words = {"w": {"a": np.array([[1.0, 0.0], [0.0, 0.0]]), "b": np.array([[-1.0, 0.1]])}}
    with pytest.raises(ValueError, match="all zeros"):
        triplet_rate(words)


def test_tiny_vectors_get_their_true_cosines():
    """Cosine does not depend on length: vectors of norm ~1e-14 get the same rate as the same directions scaled up."""
    rng = np.random.default_rng(5)
    words = {"w": {"a": rng.normal(size=(4, 8)), "b": rng.normal(size=(4, 8))}}
    tiny = {"w": {sense: vectors * 1e-14 for sense, vectors in words["w"].items()}}
    assert triplet_rate(tiny) == triplet_rate(words)
