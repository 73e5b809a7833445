"""``scripts/adapt_domain.py``'s perplexity over a reference vocabulary: for a model whose softmax was only
grown (``grow_vocabulary``: old words keep their probabilities, ``<UNK>`` and the added words share ``<UNK>``'s),
the reference figure must equal the general model's own perplexity, whatever order the grown vocabulary has. And
``measure`` keeps the parts of an ``--out`` already there only when they were measured with the same arguments,
weights and texts, and refuses arguments that would measure nothing before it loads a model."""

import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch
from training_helpers import MICRO_CONFIG, write_synthetic_corpus

from elmo.training import Corpus, Vocabulary
from elmo.training.export import export_model, grow_vocabulary
from elmo.training.language_model import LanguageModel

SCRIPT = Path(__file__).parents[2] / "scripts" / "adapt_domain.py"
_spec = importlib.util.spec_from_file_location("adapt_domain", SCRIPT)
assert _spec is not None and _spec.loader is not None
adapt_domain = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(adapt_domain)


def test_reference_perplexity_of_a_grown_model_is_the_general_models_own(tmp_path: Path):
    text = write_synthetic_corpus(tmp_path / "text.txt", 60, seed=3)
    counts = Corpus([str(text)]).count_tokens()
    general_vocab = Vocabulary.from_counts(counts, max_size=15)  # the text's rarer words are <UNK> to it
    torch.manual_seed(0)
    general = LanguageModel(MICRO_CONFIG, len(general_vocab))
    with torch.no_grad():
        general.softmax_bias.normal_()
    grown_vocab = general_vocab.adapted_to([token for token, _ in reversed(counts.most_common())])
    assert len(grown_vocab) > len(general_vocab) and grown_vocab.tokens[3:] != general_vocab.tokens[3:]
    grown = grow_vocabulary(general, general_vocab, grown_vocab)

    corpus = Corpus([str(text)])
    own = adapt_domain.perplexities(general, general_vocab, general_vocab, corpus, batch_size=4)
    adapted = adapt_domain.perplexities(grown, grown_vocab, general_vocab, corpus, batch_size=4)
    assert own["reference"] == own["own"]
    assert adapted["targets_beyond_reference"] > 0 and own["targets_beyond_reference"] == 0
    for direction in ("forward", "backward", "average"):
        assert adapted["reference"][direction] == pytest.approx(own["own"][direction], rel=1e-5)
    assert adapted["own"]["average"] != pytest.approx(own["own"]["average"], rel=1e-3)


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, str, str]]:
    """``measure --perplexity-only`` on stand-in models (a model's vocabulary: as many words as its name has
    letters); the (model, reference vocabulary, text) of each perplexity computed."""
    computed: list[tuple[str, str, str]] = []
    monkeypatch.setattr(adapt_domain, "resolve_model", lambda name: name)
    monkeypatch.setattr(adapt_domain, "load_language_model", lambda name: (name, list(name)))
    monkeypatch.setattr(adapt_domain, "Corpus", lambda paths, tokenizer: paths[0])

    def perplexities(model: str, vocab: list, reference: list, corpus: str) -> dict:
        computed.append((model, "".join(reference), corpus))
        return {"reference_words": len(reference)}

    monkeypatch.setattr(adapt_domain, "perplexities", perplexities)
    monkeypatch.setattr(adapt_domain, "weights_identity", lambda model, vocab: {"model_fingerprint": f"of {model}"})
    monkeypatch.setattr(adapt_domain, "vocabulary_sha256", lambda vocab: "".join(vocab))
    (tmp_path / "t.txt").write_text("a b c\n")
    return computed


def _measure(out: Path, model: str, *extra: str, text: str = "licenses") -> None:
    directory = out.parent
    adapt_domain.main(["measure", "--model", model, "--text", f"{text}={directory / 't.txt'}", "--perplexity-only",
                       "--senses-domain", str(directory / "t.txt"), "--senses-general", str(directory / "t.txt"),
                       "--out", str(out), *extra])


