"""Layer probes: held-out lines only in the probe's test set, a linear probe that reads the layer holding
the tags, WordNet lines parsed, and the sense 1-NN scored against the right neighbour."""

import numpy as np
import pytest

from elmo.tasks import probes
from elmo.tasks.probes import SenseInstance, TaggedLine, brown_tagged_line

WORDNET_LINE = ('09236472 17 n 02 bank 0 cant 1 003 @ 09387222 n 0000 | sloping land (especially the slope beside '
                'a body of water); "they pulled the canoe up on the bank"; "he sat on the bank of the river"  ')
WORDNET_ADJECTIVE = '00001740 00 a 01 able(p) 0 002 | (usually followed by `to\') having the means; "able to swim"  '


def test_brown_tags_lose_title_headline_and_foreign_markers():
    assert [probes.simplify_brown_tag(t) for t in ("np-tl", "NN-HL", "fw-nn", "ppss+md", "nn$-tl")] == [
        "np", "nn", "nn", "ppss+md", "nn$"]


def test_probe_test_lines_come_only_from_held_out_splits():
    lines = [TaggedLine((f"w{i}",), ("n",), split) for i, split in
             enumerate(["train"] * 50 + ["test"] * 8 + ["valid"] * 2)]
    train, test = probes.probe_splits(lines, 20, 10, seed=0)
    assert all(line.split == "train" for line in train) and len(train) == 20
    assert {line.split for line in test} == {"test", "valid"} and len(test) == 10
    with pytest.raises(ValueError, match="11 held-out"):
        probes.probe_splits(lines, 20, 11, seed=0)


def test_pos_probe_reads_the_layer_that_holds_the_tags():
    """Layer 1 is a noisy code of the tag, layer 0 noise: the probe must find the tags in layer 1 only."""
    rng = np.random.default_rng(0)
    tags = ["n", "v", "a", "d"]
    codes = rng.normal(size=(len(tags), 16))

    def make(n_lines: int) -> tuple[list[TaggedLine], list[np.ndarray]]:
        lines, layers = [], []
        for _ in range(n_lines):
            line_tags = [tags[i] for i in rng.integers(0, len(tags), size=6)]
            signal = np.stack([codes[tags.index(tag)] for tag in line_tags]) + rng.normal(scale=0.3, size=(6, 16))
            layers.append(np.stack([rng.normal(size=(6, 16)), signal]).astype(np.float16))
            lines.append(TaggedLine(tuple("w" * 6), tuple(line_tags), "train"))
        return lines, layers

    (train, train_layers), (test, test_layers) = make(200), make(50)
    accuracy = probes.pos_probe(train, test, train_layers, test_layers)
    assert accuracy["layer_1"] >= 0.95
    assert accuracy["layer_0"] < 0.45  # chance is 0.25
    assert accuracy["majority"] < 0.45  # one word for every tag: the word alone says little


def test_wordnet_data_lines_give_synset_lemmas_and_examples():
    assert probes.parse_data_line(WORDNET_LINE) == (
        "09236472n", ["bank", "cant"], ["they pulled the canoe up on the bank", "he sat on the bank of the river"])
    assert probes.parse_data_line(WORDNET_ADJECTIVE) == ("00001740a", ["able"], ["able to swim"])
    assert probes.parse_data_line("  1 This software and database is being provided") is None


def _instance(synset: str, n: int) -> SenseInstance:
    return SenseInstance("bank", "noun", synset, ("the", "bank", str(n)), 1)


