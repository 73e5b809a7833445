"""Task data: tag schemes to BIO, characters matched to words, the file formats, fixed splits, and (slow)
the four packaged sets as documented."""

import re
from pathlib import Path

import numpy as np
import pytest

from elmo.tasks import data, packaged, pipeline
from elmo.tasks.data import Example, read_labelled, read_tagged, split, to_bio
from elmo.tasks.features import cache_layers, load_layers, sentences_sha256
from elmo.tasks.qa_data import read_qa, write_qa


def test_to_bio_keeps_every_entity_span():
    assert to_bio(["B-LOC", "M-LOC", "E-LOC", "S-PER", "O", "S-ORG"]) == ["B-LOC", "I-LOC", "I-LOC", "B-PER", "O",
                                                                         "B-ORG"]
    assert to_bio(["S-PER", "S-PER"]) == ["B-PER", "B-PER"]  # two one-character entities stay two
    assert to_bio(["I-PER", "I-PER", "I-LOC"]) == ["B-PER", "I-PER", "B-LOC"]  # IOB1
    with pytest.raises(ValueError, match="'X-PER'"):
        to_bio(["X-PER"])


def test_characters_take_their_words_and_positions():
    example = Example.of_characters(list("北京市很大"), ["北京市", "很", "大"], ["B-LOC", "I-LOC", "I-LOC", "O", "O"])
    assert example.word_index == (0, 0, 0, 1, 2)
    assert example.word_positions() == [0, 1, 2, 3, 3]  # B M E S S
    with pytest.raises(ValueError, match="do not spell"):
        Example.of_characters(list("北京"), ["上海"])


