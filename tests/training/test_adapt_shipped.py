"""Domain adaptation of the shipped ``en`` model, as docs/domain.md does it at full size: ``elmo train
--init-from en`` on a small legal text runs and lowers the perplexity of that text's held-out part."""

import json
from pathlib import Path

from elmo.cli import main
from elmo.training.corpus import Corpus
from elmo.training.export import grow_vocabulary, load_language_model, resolve_model
from elmo.training.perplexity import evaluate

# License prose in the style of the domain corpus (ScanCode's license texts): the same clauses about different
# parties and works, so the held-out lines share the domain's phrasing and words but are not training lines.
CLAUSES = (
    "The {party} grants to the {other} a non-exclusive , royalty-free license to use the {thing} .",
    "The {party} shall not sublicense , sell or distribute the {thing} without the consent of the {other} .",
    "This Agreement terminates automatically if the {party} fails to comply with any of its terms .",
    "Upon termination , the {party} shall destroy all copies of the {thing} in its possession .",
    "The {thing} is provided as is , without warranty of any kind , express or implied .",
    "In no event shall the {party} be liable to the {other} for any damages arising from the {thing} .",
    "Redistributions of the {thing} must retain the above copyright notice and this list of conditions .",
    "The {party} may not remove any proprietary notices from the {thing} provided hereunder .",
)
PARTIES = ("Licensor", "Licensee", "Contributor", "Recipient", "Distributor", "Customer")
THINGS = ("Software", "Covered Code", "Licensed Product", "Documentation", "Original Work")


def _license_lines() -> list[str]:
    return [clause.format(party=party, other=other, thing=thing)
            for clause in CLAUSES for party in PARTIES for other in PARTIES if other != party for thing in THINGS]


def test_init_from_the_shipped_en_model_adds_the_domain_words_and_lowers_held_out_perplexity(tmp_path: Path):
    lines = _license_lines()
    held_out = lines[5::10]  # every tenth line (of each clause's combinations), never trained on
    train_lines = [line for index, line in enumerate(lines) if index % 10 != 5]
    (tmp_path / "train.txt").write_text("\n".join(train_lines) + "\n", encoding="utf-8")
    (tmp_path / "heldout.txt").write_text("\n".join(held_out) + "\n", encoding="utf-8")
    run = tmp_path / "run"

    code = main(["train", "--init-from", "en", "--corpus", str(tmp_path / "train.txt"), "--tokenizer", "whitespace",
                 "--out", str(run), "--batch-size", "8", "--unroll-steps", "20", "--optimizer", "adam", "--lr", "1e-3",
                 "--negatives", "256", "--max-steps", "12", "--checkpoint-every", "12", "--quiet"])

    assert code == 0
    shipped, shipped_vocab = load_language_model(resolve_model("en"))
    adapted, adapted_vocab = load_language_model(run)
    options = json.loads(next((run / "checkpoints").iterdir()).joinpath("state.json").read_text())["options"]
    assert options["init_from"] == str(resolve_model("en").absolute())
    added = [token for token in adapted_vocab.tokens if token not in shipped_vocab.ids]
    assert set(shipped_vocab.tokens) <= set(adapted_vocab.tokens)
    assert {"Licensee", "Licensor", "sublicense", "hereunder"} <= set(added)
    assert adapted_vocab.ids["Licensee"] < 100  # the text's frequent words lead, whatever the shipped order

    held_out_text = Corpus([str(tmp_path / "heldout.txt")], "whitespace")
    # Before: the shipped model with its softmax grown to the same vocabulary, as training starts from it.
    before = evaluate(grow_vocabulary(shipped, shipped_vocab, adapted_vocab), held_out_text, adapted_vocab, 8).average
    after = evaluate(adapted, held_out_text, adapted_vocab, 8).average
    assert after < 0.5 * before  # measured: 200.8 -> 21.2