def test_sense_1nn_follows_the_nearest_instance_of_the_lemma():
    instances = [_instance("river", 0), _instance("river", 1), _instance("money", 2), _instance("money", 3),
                 _instance("money", 4)]
    scored = probes.scored_instances(instances)
    assert scored == [0, 1, 2, 3, 4]
    clustered = np.array([[1, 0.1], [1, 0.2], [0, 1], [0.1, 1], [0.2, 1]])
    assert probes.sense_1nn_accuracy(instances, clustered, scored) == 1.0
    # Interleaved on a circle (degrees): river 0, 22; money 10, 31, 45. Only money at 45 has its own sense
    # nearest (money at 31).
    angles = np.radians([0, 22, 10, 31, 45])
    interleaved = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    assert probes.sense_1nn_accuracy(instances, interleaved, scored) == pytest.approx(1 / 5)
    # One vector for every instance (layer 0, all spelled alike), 2 river and 4 money: every other instance ties
    # as nearest, so each scores the share of the others with its sense (river 1/5, money 3/5), not whether the
    # first in order has it (which would give 2/6).
    six = [*instances, _instance("money", 5)]
    same = np.ones((6, 2))
    assert probes.sense_1nn_accuracy(six, same, list(range(6))) == pytest.approx((2 * 1 / 5 + 4 * 3 / 5) / 6)
    # Leave one out with 2 river and 4 money instances: the other instances' majority is money for every one,
    # right for the 4 money ones only.
    assert probes.most_frequent_sense_accuracy(six, probes.scored_instances(six)) == pytest.approx(4 / 6)
    # 2 river and 3 money: leaving out a money instance ties the others 2 to 2, so it scores 1/2 (the first synset
    # in order, river, would give 0); a river one leaves 1 river against 3 money: 0.
    assert probes.most_frequent_sense_accuracy(instances, scored) == pytest.approx(3 * (1 / 2) / 5)


def test_an_example_wordnet_quotes_under_two_senses_of_a_lemma_is_left_out():
    """Its two instances would get the same vectors, so one of them would always be scored wrong."""
    shared = ("fly", "a", "kite")
    instances = [SenseInstance("fly", "verb", "operate", shared, 0), SenseInstance("fly", "verb", "move", shared, 0),
                 SenseInstance("fly", "verb", "move", ("birds", "fly", "south"), 1)]
    assert probes._without_shared_examples(instances) == instances[2:]


def test_a_brown_line_reads_its_quotes_as_the_corpus_text_has_them_and_splits_by_the_corpus_key():
    from elmo.datasets import heldout_split

    line = brown_tagged_line("``/`` The/at Fulton/np-tl jury/nn said/vbd ''/'' ./.")
    assert line is not None
    assert line.words == ('"', "The", "Fulton", "jury", "said", '"', ".")
    assert line.tags == ("``", "at", "np", "nn", "vbd", "''", ".")
    assert line.split == heldout_split("`` The Fulton jury said '' .")
    assert brown_tagged_line("   ") is None


def test_sense_1nn_reads_float16_vectors_as_it_reads_float32():
    """float16 layers 10 times larger than unit variance: their squared norm (about 100 * 1024) is past float16's
    65504, so computed in float16 every unit vector was 0 and every neighbour tied."""
    instances = [_instance("river", 0), _instance("river", 1), _instance("money", 2), _instance("money", 3)]
    rng = np.random.default_rng(0)
    senses = rng.normal(size=(2, 1024))
    vectors = 10 * (senses[[0, 0, 1, 1]] + 0.1 * rng.normal(size=(4, 1024)))  # each nearest its own sense
    assert probes.sense_1nn_accuracy(instances, vectors, [0, 1, 2, 3]) == 1.0
    assert probes.sense_1nn_accuracy(instances, vectors.astype(np.float16), [0, 1, 2, 3]) == 1.0


@pytest.mark.parametrize("count", [4, 6, 12, 39])
def test_sense_1nn_shares_the_credit_among_identical_layer_sized_vectors(count: int):
    """Layer 0 gives every instance spelled alike one 256-wide vector. A matrix-vector product gave such identical
    rows cosines that differ in the last bit, so only some of them tied as nearest: here the score was 25.0 % for 4
    instances where the share of the others with the instance's sense, written out below, is 33.3 %."""
    rng = np.random.default_rng(count)
    synsets = [f"sense-{i % 3}" for i in range(count)]
    instances = [_instance(synset, n) for n, synset in enumerate(synsets)]
    vectors = np.tile(rng.normal(size=256).astype(np.float16), (count, 1))
    scored = probes.scored_instances(instances)
    expected = np.mean([sum(synsets[m] == synsets[n] for m in range(count) if m != n) / (count - 1) for n in scored])
    assert probes.sense_1nn_accuracy(instances, vectors, scored) == pytest.approx(expected)
