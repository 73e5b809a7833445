import json
from collections import Counter
from pathlib import Path

import pytest
from run_helpers import train_micro_run
from training_helpers import write_synthetic_corpus

from elmo.training.batches import NO_TARGET, Batcher
from elmo.training.checkpoints import load_checkpoint
from elmo.training.corpus import Corpus, CorpusError, RowPosition, pass_start_fraction
from elmo.training.vocab import Vocabulary, VocabularyError


def _decode_token(char_ids: list[int]) -> str:
    """Inverse of elmo.characters for the tokens used here (written independently of it)."""
    if char_ids[:3] == [259, 257, 260]:
        return "<S>"
    if char_ids[:3] == [259, 258, 260]:
        return "</S>"
    end = char_ids.index(260)
    return bytes(i - 1 for i in char_ids[1:end]).decode("utf-8")


def _row_streams(batcher: Batcher, vocab: Vocabulary) -> list[dict[str, list[str]]]:
    """Each row's inputs and targets of both directions over all batches, as tokens."""
    streams = [{"fi": [], "ft": [], "bi": [], "bt": []} for _ in batcher.readers]
    while (inputs := batcher.next_batch()) is not None:
        tokens = [_decode_token(row) for row in inputs.char_ids.tolist()]
        for r, stream in enumerate(streams):
            real = inputs.forward_targets[r] != NO_TARGET
            stream["fi"] += [tokens[i] for i in inputs.forward_tokens[r][real].tolist()]
            stream["bi"] += [tokens[i] for i in inputs.backward_tokens[r][real].tolist()]
            stream["ft"] += [vocab.tokens[i] for i in inputs.forward_targets[r][real].tolist()]
            stream["bt"] += [vocab.tokens[i] for i in inputs.backward_targets[r][real].tolist()]
    return streams


def _expected_stream(sentences: list[list[str]]) -> dict[str, list[str]]:
    """bilm-tf's packing of one row: <S> s </S>, each token but the last an input, each but the first a target."""
    expected = {"fi": [], "ft": [], "bi": [], "bt": []}
    for sentence in sentences:
        forward = ["<S>", *sentence, "</S>"]
        backward = ["</S>", *sentence[::-1], "<S>"]
        expected["fi"] += forward[:-1]
        expected["ft"] += forward[1:]
        expected["bi"] += backward[:-1]
        expected["bt"] += backward[1:]
    return expected


def _split_sentences(forward_inputs: list[str]) -> list[list[str]]:
    sentences: list[list[str]] = []
    for token in forward_inputs:
        if token == "<S>":
            sentences.append([])
        else:
            sentences[-1].append(token)
    return sentences


@pytest.mark.parametrize("n_rows", [1, 3, 7])
def test_rows_partition_the_corpus_and_pack_sentences_as_bilm_tf(tmp_path: Path, n_rows: int):
    path = write_synthetic_corpus(tmp_path / "text.txt", 60)
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n   \n")  # blank lines are not sentences
    corpus = Corpus([str(path)])
    vocab = Vocabulary.from_counts(corpus.count_tokens())
    batcher = Batcher(corpus, vocab, range(n_rows), n_rows, unroll_steps=7, seed=0, max_epochs=1, pad=True)
    streams = _row_streams(batcher, vocab)

    every_row = [sentence for stream in streams for sentence in _split_sentences(stream["fi"])]
    assert every_row == [line.split() for line in path.read_text().splitlines() if line.split()]
    for stream in streams:
        assert stream == _expected_stream(_split_sentences(stream["fi"]))


def test_training_batches_carry_rows_across_batches_and_drop_the_last_incomplete_one(tmp_path: Path):
    path = write_synthetic_corpus(tmp_path / "text.txt", 50)
    corpus = Corpus([str(path)])
    vocab = Vocabulary.from_counts(corpus.count_tokens())
    padded = _row_streams(Batcher(corpus, vocab, range(4), 4, 5, 0, max_epochs=1, pad=True), vocab)
    training = _row_streams(Batcher(corpus, vocab, range(4), 4, 5, 0, max_epochs=1), vocab)
    n_full = min(len(stream["fi"]) for stream in padded) // 5 * 5
    for full, cut in zip(padded, training, strict=True):
        assert cut == {key: values[:n_full] for key, values in full.items()}


