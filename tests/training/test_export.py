"""`elmo perplexity` and `elmo export` on model directories: shipped names, missing softmax, tokenizer, the
softmax file's dtypes (float32, float16 from a shipped model) and what is refused."""

import re
import shutil
from pathlib import Path

import pytest
import torch
from run_helpers import train_micro_run
from safetensors.torch import load_file, save_file

from elmo.cli import main
from elmo.training import Corpus, evaluate, load_language_model
from elmo.training.checkpoints import CheckpointError
from elmo.training.export import SOFTMAX_FILE, write_softmax


@pytest.fixture
def shipped_root(tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path,
                 monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the package's models/ folder: ``mini`` exported with its softmax, ``bare`` without
    one (as the published weights come), both with tokenizer.json as the shipped models have."""
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=3)
    root = tmp_path / "models"
    assert main(["export", str(run), "--out", str(root / "mini")]) == 0
    shutil.copytree(root / "mini", root / "bare")
    (root / "bare" / SOFTMAX_FILE).unlink()
    for name in ("mini", "bare"):
        (root / name / "tokenizer.json").write_text('{"name": "english"}\n')
    monkeypatch.setattr("elmo.model_dir.shipped_models_root", lambda: root)
    monkeypatch.chdir(tmp_path)  # where no directory is called mini or bare
    return root


def test_perplexity_of_a_shipped_model_without_a_softmax_says_so_and_what_works_instead(
    shipped_root: Path, synthetic_corpus: Path, capsys: pytest.CaptureFixture
):
    assert main(["perplexity", "--model", "bare", "--corpus", str(synthetic_corpus)]) == 2
    error = capsys.readouterr().err
    assert "shipped model 'bare' holds no softmax (softmax.safetensors)" in error
    assert "`elmo embed --model bare`" in error and "`elmo export`" in error
    assert "no such run" not in error


def test_perplexity_of_a_shipped_model_with_a_softmax_works_by_name_with_the_models_tokenizer(
    shipped_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture
):
    text = tmp_path / "text.txt"
    text.write_text("the dog sees the cat.\nthe fish.\n")  # targets with </S>: whitespace 6 + 3, english 7 + 4
    assert main(["perplexity", "--model", "mini", "--corpus", str(text)]) == 0
    output = capsys.readouterr().out
    assert output.splitlines()[0] == "tokens: 11"
    model, vocab = load_language_model(shipped_root / "mini")
    expected = evaluate(model, Corpus([str(text)], "english"), vocab)
    assert f"perplexity: {expected.average:.4f}" in output.splitlines()[-1]

    assert main(["perplexity", "--model", "mini", "--corpus", str(text), "--tokenizer", "whitespace"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "tokens: 9"


def test_perplexity_of_text_the_vocabulary_does_not_cover_says_how_much_is_unk(shipped_root: Path, tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture):
    """Each <UNK> target is scored as that one class, so text in another language printed a low perplexity
    without a word."""
    text = tmp_path / "text.txt"
    text.write_text("das Pferd folgt dem Fisch\nder Vogel\n")  # 7 words the vocabulary lacks and 2 </S>
    assert main(["perplexity", "--model", "mini", "--corpus", str(text), "--tokenizer", "whitespace"]) == 0
    captured = capsys.readouterr()
    _, vocab = load_language_model(shipped_root / "mini")
    unknown = sum(vocab.token_id(word) == vocab.unk_id for word in text.read_text().split())
    assert unknown == 7 and {"unknown (<UNK>): 7", f"unknown share: {7 / 9:.4f}"} <= set(captured.out.splitlines())
    assert f"{7 / 9:.1%} of the 9 tokens are <UNK> to the model's vocabulary" in captured.err
    text.write_text("the dog sees the cat .\n")
    assert main(["perplexity", "--model", "mini", "--corpus", str(text), "--tokenizer", "whitespace"]) == 0
    assert "unknown (<UNK>): 0" in capsys.readouterr().out.splitlines()


def test_export_writes_the_runs_tokenizer_for_the_embedder_and_perplexity(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path
):
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=2, tokenizer="english")
    assert main(["export", str(run), "--out", str(tmp_path / "model")]) == 0
    assert (tmp_path / "model" / "tokenizer.json").read_text() == '{"name": "english"}\n'

    from elmo.model_dir import ModelDir

    assert ModelDir.find(tmp_path / "model").tokenizer == "english"
    # A run that read text split beforehand (whitespace) is exported with the tokenizer that split it.
    assert main(["export", str(run), "--out", str(tmp_path / "jieba"), "--tokenizer", "jieba"]) == 0
    assert ModelDir.find(tmp_path / "jieba").tokenizer == "jieba"


@pytest.mark.parametrize(("tensors", "message"), [
    ({"weight": "float16"}, "lacks 'bias'; expected tensors ['bias', 'weight']"),
    ({"weight": "int32", "bias": "float16"}, "weight of dtype torch.int32; expected one of float32, float16, int8"),
    ({"weight": "int8", "bias": "float16"},
     "lacks 'weight_scale'; expected tensors ['bias', 'weight', 'weight_scale']"),
    ({"weight": "int8", "bias": "int8", "weight_scale": "float16"},
     "bias of dtype torch.int8; expected one of float32, float16"),
    ({"weight": "int8", "bias": "float16", "weight_scale": "zeros"}, "weight_scale that is not positive in {v} rows"),
    ({"weight": "float16", "bias": "float16", "weight_scale": "float16"},
     "has a weight_scale but its weight is torch.float16; only an int8 weight has one"),
    ({"weight": "float16", "bias": "inf"}, "NaN or infinite values in bias"),
    ({"weight": "wide", "bias": "float16"}, "has weight ({v}, 17); expected ({v}, 16) from vocab.txt and options.json"),
])
def test_a_softmax_of_the_wrong_dtype_shape_or_values_is_refused_by_name(
    shipped_root: Path, tensors: dict, message: str
):
    model, vocab = load_language_model(shipped_root / "mini")
    weight, bias = model.softmax_weight.detach(), model.softmax_bias.detach()
    made = {"int32": weight.to(torch.int32), "wide": torch.zeros(weight.shape[0], 17), "zeros": torch.zeros_like(bias),
            "inf": torch.full_like(bias, float("inf")).half()}
    cast = {"float16": torch.float16, "int8": torch.int8}  # the named tensor itself, cast
    softmax = {name: made[kind] if kind in made else (weight if name == "weight" else bias).to(cast[kind])
               for name, kind in tensors.items()}
    save_file(softmax, str(shipped_root / "mini" / SOFTMAX_FILE))
    with pytest.raises(CheckpointError, match=re.escape(message.format(v=len(vocab)))):
        load_language_model(shipped_root / "mini")


def test_a_float16_softmax_loads_as_float32_and_exports_back_as_float32(shipped_root: Path, tmp_path: Path):
    model, vocab = load_language_model(shipped_root / "mini")
    write_softmax(model, vocab, shipped_root / "mini", torch.float16)
    halved, _ = load_language_model("mini")
    assert halved.softmax_weight.dtype == torch.float32
    assert torch.equal(halved.softmax_weight, model.softmax_weight.detach().half().float())
    assert torch.equal(halved.softmax_bias, model.softmax_bias.detach())  # kept float32: it goes into every logit
    assert main(["export", "mini", "--out", str(tmp_path / "again")]) == 0
    assert load_file(str(tmp_path / "again" / SOFTMAX_FILE))["weight"].dtype == torch.float32


def test_an_int8_softmax_loads_within_half_a_step_of_each_rows_weights(shipped_root: Path, synthetic_corpus: Path):
    model, vocab = load_language_model(shipped_root / "mini")
    with torch.no_grad():
        model.softmax_weight[5] = 0.0  # a row of zeros stays zeros
    write_softmax(model, vocab, shipped_root / "mini", torch.int8)
    stored = load_file(str(shipped_root / "mini" / SOFTMAX_FILE))
    assert stored["weight"].dtype == torch.int8 and stored["bias"].dtype == torch.float32
    rounded, _ = load_language_model("mini")
    weight = model.softmax_weight.detach()
    half_step = weight.abs().amax(dim=1, keepdim=True) / 127 / 2  # 255 steps across each row's range
    assert bool(((rounded.softmax_weight - weight).abs() <= half_step * (1 + 1e-5)).all())
    assert bool((rounded.softmax_weight[5] == 0).all())
    assert float((rounded.softmax_weight - weight).abs().max()) > 0  # rounded, not copied
    assert torch.equal(rounded.softmax_bias, model.softmax_bias.detach())
    held_out = Corpus([str(synthetic_corpus)])
    exact, close = evaluate(model, held_out, vocab), evaluate(rounded, held_out, vocab)
    assert close.average == pytest.approx(exact.average, rel=1e-2)


def test_a_softmax_beyond_float16s_range_is_not_written_as_float16_nor_a_nan_one_as_int8(shipped_root: Path,
                                                                                           tmp_path: Path):
    model, vocab = load_language_model(shipped_root / "mini")
    with torch.no_grad():
        model.softmax_weight[3, 0] = 1e5
    with pytest.raises(ValueError, match=r"the softmax weight has values that torch\.float16 cannot hold"):
        write_softmax(model, vocab, tmp_path, torch.float16)
    with torch.no_grad():
        model.softmax_weight[2, 1] = float("nan")
    with pytest.raises(ValueError, match="the softmax weight has NaN or infinite values, which int8 cannot hold"):
        write_softmax(model, vocab, tmp_path, torch.int8)
    assert not (tmp_path / SOFTMAX_FILE).exists()


def test_training_from_a_model_without_a_softmax_keeps_its_bilm_and_starts_a_new_softmax_over_vocab(
    shipped_root: Path, synthetic_corpus: Path, micro_options_file: Path, tmp_path: Path
):
    from run_helpers import micro_options

    from elmo.training import train
    from elmo.training.checkpoints import load_checkpoint
    from elmo.weights import load_bilm

    vocab_path = tmp_path / "vocab.txt"  # micro_options writes it
    options = micro_options(tmp_path, synthetic_corpus, micro_options_file, max_steps=1, dropout=0.0)
    options.init_from, options.vocab = "bare", None
    with pytest.raises(ValueError, match="holds no softmax: give --vocab"):
        train(options, tmp_path / "refused", progress=False)

    options.vocab = str(vocab_path)
    options.learning_rate = 1e-30  # one step that moves nothing: the run's weights are where it started
    train(options, tmp_path / "adapted", progress=False)
    state = load_checkpoint(tmp_path / "adapted").model_state
    bare = load_bilm(shipped_root / "bare" / "options.json", shipped_root / "bare" / "weights.hdf5")
    for name, tensor in bare.state_dict().items():
        torch.testing.assert_close(state[f"bilm.{name}"], tensor, rtol=0, atol=1e-20)
    run_softmax = load_checkpoint(tmp_path / "run").model_state["softmax_weight"]
    assert state["softmax_weight"].shape == run_softmax.shape
    assert not torch.allclose(state["softmax_weight"], run_softmax)  # a new softmax, not the run's
    assert state["softmax_bias"].abs().max() < 1e-20  # bilm-tf's zero bias


def test_a_model_directory_with_allennlp_file_names_is_read_as_a_model_not_as_a_run(
    shipped_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture
):
    """``<name>_options.json`` + ``<name>_weights.hdf5`` (as AllenNLP names them) used to be taken for a run
    directory by perplexity and --init-from: "holds no checkpoint"."""
    from elmo.training.export import lacks_softmax, model_tokenizer

    renamed = tmp_path / "allennlp-named"
    shutil.copytree(shipped_root / "mini", renamed)
    (renamed / "options.json").rename(renamed / "mini_options.json")
    (renamed / "weights.hdf5").rename(renamed / "mini_weights.hdf5")
    model, vocab = load_language_model(renamed)
    expected, expected_vocab = load_language_model(shipped_root / "mini")
    assert vocab == expected_vocab
    for (name, got), (_, want) in zip(model.state_dict().items(), expected.state_dict().items(), strict=True):
        assert torch.equal(got, want), name
    assert model_tokenizer(renamed) == "english"  # its tokenizer.json, not a run's default
    assert not lacks_softmax(renamed)

    (renamed / SOFTMAX_FILE).unlink()  # as AllenNLP publishes it: weights without a softmax
    assert lacks_softmax(renamed)  # so `elmo train --init-from` starts a new softmax over --vocab
    (tmp_path / "held-out.txt").write_text("the cat sat\n")  # a corpus is checked before the model loads
    assert main(["perplexity", "--model", str(renamed), "--corpus", str(tmp_path / "held-out.txt")]) == 2
    error = capsys.readouterr().err
    assert f"{renamed} lacks {SOFTMAX_FILE}" in error and "holds no checkpoint" not in error


def test_exporting_onto_a_symbolic_link_to_a_model_is_refused_before_any_work_and_leaves_nothing(
    shipped_root: Path, tmp_path: Path
):
    """``latest -> v1``: the export used to fail with IsADirectoryError and leave an empty ``.latest.*.partial``."""
    from elmo.training.export import export_model

    model, vocab = load_language_model(shipped_root / "mini")
    base = tmp_path / "exports"
    export_model(model, vocab, base / "v1")
    before = {path.name: path.read_bytes() for path in (base / "v1").iterdir()}
    (base / "latest").symlink_to("v1")
    with pytest.raises(ValueError, match=r"exports/latest is a symbolic link \(to v1\)"):
        export_model(model, vocab, base / "latest")
    assert sorted(path.name for path in base.iterdir()) == ["latest", "v1"]
    assert {path.name: path.read_bytes() for path in (base / "v1").iterdir()} == before
    export_model(model, vocab, base / "v1")  # the directory it names is replaced as any model directory is
    assert sorted(path.name for path in base.iterdir()) == ["latest", "v1"]


def test_a_vocab_txt_in_another_order_than_the_softmax_rows_is_refused(shipped_root: Path):
    """The same tokens in another order fit the softmax's shape; without the recorded digest they loaded and every
    swapped word was scored by another word's row (the shipped en with `the` and `,` swapped: 111.3 -> 192.2 on
    the first 20 test lines, no word said). A vocab.txt with other line ends or a BOM is the same vocabulary and
    loads."""
    model_dir = shipped_root / "mini"
    tokens = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (model_dir / "vocab.txt").write_bytes(b"\xef\xbb\xbf" + "".join(t + "\r\n" for t in tokens).encode("utf-8"))
    load_language_model(model_dir)
    tokens[3], tokens[4] = tokens[4], tokens[3]
    (model_dir / "vocab.txt").write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    with pytest.raises(CheckpointError, match="written for another vocabulary"):
        load_language_model(model_dir)
