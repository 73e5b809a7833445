import json
import signal

import numpy as np
import pytest

from elmo.cli import main
from elmo.command_line import MAX_THREADS
from elmo.embedder import Embedder
from elmo.search import ContextIndex
from elmo.tokenizers import TOKENIZERS


@pytest.fixture
def fixture_corpus(fixture_sentences, tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(" ".join(tokens) for tokens in fixture_sentences) + "\n", encoding="utf-8")
    return path


def test_index_then_neighbors_json_equals_brute_force_over_the_embedder(fixture_dir, fixture_sentences,
                                                                         fixture_corpus, tmp_path, capsys):
    assert main(["index", str(fixture_corpus), "--model", str(fixture_dir), "--out", str(tmp_path / "index"),
                 "--layer", "1", "--quiet"]) == 0
    assert "indexed" in capsys.readouterr().out
    query = "The market for shares fell sharply on Monday ."
    assert main(["neighbors", "--index", str(tmp_path / "index"), "--sentence", query, "--word", "market",
                 "--k", "5", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)

    embedder = Embedder.load(str(fixture_dir))
    query_vector = embedder.embed([query.split()], [0, 1, 0])[0][1].astype(np.float64)
    scored = [(float(v @ query_vector / np.linalg.norm(v) / np.linalg.norm(query_vector)), line, position)
              for line, vectors in enumerate(embedder.embed(fixture_sentences, [0, 1, 0]))
              for position, v in enumerate(vectors.astype(np.float64))]
    best = sorted(scored, reverse=True)[:5]
    assert [record["score"] for record in found] == pytest.approx([score for score, _, _ in best], abs=2e-3)
    for record, (_, line, position) in zip(found, best, strict=True):
        assert record["sentence"] == " ".join(fixture_sentences[line])
        assert (record["token_index"], record["token"]) == (position, fixture_sentences[line][position])


def test_plain_neighbors_highlight_the_word_and_show_layer0_words(fixture_dir, fixture_sentences, fixture_corpus,
                                                                  tmp_path, capsys):
    main(["index", str(fixture_corpus), "--model", str(fixture_dir), "--out", str(tmp_path / "index"), "--quiet"])
    capsys.readouterr()
    assert main(["neighbors", "--index", str(tmp_path / "index"), "--sentence", "the schools will open",
                 "--word", "schools", "--same-word", "--k", "3"]) == 0
    out = capsys.readouterr().out
    uses = sum(tokens.count("schools") for tokens in fixture_sentences)
    assert uses >= 2
    assert out.count("[schools]") == min(3, uses)
    assert "under the model's layer 0" in out
    # a word the corpus lacks gets a line saying why there is no layer-0 table (it was left out unsaid)
    assert main(["neighbors", "--index", str(tmp_path / "index"), "--sentence", "the zebras will open",
                 "--word", "zebras", "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert "under the model's layer 0" not in out
    assert "no layer-0 neighbours: the corpus's vocabulary lacks 'zebras'" in out


def test_senses_command_writes_a_png(fixture_dir, fixture_corpus, tmp_path, capsys):
    main(["index", str(fixture_corpus), "--model", str(fixture_dir), "--out", str(tmp_path / "index"), "--quiet"])
    assert main(["senses", "the", "--index", str(tmp_path / "index"), "--clusters", "2",
                 "--out", str(tmp_path / "the.png")]) == 0
    assert (tmp_path / "the.png").read_bytes()[:4] == b"\x89PNG"
    output = capsys.readouterr().out
    example_lines = [line for line in output.splitlines() if line.startswith("  sense ")]
    assert len(example_lines) == 2 and all(line.count("[the]") + line.count("[The]") == 1 for line in example_lines)
    uses = len(ContextIndex.load(tmp_path / "index").rows_of("the"))
    assert f"'the': {uses} occurrences, 2 clusters" in output
    assert main(["senses", "the", "--index", str(tmp_path / "index"), "--clusters", "2", "--max-occurrences", "3",
                 "--out", str(tmp_path / "the.png")]) == 0
    assert f"'the': 3 of {uses} occurrences (a random sample), 2 clusters" in capsys.readouterr().out
    assert main(["senses", "the", "--index", str(tmp_path / "index"), "--out", str(tmp_path / "the.svg")]) == 2
    assert "give a file name ending in .png" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the parser names the option and its range (the library's name came after)
        main(["senses", "the", "--index", str(tmp_path / "index"), "--max-occurrences", "2", "--out",
              str(tmp_path / "the.png")])
    assert "argument --max-occurrences: 2: expected a whole number >= 3" in capsys.readouterr().err
    (tmp_path / "dir.png").mkdir()  # refused before the clustering, as elmo demo refuses it (it failed after)
    assert main(["senses", "the", "--index", str(tmp_path / "index"), "--out", str(tmp_path / "dir.png")]) == 2
    assert "is a directory; expected the name of a file to write" in capsys.readouterr().err
    assert not (tmp_path / "the.svg").exists()


@pytest.mark.parametrize("flags", [["--glove"], ["--static-k", "3"]])
def test_neighbors_json_with_the_static_words_table_is_refused_before_the_index_loads(flags, tmp_path, capsys):
    """--json printed the neighbours only, dropping the GloVe or static-vector words asked for without a word."""
    assert main(["neighbors", "--index", str(tmp_path / "no-index"), "--sentence", "a b", "--word", "a", "--json",
                 *flags]) == 2
    assert f"{flags[0]} adds the nearest words by static vectors to the printed table; --json prints the " \
           "neighbours only" in capsys.readouterr().err


def test_errors_are_one_line_naming_the_input(tmp_path, capsys):
    assert main(["neighbors", "--index", str(tmp_path / "nowhere"), "--sentence", "a b", "--word", "a"]) == 2
    error = capsys.readouterr().err
    assert "nowhere: no such index directory" in error and len(error.splitlines()) == 1, error
    (tmp_path / "unfinished").mkdir()
    assert main(["neighbors", "--index", str(tmp_path / "unfinished"), "--sentence", "a b", "--word", "a"]) == 2
    assert "unfinished is not a finished index (no meta.json)" in capsys.readouterr().err


@pytest.mark.parametrize("word", ["Schools", " schools "])  # cleaned as the search cleans it: was "no vector"
def test_glove_contrast_lists_glove_nearest_words_by_cosine(word, fixture_dir, fixture_corpus, tmp_path, capsys,
                                                             monkeypatch):
    from elmo.static_vectors import StaticVectors

    words = ["schools", "colleges", "teachers", "rivers"]
    matrix = np.array([[1.0, 0.0], [0.9, 0.1], [0.6, 0.8], [-1.0, 0.2]], np.float32)  # cosines to row 0: .99, .6, -.98
    monkeypatch.setattr(StaticVectors, "glove", classmethod(lambda cls: cls(words, matrix, lowercase=True)))
    main(["index", str(fixture_corpus), "--model", str(fixture_dir), "--out", str(tmp_path / "index"), "--quiet"])
    capsys.readouterr()
    assert main(["neighbors", "--index", str(tmp_path / "index"), "--sentence", "the schools will open",
                 "--word", word, "--glove", "--static-k", "2"]) == 0
    glove_part = capsys.readouterr().out.split("under GloVe 6B 50d:")[1].split()
    assert glove_part == ["0.994", "colleges", "0.600", "teachers"]


@pytest.mark.parametrize(("content", "expected"), [
    (b"", "corpus.txt is empty; expected a text corpus file"),
    (b"\n  \n\n", "corpus.txt holds only blank lines"),
    (b"\xef\xbb\xbf", "corpus.txt holds only blank lines"),  # a byte-order mark alone: no line, but not empty
    (b"\x7fELF\x02\x01\x01\x00\x00", "corpus.txt holds a NUL byte at byte 7 (line 1, counting from 1)"),
], ids=["empty", "blank", "byte-order mark", "binary"])
def test_a_corpus_without_text_is_refused_before_the_model_loads_and_leaves_nothing(content, expected, tmp_path,
                                                                                   capsys, monkeypatch):
    def load(*args, **kwargs):
        raise AssertionError("the model was loaded before the corpus was checked")

    monkeypatch.setattr(Embedder, "load", load)
    (tmp_path / "corpus.txt").write_bytes(content)
    assert main(["index", str(tmp_path / "corpus.txt"), "--out", str(tmp_path / "idx-empty"), "--quiet"]) == 2
    assert expected in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.txt"]


def test_sigterm_keeps_the_last_checkpoint_and_resume_refuses_a_corpus_edited_at_the_same_size(
        fixture_dir, fixture_corpus, tmp_path, capsys, monkeypatch, interrupt_after):
    command = ["index", str(fixture_corpus), "--model", str(fixture_dir), "--out", str(tmp_path / "index"),
               "--batch-size", "1", "--quiet"]  # a checkpoint every 16 lines
    with monkeypatch.context() as patch:
        interrupt_after(patch, 19, signal.SIGTERM)
        assert main(command) == 143
    assert "elmo index: interrupted; run the same command with --resume" in capsys.readouterr().err
    assert not (tmp_path / "index").exists()

    text = fixture_corpus.read_bytes()
    fixture_corpus.write_bytes(text[:3][::-1] + text[3:])  # the same size, other words in line 0
    assert main([*command, "--resume"]) == 2
    assert "was made with other settings or input" in capsys.readouterr().err
    fixture_corpus.write_bytes(text)
    assert main([*command, "--resume"]) == 0
    assert "(resumed: 16 lines already done)" in capsys.readouterr().out


def test_index_tokenizer_decides_the_tokens_indexed_their_vectors_and_how_queries_split(fixture_dir, tmp_path,
                                                                                         capsys):
    lines = ["The bank's rates rose.", "She sat on the river bank."]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    split = {name: [TOKENIZERS[name](line) for line in lines] for name in ("whitespace", "english")}
    assert split["whitespace"] != split["english"]  # so the indexes below must differ
    for name, flags in [("whitespace", []), ("english", ["--tokenizer", "english"])]:  # default: the model's own
        assert main(["index", str(corpus), "--model", str(fixture_dir), "--out", str(tmp_path / name), "--quiet",
                     *flags]) == 0
        index = ContextIndex.load(tmp_path / name)
        assert index.meta["tokenizer"] == name
        assert [index.occurrence(row).token for row in range(index.n_indexed)] == \
            [token for tokens in split[name] for token in tokens]
        assert sorted(index.words) == sorted({token for tokens in split[name] for token in tokens})
        top = Embedder.load(str(fixture_dir)).embed(split[name], "top")
        expected = np.concatenate(top) / np.linalg.norm(np.concatenate(top), axis=1, keepdims=True)
        np.testing.assert_allclose(index.vectors(), expected, atol=2e-3)  # float16
    capsys.readouterr()
    query = ["neighbors", "--sentence", "A bank's loan .", "--word", "'s", "--k", "1", "--json"]
    assert main([*query, "--index", str(tmp_path / "english")]) == 0  # the query is split as the corpus was
    assert [hit["token"] for hit in json.loads(capsys.readouterr().out)] == ["'s"]
    assert main([*query, "--index", str(tmp_path / "whitespace")]) == 2
    assert "\"'s\" is not a token of the sentence" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "expected"), [
    (["--out", "afile"], "afile is a file; the index is a directory"),
    (["--factory", "NoSuchIndex"], "--factory 'NoSuchIndex' is not a faiss index this build can make"),
    (["--words-only", "missing.txt"], "missing.txt: no such words file"),
    (["--layer", "7"], "layers is 7; a layer index must be in -3..2 (the model has 3 layers)"),
    (["--layer", "1", "--layer", "1"], "name a layer twice"),
], ids=["out-a-file", "factory", "words-only", "layer", "layer-twice"])
def test_index_options_are_checked_from_the_models_options_before_it_loads(flags, expected, fixture_dir,
                                                                           fixture_corpus, tmp_path, capsys,
                                                                           monkeypatch, no_model_load):
    """Each was refused only once the model had loaded (seconds for the shipped models)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("kept")
    assert main(["index", str(fixture_corpus), "--model", str(fixture_dir), "--out", "idx", *flags, "--quiet"]) == 2
    error = capsys.readouterr().err
    assert expected in error and len(error.splitlines()) == 1, error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile", "corpus.txt"]


@pytest.mark.parametrize(("content", "expected"), [
    # Latin-1's e acute, then the same after a byte-order mark (which the offset counts)
    (b"play\ncaf\xe9\n", "words.txt is not UTF-8 text: byte 8 (line 2, counting from 1) is 0xe9"),
    (b"\xef\xbb\xbfplay\ncaf\xe9\n", "words.txt is not UTF-8 text: byte 11 (line 2, counting from 1) is 0xe9"),
    (None, "words.txt is a directory; expected a words file"),
], ids=["latin-1", "latin-1-after-bom", "directory"])
def test_a_words_only_file_that_is_not_utf8_or_is_a_directory_is_refused_naming_it(content, expected, fixture_dir,
                                                                                    fixture_corpus, tmp_path, capsys,
                                                                                    monkeypatch, no_model_load):
    """A bare "'utf-8' codec can't decode byte 0xe9 in position 3" named no file; a directory was "no such"."""
    monkeypatch.chdir(tmp_path)
    if content is None:
        (tmp_path / "words.txt").mkdir()
    else:
        (tmp_path / "words.txt").write_bytes(content)
    assert main(["index", str(fixture_corpus), "--model", str(fixture_dir), "--out", "idx", "--words-only",
                 "words.txt", "--quiet"]) == 2
    error = capsys.readouterr().err
    assert expected in error and len(error.splitlines()) == 1, error
    assert not (tmp_path / "idx").exists() and not (tmp_path / "idx.partial").exists()


@pytest.mark.parametrize(("flags", "expected"), [
    (["--nprobe", "999999999999999999999"], "--nprobe: 999999999999999999999: expected a whole number >= 1 and <= "
                                            f"{2**31 - 1}"),
    (["--nprobe", str(2**31)], f"--nprobe: {2**31}: expected a whole number >= 1 and <= {2**31 - 1}"),
    (["--threads", "999999999999999999999"], "--threads: 999999999999999999999: expected a whole number >= 1 and "
                                             f"<= {MAX_THREADS}"),
], ids=["nprobe-beyond-int64", "nprobe-beyond-int32", "threads"])
def test_numbers_faiss_or_torch_cannot_take_are_refused_naming_the_option_before_any_work(
        flags, expected, fixture_dir, fixture_corpus, tmp_path, capsys, monkeypatch, no_model_load):
    """--nprobe was stored after the whole build and failed every query; --threads said "Overflow when unpacking
    long"."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(["index", str(fixture_corpus), "--model", str(fixture_dir), "--out", "idx", *flags, "--quiet"])
    assert exited.value.code == 2
    assert expected in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.txt"]


def test_a_folder_named_as_the_shipped_model_does_not_hide_it_from_index_and_neighbors(tmp_path, monkeypatch, capsys):
    """In a folder holding an index built with --out en, `--model en` read ./en (no model) and was refused."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.txt").write_text("she saw a play\nthe play ended\nwe play the game\n", encoding="utf-8")
    assert main(["index", "c.txt", "--model", "en", "--out", "en", "--quiet"]) == 0
    assert main(["index", "c.txt", "--model", "en", "--out", "again", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["neighbors", "--index", "en", "--sentence", "I saw the play", "--word", "play", "--k", "2"]) == 0
    assert "play" in capsys.readouterr().out


def test_index_refuses_an_out_that_is_a_symbolic_link_before_the_model_loads(fixture_dir, fixture_corpus, tmp_path,
                                                                             capsys, monkeypatch, no_model_load):
    """`ln -sfn existing-idx idx-link; elmo index ... --out idx-link` embedded the whole corpus and built the ANN
    index before publishing refused the link, leaving the finished index unpublished in idx-link.partial."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "existing-idx").mkdir()
    (tmp_path / "idx-link").symlink_to("existing-idx")
    assert main(["index", str(fixture_corpus), "--model", str(fixture_dir), "--out", "idx-link", "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "idx-link is a symbolic link (to existing-idx)" in error and len(error.splitlines()) == 1, error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.txt", "existing-idx", "idx-link"]
    assert (tmp_path / "idx-link").is_symlink()