def test_read_tagged_accepts_tabs_spaces_and_bmes(tmp_path: Path):
    path = tmp_path / "msra.txt"
    path.write_bytes("北 B-LOC\r\n京 E-LOC\r\n好 O\r\n\r\n\r\nA\tS-PER\r\n".encode())
    assert read_tagged(path) == [(["北", "京", "好"], ["B-LOC", "I-LOC", "O"]), (["A"], ["B-PER"])]
    path.write_text("token-without-tag\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"msra\.txt:1"):
        read_tagged(path)


@pytest.mark.parametrize(("content", "message"), [
    ("pos\tIt's a charming film\nneg\tdull\n", r"given\.txt:1: the field \"It's a charming film\" holds spaces"),
    ("It rained today .\nThe end .\n", r"given\.txt:2: 3 fields where line 1 has 4"),
    ('{"id": "q1", "question": "who ?"}\n{"id": "q2", "question": "where is it ?"}\n',
     r"given\.txt:2: 7 fields where line 1 has 5"),
], ids=["classifier-file", "running-text", "json-lines"])
def test_text_to_tag_that_is_not_one_token_a_line_is_refused_naming_its_line(tmp_path: Path, content: str,
                                                                             message: str):
    """A tagger's input read a first field a line: a classifier's file became one sentence of its labels, and
    running text or JSON lines one of first words, with no error."""
    path = tmp_path / "given.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_tagged(path, require_tags=False)


def test_a_token_or_text_the_embedder_would_refuse_is_refused_on_reading_naming_its_line(tmp_path: Path):
    """A control character in a token, or a text of nothing the readers keep, was refused only when its split was
    embedded (after the splits before it), naming no file or line; a text of a zero-width space became the
    token U+200B."""
    tagged, labelled = tmp_path / "a.bio", tmp_path / "a.tsv"
    tagged.write_text("ok\tO\nbell\x07\tO\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"a\.bio:2: the token holds the control character U\+0007"):
        read_tagged(tagged)
    for text in ("\x01", "\u200b\u00ad"):
        labelled.write_text(f"pos\tgood\nneg\t{text}\n", encoding="utf-8")
        with pytest.raises(ValueError, match=r"a\.tsv:2: the text .* holds only control characters or invisible"):
            read_labelled(labelled)
    with pytest.raises(ValueError, match=r"has no words once cleaned and tokenized"):
        data.classification_examples([("pos", "\u200b")], pipeline.text_tokenizer_of("en"))


def test_text_to_tag_in_columns_or_one_token_a_line_is_read_a_token_a_line(tmp_path: Path):
    path = tmp_path / "given.txt"
    path.write_text("EU NNP B-NP\nrejects VBZ B-VP\n\nOK UH O\n", encoding="utf-8")
    assert read_tagged(path, require_tags=False) == [(["EU", "rejects"], ["O", "O"]), (["OK"], ["O"])]
    path.write_text("mr\nbob\n\nran\n", encoding="utf-8")
    assert read_tagged(path, require_tags=False) == [(["mr", "bob"], ["O", "O"]), (["ran"], ["O"])]
    path.write_text("New York\tB-LOC\nis\tO\n", encoding="utf-8")  # a token may hold a space, as training reads it
    assert read_tagged(path, require_tags=False) == [(["New York", "is"], ["O", "O"])]


def test_a_byte_order_mark_is_not_part_of_the_first_token_label_or_row(tmp_path: Path):
    """Editors on Windows save UTF-8 with one; it would make a class of its own or a token of no vector."""
    tagged, labelled, qa = tmp_path / "a.bio", tmp_path / "a.tsv", tmp_path / "a.jsonl"
    tagged.write_text("\ufeffParis\tB-LOC\nis\tO\n", encoding="utf-8")
    labelled.write_text("\ufeffpos\tgreat film\n", encoding="utf-8")
    qa.write_text('\ufeff{"id": "q1", "question": "who ?", "passage": "Ann came .", '
                  '"answers": [{"text": "Ann", "start": 0}]}\n', encoding="utf-8")
    assert read_tagged(tagged) == [(["Paris", "is"], ["B-LOC", "O"])]
    assert read_labelled(labelled) == [("pos", "great film")]
    assert [example.key for example in read_qa(qa, str.split)] == ["q1"]


# Characters that str.splitlines() takes for line ends, though a file's lines end only at \n (or \r\n).
NOT_LINE_ENDS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def test_a_row_holding_characters_splitlines_breaks_at_stays_one_row(tmp_path: Path):
    labelled, tagged = tmp_path / "a.tsv", tmp_path / "a.bio"
    labelled.write_text(f"pos\tfirst{NOT_LINE_ENDS}still first\r\nneg\tsecond\n", encoding="utf-8")
    assert read_labelled(labelled) == [("pos", f"first{NOT_LINE_ENDS}still first"), ("neg", "second")]
    tagged.write_text("a\u2028\u2029b\tB-LOC\nc\tO\n", encoding="utf-8")
    assert read_tagged(tagged) == [(["a\u2028\u2029b", "c"], ["B-LOC", "O"])]
    tagged.write_text(f"a{NOT_LINE_ENDS}b\tB-LOC\nc\tO\n", encoding="utf-8")  # one line, refused for its controls
    with pytest.raises(ValueError, match=r"a\.bio:1: the token holds the control character U\+000B"):
        read_tagged(tagged)
    qa = tmp_path / "a.jsonl"
    rows = [{"id": f"q{n}", "question": f"which{character}one ?", "passage": f"this{character}one here",
             "answers": [{"text": "here", "start": 9}]} for n, character in enumerate(NOT_LINE_ENDS)]
    write_qa(qa, rows)
    assert [(example.key, example.question, example.passage) for example in read_qa(qa, str.split)] == [
        (row["id"], row["question"], row["passage"]) for row in rows]


def test_text_to_tag_ignores_its_tag_column_and_a_bad_tag_is_named_with_its_line(tmp_path: Path):
    """Input to be tagged may carry a column of another kind (POS) or none; a training file's tag must be BIO,
    BMES or BIOES, and the error says where the one that is not sits."""
    path = tmp_path / "pos.conll"
    path.write_text("EU\tNNP\nrejects VBZ\nit\n\nNew York\n", encoding="utf-8")
    assert read_tagged(path, require_tags=False) == [(["EU", "rejects", "it"], ["O", "O", "O"]), (["New"], ["O"])]
    with pytest.raises(ValueError, match=r"pos\.conll:1: tag 'NNP'"):
        read_tagged(path)
    path.write_text("Paris\tB-LOC\n\nBerlin\tB-LOC\nis\tVBZ\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"pos\.conll:4: tag 'VBZ'"):
        read_tagged(path)


@pytest.mark.parametrize("read", [read_tagged, read_labelled, lambda path: read_qa(path, str.split)])
def test_bytes_that_are_not_utf8_are_named_by_file_byte_and_line(tmp_path: Path, read):
    """Python's own error named no file ("'utf-8' codec can't decode byte 0xe9 in position 8")."""
    path = tmp_path / "latin1.txt"
    # byte order mark (3 bytes) + "ab\tO\n" (5 bytes) + "caf" (3 bytes): the Latin-1 é is byte 11, on line 2
    path.write_bytes(b"\xef\xbb\xbfab\tO\ncaf\xe9\tO\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))} is not UTF-8 text: byte 11 "
                                         r"\(line 2, counting from 1\) is 0xe9 \(invalid continuation byte\)"):
        read(path)


@pytest.mark.parametrize(("read", "what"), [(read_tagged, "tagging"), (read_labelled, "classification"),
                                            (lambda path: read_qa(path, str.split), "JSON-lines QA")])
def test_a_directory_given_as_a_data_file_is_called_one(tmp_path: Path, read, what: str):
    """It was reported as "no such tagging file", of a path that exists."""
    with pytest.raises(ValueError, match=f"^{re.escape(str(tmp_path))} is a directory; expected a {what} file$"):
        read(tmp_path)


def test_split_is_fixed_by_its_seed_and_disjoint():
    first = split(range(100), [60, 10, 30], seed=0)
    assert first == split(range(100), [60, 10, 30], seed=0)
    assert first != split(range(100), [60, 10, 30], seed=1)
    assert sorted(item for part in first for item in part) == list(range(100))
    with pytest.raises(ValueError, match="100 items"):
        split(range(100), [90, 20], seed=0)


def test_a_text_is_kept_once_and_not_at_all_when_it_comes_with_two_labels():
    reviews = [("pos", "good"), ("neg", "bad"), ("pos", "good"), ("pos", "fine"), ("neg", "fine"), ("neg", "dull")]
    assert data.distinct_examples(reviews, labelled_first=True) == [("pos", "good"), ("neg", "bad"), ("neg", "dull")]
    tweets = [(["a", "b"], ["O", "O"]), (["a", "b"], ["O", "O"]), (["c"], ["B-x"]), (["c"], ["O"]), (["d"], ["O"])]
    assert data.distinct_examples(tweets, labelled_first=False) == [(["a", "b"], ["O", "O"]), (["d"], ["O"])]


def test_one_text_tokenized_two_ways_or_cased_otherwise_is_one_text():
    """A retweet of WNUT-16 as ``don't`` and as ``do n't``: one text with the same entities, kept once; the same
    words with other entities have two labels, and neither is kept."""
    tweets = [(["And", "don't", "worry", "Ben"], ["O", "O", "O", "B-person"]),
              (["and", "do", "n't", "worry", "Ben"], ["O", "O", "O", "O", "B-person"]),
              (["I", "'m", "at", "Paris"], ["O", "O", "O", "B-loc"]),
              (["I'm", "at", "Paris"], ["O", "O", "B-person"]),
              (["Ben", "Stiller"], ["B-person", "I-person"]), (["Ben", "Stiller"], ["B-person", "B-person"])]
    assert data.distinct_examples(tweets, labelled_first=False) == [tweets[0]]
    reviews = [("pos", "A good  film"), ("pos", "a good film"), ("neg", "\uff2f\uff2b then"), ("pos", "ok then")]
    assert data.distinct_examples(reviews, labelled_first=True) == [("pos", "A good  film")]


def test_feature_cache_is_float16_and_rebuilt_for_other_words(tmp_path: Path, fixture_dir: Path):
    import torch

    from elmo.embedder import Embedder

    torch.set_num_threads(1)
    embedder = Embedder.load(str(fixture_dir))
    sentences = [["The", "cat"], ["A", "dog", "ran"]]
    path = cache_layers(embedder, sentences, tmp_path / "f.h5")
    layers = load_layers(path, 2)
    expected = embedder.embed(sentences)
    assert layers[1].dtype == np.float16 and layers[1].shape == expected[1].shape
    np.testing.assert_allclose(layers[1], expected[1], atol=2e-3, rtol=2e-3)
    cache_layers(embedder, [["The", "cat"], ["A", "cow", "ran"]], path)
    np.testing.assert_allclose(load_layers(path)[1], embedder.embed([["A", "cow", "ran"]])[0], atol=2e-3, rtol=2e-3)
    with pytest.raises(ValueError, match="expected 3"):
        load_layers(path, 3)


def test_feature_cache_is_rebuilt_for_another_model_of_the_same_shape(tmp_path: Path, fixture_bilm):
    import torch

    from elmo import BiLM
    from elmo.embedder import Embedder

    torch.set_num_threads(1)
    sentences = [["The", "cat"], ["A", "dog", "ran"]]
    path = cache_layers(Embedder(fixture_bilm), sentences, tmp_path / "f.h5")
    written = path.stat().st_ino  # a rewrite makes a new file (written aside, then renamed onto it)
    assert cache_layers(Embedder(fixture_bilm), sentences, path) == path and path.stat().st_ino == written
    torch.manual_seed(0)
    other = Embedder(BiLM(fixture_bilm.config).eval())  # the same options, other weights
    cache_layers(other, sentences, path)
    for stored, fresh in zip(load_layers(path), other.embed(sentences), strict=True):
        np.testing.assert_allclose(stored, fresh, atol=2e-3, rtol=2e-3)
    assert not np.allclose(load_layers(path)[1], Embedder(fixture_bilm).embed(sentences)[1], atol=1e-2)


def test_a_damaged_feature_cache_is_made_again_and_one_that_cannot_be_loaded_is_named(tmp_path: Path, fixture_bilm,
                                                                                     caplog):
    """A truncated cache file stopped `elmo task train` with HDF5's message, naming no file; it is a cache."""
    import logging

    import torch

    from elmo.embedder import Embedder

    torch.set_num_threads(1)
    embedder = Embedder(fixture_bilm)
    sentences = [["The", "cat"], ["A", "dog", "ran"]]
    path = cache_layers(embedder, sentences, tmp_path / "f.h5")
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    with caplog.at_level(logging.WARNING, logger="elmo.tasks.features"):
        assert cache_layers(embedder, sentences, path) == path
    assert f"{path} cannot be read as a feature cache" in caplog.text
    np.testing.assert_allclose(load_layers(path, 2)[1], embedder.embed(sentences)[1], atol=2e-3, rtol=2e-3)
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=f"{path}: the feature cache cannot be read"):
        load_layers(path, 2)


@pytest.mark.slow
def test_packaged_sets_have_their_documented_sizes():
    assert len(packaged.wnut16()) == 2394
    msra = packaged.msra_test()
    assert len(msra) == 5000 and all(tag[:2] in ("O", "B-", "I-") for _, tags in msra for tag in tags)
    reviews = packaged.movie_reviews()
    assert len(reviews) == 10605 - 533 and {label for label, _ in reviews} == {"pos", "neg"}
    chinese = packaged.chinese_reviews()
    assert sum(label == "neg" for label, _ in chinese) == 18575 and len(chinese) == 18575 + 16548


def test_task_text_is_tokenized_as_the_embedder_reads_it(fixture_dir):
    """Task texts went to the tokenizer uncleaned: a byte-order mark became a token and a control character joined
    two words, where the embedder (and elmo embed, and training) read them as nothing and a space."""
    from elmo.embedder import Embedder
    from elmo.tasks.pipeline import text_tokenizer_of

    text = "\ufeffThe bank\x01closed early ."
    assert text_tokenizer_of(str(fixture_dir))(text) == Embedder.load(str(fixture_dir)).tokenize(text) == \
        ["The", "bank", "closed", "early", "."]


def test_feature_cache_is_rebuilt_for_the_same_model_reading_long_sentences_otherwise(tmp_path: Path, fixture_bilm):
    import torch

    from elmo.embedder import Embedder
    from elmo.stateful_embedder import StatefulEmbedder

    torch.set_num_threads(1)
    long = [f"w{i % 7}" for i in range(40)]  # cut into windows by an embedder of 8-token windows
    sentences = [long, ["A", "dog", "ran"]]
    path = cache_layers(Embedder(fixture_bilm), sentences, tmp_path / "f.h5")
    for other in (Embedder(fixture_bilm, max_window_tokens=8, window_context=2), StatefulEmbedder(fixture_bilm)):
        written = path.stat().st_ino
        cache_layers(other, sentences, path)
        assert path.stat().st_ino != written, type(other).__name__
        fresh = (StatefulEmbedder(fixture_bilm) if isinstance(other, StatefulEmbedder) else other).embed(sentences)
        for stored, expected in zip(load_layers(path), fresh, strict=True):
            np.testing.assert_allclose(stored, expected, atol=2e-3, rtol=2e-3)


def test_a_stateful_embedders_features_are_embedded_afresh_every_time(tmp_path: Path, fixture_bilm):
    """A StatefulEmbedder's vectors depend on its batch size and on the state it carries in; a cache it wrote was
    handed to the next StatefulEmbedder of another batch size as if it were its own."""
    import torch

    from elmo.stateful_embedder import StatefulEmbedder

    torch.set_num_threads(1)
    sentences = [["The", "cat", "sat"], ["A", "dog", "ran", "far"], ["It", "rained"]]
    path = cache_layers(StatefulEmbedder(fixture_bilm), sentences, tmp_path / "f.h5", batch_size=1)
    cache_layers(StatefulEmbedder(fixture_bilm), sentences, path, batch_size=3)
    in_one_batch = StatefulEmbedder(fixture_bilm).embed(sentences, batch_size=3)
    one_by_one = StatefulEmbedder(fixture_bilm).embed(sentences, batch_size=1)
    assert np.abs(in_one_batch[2] - one_by_one[2]).max() > 0.01  # the premise: the batch size changes the vectors
    for stored, expected in zip(load_layers(path), in_one_batch, strict=True):
        np.testing.assert_allclose(stored, expected, atol=2e-3, rtol=2e-3)


def test_a_cache_records_the_words_as_the_embedder_reads_them(fixture_bilm, tmp_path):
    """A word given decomposed is embedded composed (``Embedder.tokenize`` cleans given tokens), so the cache of
    the composed words is the same cache, and one recorded for the raw words (before cleaning) is not."""
    import h5py

    from elmo.embedder import Embedder

    embedder = Embedder(fixture_bilm)
    path = cache_layers(embedder, [["the", "cafe\u0301"]], tmp_path / "f.h5")
    with h5py.File(path, "r") as handle:
        assert handle.attrs["sentences_sha256"] == sentences_sha256([["the", "caf\u00e9"]])
    written = path.stat().st_ino  # a rewrite goes through a new file renamed into place
    assert cache_layers(embedder, [["the", "caf\u00e9"]], path) == path and path.stat().st_ino == written
