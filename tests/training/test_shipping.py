"""Shipping a run (scripts/make_models.py): the softmax travels, as float16 when float32 would pass the size
bound; the shipped files give back the run's model; `elmo perplexity` and `elmo train --init-from` take them by
name; the card reports what the run did."""

import importlib.util
import json
import math
import shlex
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch
from run_helpers import train_micro_run
from safetensors.torch import load_file
from training_helpers import MICRO_CONFIG, write_synthetic_corpus

from elmo.cli import main
from elmo.training import Corpus, LanguageModel, TrainingOptions, Vocabulary, load_language_model, train
from elmo.training.checkpoints import list_checkpoints, load_checkpoint
from elmo.training.export import SOFTMAX_FILE, export_model, write_softmax
from elmo.training.run_log import RunLogError, read_records

_spec = importlib.util.spec_from_file_location("make_models", Path(__file__).parents[2] / "scripts" / "make_models.py")
make_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_models)


def _run_model(checkpoint_dir: Path) -> LanguageModel:
    return load_checkpoint(checkpoint_dir).language_model()


def _softmax_bytes(model: LanguageModel, itemsize: int) -> int:
    return (model.softmax_weight.numel() + model.softmax_bias.numel()) * itemsize


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A micro run of 6 steps without validation text (so the newest checkpoint ships), shipped as ``en``
    under a bound that float32 passes and float16 does not."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    directory = tmp_path_factory.mktemp("shipping")
    config = directory / "micro_options.json"
    config.write_text(json.dumps(MICRO_CONFIG.to_options()), encoding="utf-8")
    corpus_dir = directory / "corpus"
    corpus_dir.mkdir()
    train_text = write_synthetic_corpus(corpus_dir / "train.txt", 400)
    test_text = write_synthetic_corpus(corpus_dir / "test.txt", 60, seed=1)
    run = train_micro_run(directory, train_text, config, "run", max_steps=6, checkpoint_every=3, log_every=2)
    model = _run_model(list_checkpoints(run)[-1])
    vocab = load_checkpoint(list_checkpoints(run)[-1]).vocab
    float32_dir = export_model(model, vocab, directory / "float32")
    float32_bytes = sum(path.stat().st_size for path in float32_dir.iterdir())
    # Between the two: float32 plus the card's reserve is over it, float16 plus the reserve within it.
    max_bytes = float32_bytes + make_models.CARD_RESERVE_BYTES - _softmax_bytes(model, 2) // 2
    out_root = directory / "models"
    target = make_models.ship_run(run, "en", out_root, max_bytes=max_bytes)
    torch.set_num_threads(threads)
    return {"run": run, "target": target, "root": out_root, "model": model, "vocab": vocab, "max_bytes": max_bytes,
            "test": test_text, "directory": directory, "config": config, "corpus": train_text}


def test_shipping_stores_the_softmax_as_float16_when_float32_would_pass_the_bound(shipped: dict):
    softmax = load_file(str(shipped["target"] / SOFTMAX_FILE))
    assert {name: tensor.dtype for name, tensor in softmax.items()} == {"weight": torch.float16, "bias": torch.float32}
    assert sum(path.stat().st_size for path in shipped["target"].iterdir()) <= shipped["max_bytes"]
    assert sorted(path.name for path in shipped["target"].iterdir()) == [
        "README.md", "options.json", SOFTMAX_FILE, "tokenizer.json", "vocab.txt", "weights.hdf5"]
    assert json.loads((shipped["target"] / "tokenizer.json").read_text()) == {"name": "english"}