def test_a_rerun_keeps_the_parts_measured_with_the_same_model_reference_and_texts(measured: list, tmp_path: Path):
    out = tmp_path / "after.json"
    _measure(out, "adapted", "--reference-vocab", "en")
    _measure(out, "adapted", "--reference-vocab", "en")
    assert measured == [("adapted", "en", str(tmp_path / "t.txt"))]
    report = json.loads(out.read_text())
    assert report["model"] == "adapted" and report["perplexity"] == {"licenses": {"reference_words": 2}}


@pytest.mark.parametrize(("model", "extra", "text", "named"), [
    ("en", ("--reference-vocab", "en"), "licenses", r"\{'model': 'en'"),
    ("adapted", ("--reference-vocab", "zh"), "licenses", "'reference_vocab': 'zh'"),
    ("adapted", (), "licenses", "'reference_vocab': None"),
    ("adapted", ("--reference-vocab", "en"), "general", "general="),
], ids=["model", "reference", "no-reference", "text-label"])
def test_measuring_into_a_report_of_another_model_reference_or_text_is_refused(
    measured: list, tmp_path: Path, model: str, extra: tuple, text: str, named: str
):
    out = tmp_path / "after.json"
    _measure(out, "adapted", "--reference-vocab", "en")
    before = out.read_text()
    refusal = rf"after.json holds figures measured with \{{'model': 'adapted'.*, not .*{named}"
    with pytest.raises(SystemExit, match=refusal):
        _measure(out, model, *extra, text=text)
    assert out.read_text() == before and len(measured) == 1


def test_a_report_that_names_another_model_and_no_arguments_is_refused(measured: list, tmp_path: Path):
    """A report written before the arguments were recorded: its model is named, the rest cannot be checked."""
    out = tmp_path / "after.json"
    out.write_text(json.dumps({"model": "domain/en-adapted-run3", "vocabulary": 1, "reference_vocabulary": 1,
                               "perplexity": {"licenses": {"own": {"average": 57.6}}}}))
    with pytest.raises(SystemExit, match=r"'model': 'domain/en-adapted-run3'.*, not \{'model': 'en'"):
        _measure(out, "en")
    assert measured == []


def _export(model_dir: Path, vocab: Vocabulary, seed: int, softmax_bias: float = 0.0) -> None:
    """A micro model of ``seed``'s weights into ``model_dir`` (replacing what it held)."""
    torch.manual_seed(seed)
    model = LanguageModel(MICRO_CONFIG, len(vocab))
    with torch.no_grad():
        model.softmax_bias.fill_(softmax_bias)
    export_model(model, vocab, model_dir, "english")


@pytest.mark.parametrize("change", ["weights", "softmax", "text", "senses"])
def test_a_rerun_after_the_weights_or_a_text_behind_the_same_names_changed_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: str
):
    """Copying another model over a directory, or writing a sample file again, left the old figures in place."""
    from elmo.embedder import Embedder

    text = write_synthetic_corpus(tmp_path / "t.txt", 20, seed=1)
    senses = write_synthetic_corpus(tmp_path / "senses.txt", 20, seed=2)
    vocab = Vocabulary.from_counts(Corpus([str(text)]).count_tokens())
    model_dir = tmp_path / "model"
    _export(model_dir, vocab, seed=0)
    computed: list[str] = []
    monkeypatch.setattr(adapt_domain, "perplexities", lambda model, vocab, reference, corpus: computed.append("") or {})
    out = tmp_path / "after.json"
    argv = ["measure", "--model", str(model_dir), "--text", f"licenses={text}", "--perplexity-only",
            "--senses-domain", str(senses), "--senses-general", str(senses), "--out", str(out)]
    adapt_domain.main(argv)
    adapt_domain.main(argv)
    assert len(computed) == 1  # the same weights and texts: kept
    recorded = json.loads(out.read_text())["measured_with"]
    assert recorded["model_fingerprint"] == Embedder.load(str(model_dir)).fingerprint

    if change == "weights":
        _export(model_dir, vocab, seed=1)
    elif change == "softmax":  # the same biLM, another softmax
        _export(model_dir, vocab, seed=0, softmax_bias=0.5)
    else:
        changed = text if change == "text" else senses
        changed.write_text(changed.read_text() + "the cat sees the dog .\n")
    named = {"weights": "model_fingerprint, softmax_sha256", "softmax": "softmax_sha256", "text": "files_sha256",
             "senses": "files_sha256"}[change]
    with pytest.raises(SystemExit, match=rf"after.json holds figures measured with .*\(they differ in {named}\)"):
        adapt_domain.main(argv)
    assert len(computed) == 1 and json.loads(out.read_text())["measured_with"] == recorded


