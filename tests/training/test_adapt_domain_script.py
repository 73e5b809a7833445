"""``scripts/adapt_domain.py``'s perplexity over a reference vocabulary: for a model whose softmax was only
grown (``grow_vocabulary``: old words keep their probabilities, ``<UNK>`` and the added words share ``<UNK>``'s),
the reference figure must equal the general model's own perplexity, whatever order the grown vocabulary has. And
``measure`` keeps the parts of an ``--out`` already there only when they were measured with the same arguments."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from training_helpers import MICRO_CONFIG, write_synthetic_corpus

from elmo.training import Corpus, Vocabulary
from elmo.training.export import grow_vocabulary
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