def test_shards_are_reshuffled_each_epoch_and_every_epoch_reads_every_line_once(tmp_path: Path):
    for shard in range(5):
        write_synthetic_corpus(tmp_path / f"shard-{shard}.txt", 8, seed=shard)
    corpus = Corpus([str(tmp_path / "shard-*.txt")])
    assert len(corpus.paths) == 5
    assert corpus.file_order(0, seed=1) != corpus.file_order(1, seed=1)
    vocab = Vocabulary.from_counts(corpus.count_tokens())
    lines = Counter(" ".join(s) for s in corpus.sentences())
    batcher = Batcher(corpus, vocab, range(1), 1, 9, seed=1, max_epochs=2, pad=True)
    read = [" ".join(s) for s in _split_sentences(_row_streams(batcher, vocab)[0]["fi"])]
    first, second = read[: len(read) // 2], read[len(read) // 2 :]
    assert Counter(first) == lines and Counter(second) == lines
    assert first != second


@pytest.mark.parametrize("fraction", [0.0, 0.3, 0.75])
def test_a_row_starts_each_pass_at_the_first_line_past_its_fraction_of_its_share_and_reads_the_share_whole(
        tmp_path: Path, fraction: float):
    path = write_synthetic_corpus(tmp_path / "text.txt", 90)
    data = path.read_bytes()
    line_starts = [0] + [k + 1 for k, byte in enumerate(data[:-1]) if byte == ord("\n")]
    lines = data.decode().splitlines()
    corpus = Corpus([str(path)])
    vocab = Vocabulary.from_counts(corpus.count_tokens())
    n_rows = 3
    batcher = Batcher(corpus, vocab, range(n_rows), n_rows, 4, seed=0, max_epochs=None,
                      pass_start_fraction=fraction)
    for row, reader in enumerate(batcher.readers):
        share_start, share_end = row * len(data) // n_rows, (row + 1) * len(data) // n_rows
        in_share = [k for k, start in enumerate(line_starts) if share_start <= start < share_end]
        first = next(k for k in in_share if line_starts[k] >= share_start + fraction * (share_end - share_start))
        assert reader.position.offset == line_starts[first]
        # to the share's end, then its opening up to there: one pass; the next pass the same again
        one_pass = [lines[k].split() for k in range(first, in_share[-1] + 1)] + [
            lines[k].split() for k in range(in_share[0], first)]
        tokens = reader.take(2 * sum(len(sentence) + 1 for sentence in one_pass))
        assert _split_sentences(tokens.forward_inputs) == one_pass + one_pass
    batcher.close()


@pytest.mark.parametrize("fraction", [0.0, 0.677])
def test_epochs_of_shards_read_every_line_once_a_pass_wherever_rows_start(tmp_path: Path, fraction: float):
    """Shards change order every pass: a row that started a fraction into its share must read the rest of its share
    in that pass's order, not the next pass's (which left a quarter of the text unread and a quarter read twice in
    `--epochs 1`). Every word occurs once in equal-length lines, so each is read once a pass, except where a row's
    share ends inside a sentence (as at every fraction: the last step of a pass ends where the tokens run out)."""
    paths = []
    for shard in range(6):
        words = [f"w{shard}x{k:04d}" for k in range(3 * (40 + 23 * shard))]
        path = tmp_path / f"shard-{shard}.txt"
        path.write_text("".join(" ".join(words[k : k + 3]) + "\n" for k in range(0, len(words), 3)))
        paths.append(str(path))
    corpus = Corpus(paths)
    vocab = Vocabulary.from_counts(corpus.count_tokens())
    n_rows, unroll_steps, n_passes = 5, 8, 2
    n_targets = sum(len(sentence) + 1 for sentence in corpus.sentences())
    batcher = Batcher(corpus, vocab, range(n_rows), n_rows, unroll_steps, seed=0, max_epochs=None,
                      pass_start_fraction=fraction)
    read: Counter[str] = Counter()
    for _ in range(n_passes * n_targets // (n_rows * unroll_steps)):
        for reader in batcher.readers:
            read.update(reader.take(unroll_steps).forward_targets)
    batcher.close()
    times_read = Counter(read[word] for sentence in corpus.sentences() for word in sentence)
    assert times_read[n_passes] >= 0.99 * sum(times_read.values())


def test_the_seed_draws_where_rows_start_and_training_starts_rows_there(
        tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path):
    """Runs with other seeds read other text first (runs continued from a model with a new seed re-read the same
    opening stretch of every share, as data.md's runs 3b to 17 did)."""
    fractions = [pass_start_fraction(seed) for seed in range(8)]
    assert len(set(fractions)) == 8 and all(0 <= f < 1 for f in fractions)
    corpus = Corpus([str(synthetic_corpus)])
    rows = []
    for seed in (1, 2):
        run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, f"seed-{seed}", max_steps=1, seed=seed)
        batcher = Batcher(corpus, Vocabulary.load(run / "vocab.txt"), range(4), 4, 6, seed, None,
                          pass_start_fraction=pass_start_fraction(seed))
        batcher.next_batch()
        rows.append(load_checkpoint(run).rows)
        assert rows[-1] == batcher.positions()
        batcher.close()
    assert rows[0] != rows[1]


def test_vocab_orders_specials_then_by_descending_frequency():
    counts = Counter({"b": 2, "a": 5, "c": 2, "rare": 1})
    vocab = Vocabulary.from_counts(counts, min_count=2)
    assert vocab.tokens == ["<S>", "</S>", "<UNK>", "a", "b", "c"]
    assert vocab.token_id("rare") == vocab.unk_id == 2
    assert Vocabulary.from_counts(counts, max_size=4).tokens == ["<S>", "</S>", "<UNK>", "a"]


def test_bad_inputs_get_errors_that_name_the_problem(tmp_path: Path):
    with pytest.raises(CorpusError, match="no such corpus file"):
        Corpus([str(tmp_path / "missing.txt")])
    with pytest.raises(CorpusError, match="matches no file"):
        Corpus([str(tmp_path / "none-*.txt")])
    (tmp_path / "empty.txt").write_text("\n \n", encoding="utf-8")
    with pytest.raises(CorpusError, match="holds no tokens"):
        Corpus([str(tmp_path / "empty.txt")])
    (tmp_path / "vocab.txt").write_text("the\ncat\n<UNK>\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match="lacks <S>, </S>"):
        Vocabulary.load(tmp_path / "vocab.txt")
    (tmp_path / "spaced.txt").write_text("<S>\n</S>\n\n<UNK>\nthe\nfoo bar\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match="line 6 holds 'foo bar'"):  # the file's line, blank ones counted
        Vocabulary.load(tmp_path / "spaced.txt")
    (tmp_path / "twice.txt").write_text("<S>\n\n</S>\n<UNK>\nthe\nthe\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match=r"appears twice \(lines 5 and 6\)"):
        Vocabulary.load(tmp_path / "twice.txt")
    (tmp_path / "bom.txt").write_text("\ufeff<S>\n</S>\n<UNK>\nthe\n", encoding="utf-8")  # a Windows editor's
    assert Vocabulary.load(tmp_path / "bom.txt").tokens == ["<S>", "</S>", "<UNK>", "the"]


def test_a_file_two_patterns_name_is_read_once(tmp_path: Path):
    (tmp_path / "a.txt").write_text("x y\n")
    (tmp_path / "b.txt").write_text("z\n")
    corpus = Corpus([str(tmp_path / "a.txt"), str(tmp_path / "*.txt")])
    assert corpus.paths == [tmp_path / "a.txt", tmp_path / "b.txt"]
    assert corpus.count_tokens() == Counter({"x": 1, "y": 1, "z": 1})


def test_a_file_whose_name_holds_glob_characters_is_that_file_not_a_pattern(tmp_path: Path):
    """`notes[1].txt` was read as a pattern: refused as matching nothing, or `notes1.txt` read in its place."""
    (tmp_path / "notes[1].txt").write_text("the named file\n")
    (tmp_path / "notes1.txt").write_text("another file\n")
    corpus = Corpus([str(tmp_path / "notes[1].txt")])
    assert corpus.paths == [tmp_path / "notes[1].txt"]
    assert list(corpus.sentences()) == [["the", "named", "file"]]
    assert Corpus([str(tmp_path / "notes[0-9].txt")]).paths == [tmp_path / "notes1.txt"]  # a pattern still globs


def test_training_reads_a_line_as_the_embedder_does(tmp_path: Path):
    """A byte-order mark made a word of its own (``\\ufeffThe``), a control character joined two words."""
    (tmp_path / "a.txt").write_bytes(b"\xef\xbb\xbfThe cat\nthe\x01dog\n")
    assert list(Corpus([str(tmp_path / "a.txt")]).sentences()) == [["The", "cat"], ["the", "dog"]]
    batcher = Batcher(Corpus([str(tmp_path / "a.txt")]), Vocabulary.from_counts(Counter({"The": 1})), range(1), 1,
                      3, seed=0, max_epochs=1)
    row = batcher.readers[0].take(6)
    assert row.forward_targets == ["The", "cat", "</S>", "the", "dog", "</S>"]


def test_a_share_that_is_empty_in_one_shard_order_only_is_skipped_and_one_that_always_is_refused(tmp_path: Path):
    """With shards, a row's share can fall inside one long line in one pass's order and hold lines in the next;
    only a share that never holds a line start is 'too small' (it stopped runs midway)."""
    (tmp_path / "a.txt").write_text("the cat sat\n" * 40)
    (tmp_path / "b.txt").write_text("a dog ran off\n" * 30)
    (tmp_path / "c.txt").write_text("w " * 375 + "\n" + "ok\n" * 20)
    corpus = Corpus([str(tmp_path / name) for name in ("a.txt", "b.txt", "c.txt")])
    vocab = Vocabulary.from_counts(corpus.count_tokens())
    batcher = Batcher(corpus, vocab, range(4), 4, 5, seed=1, max_epochs=None)
    read = Counter()
    for _ in range(2000):
        batch = batcher.next_batch()
        assert batch is not None
        read.update(vocab.tokens[target] for target in batch.forward_targets.reshape(-1).tolist())
    epochs = [reader.position.epoch for reader in batcher.readers]
    batcher.close()
    assert min(epochs) >= 5 and {"cat", "dog", "w", "ok"} <= set(read)

    (tmp_path / "long.txt").write_text("w " * 900 + "\n" + "ok\n" * 3)
    with pytest.raises(CorpusError, match=r"row 1's share of it .* holds no sentence start"):
        Batcher(Corpus([str(tmp_path / "long.txt")]), vocab, range(4), 4, 5, seed=0, max_epochs=None).next_batch()


def test_rows_share_one_handle_per_file(tmp_path: Path):
    """64 rows over 20 shards held a handle per row and file (past the usual limit of 1,024 open files)."""
    for k in range(20):
        (tmp_path / f"shard-{k:02d}.txt").write_text("".join(f"w{k} w{i % 7} the end\n" for i in range(40)))
    corpus = Corpus([str(tmp_path / "shard-*.txt")])
    vocab = Vocabulary.from_counts(corpus.count_tokens())

    def open_files() -> int:
        return len(list(Path("/proc/self/fd").iterdir()))

    before = open_files()
    batcher = Batcher(corpus, vocab, range(64), 64, 20, 0, None)
    for _ in range(100):
        batcher.next_batch()
    assert open_files() - before <= len(corpus.paths)
    batcher.close()
    assert open_files() == before


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_a_vocabulary_file_reads_the_same_tokens_whatever_its_line_endings(tmp_path: Path, ending: str):
    tokens = ["<S>", "</S>", "<UNK>", "bank", "río"]
    path = tmp_path / "vocab.txt"
    path.write_bytes(("\ufeff" + ending.join(tokens) + ending).encode("utf-8"))
    assert Vocabulary.load(path).tokens == tokens


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_training_reads_sentences_at_every_line_end_the_embedder_reads(tmp_path: Path, ending: str):
    """A lone carriage return (classic Mac OS) ends a sentence, as `elmo embed` and vocabulary files read it; it was
    read as a space, so a whole file of them trained (and was scored) as one sentence."""
    lines = ["the cat sat", "", "a dog ran far", "it rained"]
    (tmp_path / "lf.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "other.txt").write_bytes((ending.join(lines) + ending).encode("utf-8"))
    expected = [line.split() for line in lines if line]
    assert list(Corpus([str(tmp_path / "other.txt")]).sentences()) == expected
    vocab = Vocabulary.from_counts(Corpus([str(tmp_path / "lf.txt")]).count_tokens())

    def stream(name: str) -> list[dict[str, list[str]]]:
        return _row_streams(Batcher(Corpus([str(tmp_path / name)]), vocab, range(1), 1, 4, seed=0, max_epochs=2),
                            vocab)

    assert stream("other.txt") == stream("lf.txt")


def test_rows_share_a_text_of_lone_carriage_returns_as_one_of_newlines_and_resume_in_it(tmp_path: Path):
    """With a lone carriage return a line end, a classic Mac OS file (the same bytes but for the line ends) is cut
    into the same rows as its newline twin: it was one line that row 0 read whole while the other rows were refused
    as empty. A row saved at a carriage return's line start resumes there."""
    lines = [" ".join(f"w{(7 * k + j) % 23}" for j in range(1 + k % 5)) for k in range(40)]
    (tmp_path / "lf.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "cr.txt").write_text("\r".join(lines) + "\r", encoding="utf-8")
    vocab = Vocabulary.from_counts(Corpus([str(tmp_path / "lf.txt")]).count_tokens())

    def batcher(name: str, positions: list[RowPosition] | None = None) -> Batcher:
        return Batcher(Corpus([str(tmp_path / name)]), vocab, range(3), 3, 5, seed=0, max_epochs=2,
                       positions=positions)

    assert _row_streams(batcher("cr.txt"), vocab) == _row_streams(batcher("lf.txt"), vocab)
    whole = batcher("cr.txt")
    for _ in range(4):
        whole.next_batch()
    saved = [RowPosition.from_json(json.loads(json.dumps(position.to_json()))) for position in whole.positions()]
    assert _row_streams(batcher("cr.txt", saved), vocab) == _row_streams(whole, vocab)


def test_a_vocabulary_given_as_a_pipe_is_named_as_one(tmp_path: Path):
    """`--vocab <(cat vocab.txt)` said '/dev/fd/63: no such vocabulary file', as if the name were wrong."""
    import os

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(VocabularyError, match=r"pipe is not a regular file \(a pipe, as <\(\.\.\.\) gives\?\)"):
        Vocabulary.load(pipe)


@pytest.mark.parametrize("first_block", [1, 2, 3, 512])
def test_a_line_read_at_its_start_ends_at_a_newline_crlf_or_lone_carriage_return(monkeypatch, first_block: int):
    """Against a regular expression over random bytes, with blocks so small that a block often ends on a carriage
    return (its meaning is the next byte's) and a line spans several blocks."""
    import io
    import random
    import re

    from elmo.training import corpus

    monkeypatch.setattr(corpus, "_FIRST_BLOCK", first_block)
    rng = random.Random(first_block)
    for _ in range(500):
        data = bytes(rng.choice(b"ab\r\n ") for _ in range(rng.randint(0, 60)))
        ends = [match.end() for match in re.finditer(rb"\r\n|\n|\r", data)]
        handle = io.BufferedReader(io.BytesIO(data))
        for start in [0, *ends]:
            if start < len(data):
                end = next((end for end in ends if end > start), len(data))
                assert corpus._read_line_at(handle, start) == data[start:end]
                assert handle.tell() == end