@pytest.mark.parametrize(("arguments", "named"), [
    (("--per-side", "4"), r"argument --per-side: 4 is below 5"),
    (("--text", "licenses"), r"argument --text: 'licenses' is not LABEL=PATH"),
    (("--text", "=t.txt"), r"argument --text: '=t.txt' is not LABEL=PATH"),
    (("--text", "licenses=t.txt", "--text", "licenses=t.txt"), r"--text label licenses given more than once"),
], ids=["per-side-below-5", "text-without-label", "text-empty-label", "text-label-twice"])
def test_arguments_that_would_measure_nothing_or_one_text_twice_are_refused_before_a_model_loads(
    measured: list, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture,
    arguments: tuple[str, ...], named: str
):
    """--per-side below 5 dropped every word and crashed after the model loaded; a text without a label gave a
    traceback after the model loaded; a label given twice kept the last text's figures alone."""
    monkeypatch.setattr(adapt_domain, "load_language_model", lambda name: pytest.fail("a model was loaded"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        adapt_domain.main(["measure", "--model", "en", "--text", "general=t.txt", "--senses-domain", "t.txt",
                           "--senses-general", "t.txt", "--out", "after.json", *arguments])
    assert exit_info.value.code == 2 and re.search(named, capsys.readouterr().err)
    assert measured == [] and not (tmp_path / "after.json").exists()


def test_texts_in_which_no_sense_word_has_enough_uses_are_refused_before_a_model_loads(
    measured: list, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """Every word was left out, and the measure crashed at np.stack after the perplexities."""
    monkeypatch.setattr(adapt_domain, "load_language_model", lambda name: pytest.fail("a model was loaded"))
    domain = tmp_path / "domain.txt"
    domain.write_text("the party shall pay .\n" * 4 + "each party agrees .\n")  # "party" 5 times
    general = tmp_path / "general.txt"
    general.write_text("the party was late .\n" * 4)  # 4 times
    with pytest.raises(SystemExit, match=r"none of the en sense words .* has 5 uses .* in both"):
        adapt_domain.main(["measure", "--model", "en", "--text", f"general={general}", "--senses-domain", str(domain),
                           "--senses-general", str(general), "--out", str(tmp_path / "after.json")])
    assert measured == []
    general.write_text("the party was late .\n" * 5)
    assert [s.word for s in adapt_domain.sense_sentences(domain, general, ["party"], 20)] == ["party"] * 10


def test_table_of_a_perplexity_only_measurement_is_refused_naming_the_file(tmp_path: Path, capsys):
    """It ended in a KeyError traceback ('domain_vs_general')."""
    report = tmp_path / "step-3.json"
    report.write_text(json.dumps({"vocabulary": 10, "perplexity": {}}))
    with pytest.raises(SystemExit) as exit_info:
        adapt_domain.main(["table", str(report), str(report)])
    assert exit_info.value.code == 2
    assert (f"{report} lacks domain_vs_general, polysemy, nearest_words (a --perplexity-only or unfinished "
            "measurement); the table needs two full ones") in capsys.readouterr().err
    with pytest.raises(SystemExit):  # --k 0 listed every word of the pool
        adapt_domain.main(["measure", "--model", "en", "--text", f"a={report}", "--senses-domain", str(report),
                           "--senses-general", str(report), "--k", "0", "--out", str(tmp_path / "o.json")])
    assert "--k: " in capsys.readouterr().err