def test_the_shipped_directory_loads_as_the_runs_biLM_and_its_softmax_to_float16_precision(shipped: dict):
    loaded, vocab = load_language_model(shipped["target"])
    run_model = shipped["model"]
    assert loaded.softmax_weight.dtype == torch.float32
    run_bilm = run_model.bilm.state_dict()
    for name, tensor in loaded.bilm.state_dict().items():
        assert torch.equal(tensor, run_bilm[name]), name
    # Round to nearest: the float16 value is the run's, rounded once.
    assert torch.equal(loaded.softmax_weight, run_model.softmax_weight.detach().half().float())
    assert torch.equal(loaded.softmax_bias, run_model.softmax_bias.detach())  # the bias kept float32
    relative = ((loaded.softmax_weight - run_model.softmax_weight).abs() / run_model.softmax_weight.abs()).max()
    assert relative <= 2.0**-11
    assert vocab.tokens == load_checkpoint(list_checkpoints(shipped["run"])[-1]).vocab.tokens


def _perplexity_lines(capsys: pytest.CaptureFixture, *arguments: str) -> dict[str, float]:
    assert main(["perplexity", *arguments, "--tokenizer", "whitespace"]) == 0
    lines = dict(line.split(": ") for line in capsys.readouterr().out.splitlines())
    return {name: float(value) for name, value in lines.items()}


def test_elmo_perplexity_of_the_shipped_name_agrees_with_the_run_within_float16_rounding(
    shipped: dict, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("elmo.model_dir.shipped_models_root", lambda: shipped["root"])
    monkeypatch.chdir(shipped["directory"] / "corpus")  # where nothing is called en
    shipped_figures = _perplexity_lines(capsys, "--model", "en", "--corpus", str(shipped["test"]))
    run_figures = _perplexity_lines(capsys, "--model", str(shipped["run"]), "--corpus", str(shipped["test"]))
    assert shipped_figures["tokens"] == run_figures["tokens"]
    # A logit z_v = w_v . h + b_v moves by at most |dw_v|_2 |h|_2 + |db_v| when w and b are rounded. With skip
    # connections the top layer's output is a sum of n_layers projections each clipped to +-proj_clip, so
    # |h|_2 <= sqrt(projection_dim) * n_layers * proj_clip. A log-softmax term moves by at most twice the largest
    # logit change, so each direction's log perplexity (a mean of such terms), and their mean, move by at most
    # 2 max_v |dz_v|. Slack: the printed 4 decimals and float32 evaluation (1e-5 relative).
    model, lstm = shipped["model"], MICRO_CONFIG.lstm
    h_bound = math.sqrt(lstm.projection_dim) * lstm.n_layers * lstm.proj_clip
    weight, bias = model.softmax_weight.detach(), model.softmax_bias.detach()
    dz = ((weight - weight.half().float()).norm(dim=1) * h_bound + (bias - bias.half().float()).abs()).max().item()
    for name in ("forward perplexity", "backward perplexity", "perplexity"):
        log_ratio = abs(math.log(shipped_figures[name] / run_figures[name]))
        assert log_ratio <= 2 * dz + 1e-5 + 1e-4 / run_figures[name], (name, log_ratio, dz)


def test_elmo_train_init_from_the_shipped_name_starts_from_the_shipped_weights(
    shipped: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("elmo.model_dir.shipped_models_root", lambda: shipped["root"])
    monkeypatch.chdir(tmp_path)
    # One Adam step moves every weight by at most lr (its first update is lr * g / (|g| + eps)).
    assert main(["train", "--init-from", "en", "--corpus", str(shipped["corpus"]), "--out", "continued",
                 "--max-steps", "1", "--optimizer", "adam", "--lr", "1e-9", "--batch-size", "4", "--unroll-steps",
                 "6", "--negatives", "12", "--quiet"]) == 0
    checkpoint = load_checkpoint(tmp_path / "continued")
    assert checkpoint.options["init_from"] == str(shipped["target"].absolute())
    assert checkpoint.options["tokenizer"] == "english"  # the shipped model's own, by default
    shipped_model, shipped_vocab = load_language_model(shipped["target"])
    assert checkpoint.vocab.tokens[: len(shipped_vocab)] == shipped_vocab.tokens
    expected = shipped_model.state_dict()
    for name, tensor in checkpoint.model_state.items():
        start = expected[name]
        rows = tensor[: start.shape[0]] if name.startswith("softmax") else tensor
        # lr plus one float32 rounding of the updated value
        assert torch.allclose(rows, start, rtol=2.0**-22, atol=2e-9), name


def test_shipping_keeps_a_float32_softmax_when_the_directory_fits(shipped: dict, tmp_path: Path):
    target = make_models.ship_run(shipped["run"], "mini", tmp_path, tests=[])
    assert load_file(str(target / SOFTMAX_FILE))["weight"].dtype == torch.float32
    assert "## Word senses" not in (target / "README.md").read_text()  # no polysemy set for "mini"


def test_shipping_stores_the_softmax_as_int8_when_float16_would_pass_the_bound(shipped: dict, tmp_path: Path):
    model = shipped["model"]
    softmax_bytes = {}
    for dtype in (torch.float32, torch.float16, torch.int8):
        softmax_bytes[dtype] = write_softmax(model, shipped["vocab"], tmp_path, dtype).stat().st_size
    assert softmax_bytes[torch.int8] < softmax_bytes[torch.float16]
    float16_bytes = sum(path.stat().st_size for path in shipped["target"].iterdir() if path.name != "README.md")
    max_bytes = (float16_bytes - softmax_bytes[torch.float16] + softmax_bytes[torch.int8]
                 + make_models.CARD_RESERVE_BYTES)
    target = make_models.ship_run(shipped["run"], "en", tmp_path / "models", max_bytes=max_bytes)
    softmax = load_file(str(target / SOFTMAX_FILE))
    assert {name: tensor.dtype for name, tensor in softmax.items()} == {
        "weight": torch.int8, "weight_scale": torch.float32, "bias": torch.float32}
    assert sum(path.stat().st_size for path in target.iterdir()) <= max_bytes
    assert "(the int8\nsoftmax included)" in (target / "README.md").read_text()


def test_shipping_over_the_bound_even_with_int8_is_refused_and_leaves_the_shipped_model_alone(
    shipped: dict, tmp_path: Path
):
    shutil.copytree(shipped["target"], tmp_path / "en")
    before = {path.name: path.read_bytes() for path in (tmp_path / "en").iterdir()}
    with pytest.raises(SystemExit, match="over the bound of 70,000 even with an int8 softmax"):
        make_models.ship_run(shipped["run"], "en", tmp_path, max_bytes=70_000)
    assert {path.name: path.read_bytes() for path in (tmp_path / "en").iterdir()} == before
    assert [path.name for path in tmp_path.iterdir()] == ["en"]  # no partial directory left


def test_the_model_card_reports_the_run(shipped: dict):
    card = (shipped["target"] / "README.md").read_text()
    log = [json.loads(line) for line in (shipped["run"] / "log.jsonl").read_text().splitlines()]
    seconds = sum(2 * 24 / record["tokens_per_s"] for record in log)  # log_every 2, 4 x 6 tokens a step
    assert "Training text as the run read it: " in card
    assert "- Tokens seen: 144 (6 steps x 4 rows x 6\n  tokens;" in card
    assert f"- Wall time: {seconds / 3600:.2f} hours" in card
    assert f"throughput {144 / seconds:,.0f} tokens/s." in card
    assert "Shipped: step 6 (no validation figure), chosen as the newest checkpoint" in card
    assert "| corpus/test.txt | " in card and "add-one unigram" in card
    assert "elmo perplexity --model en --corpus corpus/test.txt --tokenizer whitespace" in card
    assert "| layer | triplet rate | random weights | nearest-neighbour agreement | random weights |" in card
    assert "| 0 | **0.000** | 0.000 | **0.000** | 0.000 |" in card  # layer 0 is context-free: ties fail
    assert "(the softmax, float16; loaded as float32)" in card
    assert "elmo train --init-from en --corpus data/en/corpus/train.txt --tokenizer whitespace" in card


def test_the_best_checkpoint_is_the_kept_one_of_lowest_validation_perplexity(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path, monkeypatch: pytest.MonkeyPatch
):
    valid = write_synthetic_corpus(tmp_path / "valid.txt", 40, seed=2)
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=6, checkpoint_every=2,
                          valid=[str(valid)], valid_every=3)
    assert [path.name for path in list_checkpoints(run)] == ["step-00000002", "step-00000004", "step-00000006"]
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    logged = {record["step"]: record["valid_perplexity"] for record in records if "valid_perplexity" in record}
    assert sorted(logged) == [3, 6]
    # The run's second validation is of the weights at its step (before the fix, of those at the first
    # validation: the fused optimizer's updates went unseen by the reordered copies of the weights).
    now = make_models.validation_perplexity(load_checkpoint(run / "checkpoints" / "step-00000006"), [str(valid)])
    assert now == pytest.approx(logged[6], rel=1e-6)
    # steps 2 and 4 computed now, 6 from the log
    chosen = make_models.best_checkpoint(run, read_records(run / "log.jsonl"))
    assert chosen.step in (2, 4, 6) and "lowest validation perplexity of the checkpoints kept" in chosen.how

    # A log that says step 4 was best, and that a step no longer kept was better still.
    records = [r for r in records if "valid_perplexity" not in r] + [
        {"step": 2, "valid_perplexity": 50.0}, {"step": 4, "valid_perplexity": 40.0},
        {"step": 6, "valid_perplexity": 45.0}, {"step": 1, "valid_perplexity": 30.0}]
    (run / "log.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    chosen = make_models.best_checkpoint(run, read_records(run / "log.jsonl"))
    assert (chosen.step, chosen.valid_perplexity, chosen.directory.name) == (4, 40.0, "step-00000004")
    assert "step 1 had 30.0 but its checkpoint is no longer kept" in chosen.how

    # The newest checkpoint's validation comes out NaN (the log holds null; computed again, NaN): passed over,
    # not kept as best because no figure compares lower than NaN.
    records = [r for r in records if "valid_perplexity" not in r] + [
        {"step": 2, "valid_perplexity": 50.0}, {"step": 4, "valid_perplexity": 40.0},
        {"step": 6, "valid_perplexity": None}]
    (run / "log.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    monkeypatch.setattr(make_models, "validation_perplexity", lambda checkpoint, valid: float("nan"))
    assert make_models.best_checkpoint(run, read_records(run / "log.jsonl")).step == 4


def test_training_seconds_count_every_session_of_a_resumed_run_up_to_the_shipped_step():
    records = [
        {"step": 10, "tokens_per_s": 100.0},                 # 10 steps of 20 tokens: 2 s
        {"step": 20, "tokens_per_s": 200.0},                 # 1 s
        {"step": 20, "valid_perplexity": 90.0},
        {"step": 25, "tokens_per_s": 50.0},                  # a second session: 5 steps, 2 s
        {"step": 35, "tokens_per_s": 100.0},                 # past the shipped step
    ]
    assert make_models.training_seconds(records, 20, up_to_step=25) == (pytest.approx(5.0), 25)
    # a step past the last record is not timed, rather than timed as free (a card once read 8e10 tokens/s)
    assert make_models.training_seconds(records[:2], 20, up_to_step=25) == (pytest.approx(3.0), 20)


def test_choosing_reads_only_so_a_live_run_keeps_its_checkpoint_in_the_making_and_a_damaged_one_is_passed_over(
    shipped: dict, tmp_path: Path
):
    run = tmp_path / "run"
    shutil.copytree(shipped["run"], run)
    in_the_making = run / "checkpoints" / ".step-00000009.abc.partial"  # as the trainer names it while writing
    in_the_making.mkdir()
    newest = list_checkpoints(shipped["run"])[-1].name
    (run / "checkpoints" / newest / "model.safetensors").write_bytes(b"damaged")
    chosen = make_models.best_checkpoint(run, read_records(run / "log.jsonl"))
    assert in_the_making.is_dir()
    assert chosen.step == 3 and chosen.directory.name == "step-00000003"


def test_a_run_exported_on_another_machine_ships_its_weights_and_its_records(shipped: dict, tmp_path: Path):
    """What a lent GPU machine brings back: `elmo export` of the chosen checkpoint, that checkpoint's state.json
    and the run's log.jsonl; the corpus path the run recorded exists only over there."""
    newest = list_checkpoints(shipped["run"])[-1]
    brought = export_model(_run_model(newest), load_checkpoint(newest).vocab, tmp_path / "brought")
    state = json.loads((newest / "state.json").read_text())
    state["options"]["corpus"] = ["/elsewhere/train.txt"]
    state["options"]["config"] = None  # as in a run started --init-from a model: it takes that model's shape
    (brought / "state.json").write_text(json.dumps(state))
    records = [json.loads(line) for line in (shipped["run"] / "log.jsonl").read_text().splitlines()]
    valid = [{"step": 3, "valid_perplexity": 50.0}, {"step": 6, "valid_perplexity": 45.0}]
    (brought / "log.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records + valid))

    target = make_models.ship_run(brought, "mini", tmp_path / "models", tests=[], corpus_paths=[str(shipped["corpus"])])
    model, _ = load_language_model(target)
    for name, tensor in _run_model(newest).state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name
    card = (target / "README.md").read_text()
    assert "- Tokens seen: 144 (6 steps x 4 rows x 6\n  tokens;" in card
    assert "(validation perplexity 45.0), chosen as the lowest validation perplexity of the run, exported" in card
    assert "--max-steps 10000 \\\n        --batch-size 4 --unroll-steps 6" in card  # the card's continuing command

    valid[0]["valid_perplexity"] = 40.0  # the log says step 3 was better than the step brought back
    (brought / "log.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records + valid))
    with pytest.raises(SystemExit, match="the exported step is 6, but step 3 has the lowest validation perplexity"):
        make_models.ship_run(brought, "mini", tmp_path / "again", tests=[], corpus_paths=[str(shipped["corpus"])])


def test_a_folder_here_named_as_a_shipped_model_that_holds_no_model_or_run_does_not_hide_it(tmp_path: Path,
                                                                                              monkeypatch):
    """``elmo train --init-from en`` (and ``elmo index --model en``, ``elmo serve --model en``) in a folder holding
    a corpus folder ``en/`` read that folder, not the shipped model; a folder that holds a model still wins."""
    from elmo.model_dir import ModelDir, shipped_models_root

    monkeypatch.chdir(tmp_path)
    (tmp_path / "en").mkdir()
    (tmp_path / "en" / "train.txt").write_text("a corpus, not a model\n")
    vocab = load_language_model("en")[1]
    assert vocab == load_language_model(shipped_models_root() / "en")[1]
    assert ModelDir.find("en").path == shipped_models_root() / "en"
    shutil.copytree(shipped_models_root() / "zh", tmp_path / "en", dirs_exist_ok=True)  # a model named en here
    assert ModelDir.find("en").path == Path("en")
    assert load_language_model("en")[1] == load_language_model(shipped_models_root() / "zh")[1]


def _with_validation(run: Path, figures: list[tuple[int, float]]) -> None:
    """The run's log, its validation records replaced by ``figures`` in this order."""
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    records = [r for r in records if "valid_perplexity" not in r] + [
        {"step": step, "valid_perplexity": value} for step, value in figures]
    (run / "log.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))


def test_a_nan_validation_figure_logged_first_is_not_taken_for_the_lowest_in_the_note(shipped: dict, tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(shipped["run"], run)  # checkpoints kept at steps 3 and 6
    _with_validation(run, [(1, math.nan), (2, 30.0), (3, 50.0), (6, 45.0)])
    chosen = make_models.best_checkpoint(run, read_records(run / "log.jsonl"))
    assert (chosen.step, chosen.valid_perplexity) == (6, 45.0)
    assert "step 2 had 30.0 but its checkpoint is no longer kept" in chosen.how


def test_a_run_exported_elsewhere_ships_when_only_a_nan_figure_logged_first_is_lower(shipped: dict, tmp_path: Path):
    newest = list_checkpoints(shipped["run"])[-1]
    brought = export_model(_run_model(newest), load_checkpoint(newest).vocab, tmp_path / "brought")
    shutil.copy(newest / "state.json", brought / "state.json")
    shutil.copy(shipped["run"] / "log.jsonl", brought / "log.jsonl")
    _with_validation(brought, [(3, math.nan), (6, 45.0)])
    chosen = make_models.exported_run(brought, read_records(brought / "log.jsonl"))
    assert (chosen.step, chosen.valid_perplexity) == (6, 45.0)


def test_a_run_whose_first_checkpoint_was_cut_short_is_started_anew_not_resumed(shipped: dict, tmp_path: Path):
    """A kill while the first checkpoint was written leaves only its partial directory; `make models` took the
    checkpoints folder for a run to resume, and every rerun failed on `--resume` ("holds no checkpoint")."""
    run = tmp_path / "run"
    (run / "checkpoints" / ".step-00000200.abc.partial").mkdir(parents=True)
    arguments = make_models.train_arguments(run, tmp_path / "corpus", tmp_path / "vocab.txt", 400)
    assert arguments[:3] == ["train", "--corpus", str(tmp_path / "corpus" / "train.txt")]
    assert "--resume" not in arguments and arguments[arguments.index("--out") + 1] == str(run)
    shutil.copytree(shipped["run"], run, dirs_exist_ok=True)  # complete checkpoints beside it: resumed
    assert make_models.train_arguments(run, tmp_path / "corpus", tmp_path / "vocab.txt", 400) == [
        "train", "--resume", str(run), "--max-steps", "400", "--quiet"]


def _smallest_min_count_that_makes(vocab: Vocabulary, counts: Counter) -> int:
    """Independently of make_models: the first --min-count whose `elmo vocab` of the text has the same words."""
    return next(k for k in range(1, max(counts.values()) + 2)
                if set(Vocabulary.from_counts(counts, k).tokens) == set(vocab.tokens))


def test_vocabulary_rule_is_the_min_count_that_made_the_vocabulary_even_with_a_few_words_cleaned_since():
    counts = Counter({"the": 9, "cat": 6, "dog": 6, "emu": 5, "owl": 2})
    made = Vocabulary.from_counts(counts, min_count=6)
    assert make_models.vocabulary_rule(made, counts) == 6 == _smallest_min_count_that_makes(made, counts)
    assert make_models.vocabulary_rule(Vocabulary.from_counts(counts), counts) == 1
    # The text now holds a word seen 7 times that the vocabulary never had (composed since by clean_text, as
    # zh-large's 樂), and the vocabulary a word the text lacks: the rule is still that of its rarest word.
    drifted = Counter({**counts, "樂": 7})
    had = Vocabulary([*made.tokens, "樂"])
    assert make_models.vocabulary_rule(had, drifted) == 6
    # And a vocabulary word now seen once (zh-large: a word cleaning split): the rule read off the rarest
    # vocabulary word was 1, so the card advised growing the vocabulary by every word seen once.
    rare = Counter({**counts, "樂": 1})
    assert make_models.vocabulary_rule(had, rare) == 6


def test_the_card_of_a_run_that_read_a_vocabulary_continues_with_that_vocabularys_rule(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path
):
    """The card's `elmo train --init-from` left --min-count out: en's card, whose run read en's own 63,814-word
    vocab.txt, would have grown it with every word of en-large seen once (~286,000)."""
    counts = Corpus([str(synthetic_corpus)]).count_tokens()
    rarest = sorted(set(counts.values()))
    made = Vocabulary.from_counts(counts, min_count=rarest[2])  # the two rarest counts' words left out
    made.save(tmp_path / "vocab.txt")  # micro_options reads it
    rule = _smallest_min_count_that_makes(made, counts)
    assert rule > 1
    run = train_micro_run(tmp_path, synthetic_corpus, micro_options_file, "run", max_steps=1)
    card = (make_models.ship_run(run, "mini", tmp_path / "models", tests=[]) / "README.md").read_text()
    assert "- Flags: `--config micro_options.json --vocab vocab.txt --batch-size 4 " in card
    assert f"--max-steps 10000 \\\n        --min-count {rule} --batch-size 4 --unroll-steps 6" in card
    # Continuing on the same text with that rule adds no word (adapted_to is what --init-from does).
    assert len(made.adapted_to([word for word, count in counts.most_common() if count >= rule])) == len(made)


def test_the_card_of_a_run_grown_with_min_count_gives_it_in_the_flags_and_the_continuing_command(
    shipped: dict, tmp_path: Path
):
    options = TrainingOptions(corpus=[str(shipped["corpus"])], init_from=str(shipped["run"]), min_count=3,
                              batch_size=4, unroll_steps=6, n_negatives=12, max_steps=1)
    train(options, tmp_path / "run", progress=False)
    card = (make_models.ship_run(tmp_path / "run", "mini", tmp_path / "models", tests=[]) / "README.md").read_text()
    assert "- Flags: `--min-count 3 --batch-size 4 " in card
    assert "--max-steps 10000 \\\n        --min-count 3 --batch-size 4 --unroll-steps 6" in card


def test_the_card_of_a_run_with_another_gradient_clip_gives_it_and_is_not_called_the_recipe(
    shipped: dict, tmp_path: Path
):
    """The card's flags and continuing command left --clip-norm out, so a run clipped at 1 was continued at 10, and
    a `make models` run with it was called the recipe (its "Reproduce" command would not rebuild it)."""
    options = TrainingOptions(corpus=[str(shipped["corpus"])], init_from=str(shipped["run"]), batch_size=4,
                              unroll_steps=6, n_negatives=12, clip_norm=1.0, max_steps=1)
    train(options, tmp_path / "run", progress=False)
    card = (make_models.ship_run(tmp_path / "run", "mini", tmp_path / "models", tests=[]) / "README.md").read_text()
    assert "--dropout 0.1 --clip-norm 1 --checkpoint-every" in card.split("- Flags: ")[1].split("\n")[0]
    assert card.count("--clip-norm 1 ") == 2  # the flags and the command that continues training
    recipe = dict(zip(make_models.TRAIN_FLAGS[::2], make_models.TRAIN_FLAGS[1::2], strict=True))
    as_made = {"config": recipe["--config"], "batch_size": int(recipe["--batch-size"]),
               "unroll_steps": int(recipe["--unroll-steps"]), "optimizer": recipe["--optimizer"],
               "learning_rate": float(recipe["--lr"]), "n_negatives": int(recipe["--negatives"]),
               "state_reset": float(recipe["--state-reset"]), "checkpoint_every": int(recipe["--checkpoint-every"]),
               "valid_every": int(recipe["--valid-every"]), "seed": 0, "dropout": 0.1, "clip_norm": 10.0,
               "tokenizer": "whitespace", "init_from": None, "lr_decay_steps": 0}
    assert make_models._is_the_recipe(as_made)
    assert not make_models._is_the_recipe(as_made | {"clip_norm": 1.0})
    assert not make_models._is_the_recipe(as_made | {"tokenizer": "english"})
    assert "--clip-norm" not in make_models.training_flags(as_made)
    # A run with bfloat16 products is not the recipe, and its flags say so (the card read as a float32 run's)
    assert not make_models._is_the_recipe(as_made | {"precision": "bfloat16"})
    assert "--precision" not in make_models.training_flags(as_made | {"precision": "float32"})
    assert " --precision bfloat16 " in " ".join(make_models.training_flags(as_made | {"precision": "bfloat16"}))


@pytest.fixture
def runs_made(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int | None, int | None, Path, Path]]:
    """``make_models.main`` without its corpora, training or shipping: each model it would make, with the steps,
    limit, work folder and out-root it would make it with."""
    made: list[tuple[str, int | None, int | None, Path, Path]] = []
    monkeypatch.setattr(make_models, "make_model", lambda model, args: made.append(
        (model, args.steps, args.limit, args.work, args.out_root)))
    return made


@pytest.mark.parametrize("given", [("--steps", "30"), ("--limit", "2000"), ("--steps", "30", "--work", "/tmp/mm"),
                                   ("--limit", "2000", "--out-root", "/tmp/mm/models")],
                         ids=["steps", "limit", "steps-work-only", "limit-out-root-only"])
def test_a_short_run_without_its_own_work_and_out_root_is_refused_before_it_starts(
    runs_made: list, capsys: pytest.CaptureFixture, given: tuple[str, ...]
):
    """It prepared a 2,000-passage corpus over data/models' and shipped a 30-step model over src/elmo/models."""
    with pytest.raises(SystemExit) as exit_info:
        make_models.main(list(given))
    assert exit_info.value.code == 2 and "--steps and --limit need --work and --out-root" in capsys.readouterr().err
    assert runs_made == []


def test_the_full_recipe_and_the_documented_smoke_run_start_in_their_folders(runs_made: list, tmp_path: Path):
    repository = Path(__file__).parents[2]
    make_models.main(["--models", "en"])
    assert runs_made.pop() == ("en", None, None, repository / "data" / "models", repository / "src" / "elmo" / "models")
    # docs/data.md's end-to-end check
    make_models.main(["--steps", "30", "--limit", "2000", "--work", str(tmp_path), "--out-root", str(tmp_path / "m")])
    assert runs_made == [(model, 30, 2000, tmp_path, tmp_path / "m") for model in ("en", "zh")]


def test_the_cards_command_to_rebuild_a_short_run_is_accepted_and_names_the_same_run(runs_made: list, tmp_path: Path):
    command = make_models.recipe_command("zh", 30, 2000, tmp_path / "mm", tmp_path / "mm" / "models")
    assert shlex.split(command)[:2] == ["python", "scripts/make_models.py"]
    make_models.main(shlex.split(command)[2:])
    assert runs_made == [("zh", 30, 2000, tmp_path / "mm", tmp_path / "mm" / "models")]
    repository = Path(__file__).parents[2]
    command = make_models.recipe_command("en", 40_000, None, repository / "data" / "models", repository / "src" /
                                         "elmo" / "models")
    assert command.endswith("--steps 40000 --work data/models --out-root src/elmo/models")  # from the repository root


def test_shipping_a_run_whose_log_has_a_line_that_is_not_the_runs_is_refused_before_any_work(
    shipped: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    run = tmp_path / "run"
    shutil.copytree(shipped["run"], run)
    lines = (run / "log.jsonl").read_text().splitlines(keepends=True)
    (run / "log.jsonl").write_text(lines[0] + "{not json\n" + "".join(lines[1:]))

    def choosing(*args):
        raise AssertionError("a checkpoint was chosen (loaded, perhaps validated) before the log was read")

    monkeypatch.setattr(make_models, "best_checkpoint", choosing)
    # Read tolerantly (as make_models once did), the card would have counted the tokens and hours of line 1 only.
    with pytest.raises(RunLogError, match=r"log\.jsonl: line 2 is not JSON"):
        make_models.ship_run(run, "en", tmp_path / "models")
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())
