"""The trainer end to end: exact resume after SIGKILL, DDP == one process, export, domain adaptation."""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as multiprocessing
from safetensors.torch import load_file
from training_helpers import MICRO_CONFIG, write_synthetic_corpus

from elmo.characters import batch_to_char_ids
from elmo.cli import main
from elmo.modules.lstm import LstmState
from elmo.training import Corpus, TrainingOptions, Vocabulary, evaluate, export_model, load_language_model, train
from elmo.training.checkpoints import CheckpointError, list_checkpoints, load_checkpoint
from elmo.training.corpus import CorpusError
from elmo.training.export import grow_vocabulary
from elmo.weights import load_bilm


@pytest.fixture
def vocab_file(tmp_path: Path, synthetic_corpus: Path) -> Path:
    path = tmp_path / "vocab.txt"
    Vocabulary.from_counts(Corpus([str(synthetic_corpus)]).count_tokens()).save(path)
    return path


def _options(corpus: Path, vocab: Path, config: Path, **overrides) -> TrainingOptions:
    settings = dict(batch_size=4, unroll_steps=6, n_negatives=12, log_every=1, checkpoint_every=100)
    settings.update(overrides)
    return TrainingOptions(corpus=[str(corpus)], vocab=str(vocab), config=str(config), **settings)


def _losses(run: Path) -> list[float]:
    return [r["loss"] for r in map(json.loads, (run / "log.jsonl").read_text().splitlines()) if "loss" in r]


def _train_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "elmo.training", "train", "--quiet", *arguments]


def test_a_run_killed_with_sigkill_and_resumed_ends_with_bit_identical_weights(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    common = ["--corpus", str(synthetic_corpus), "--vocab", str(vocab_file), "--config", str(micro_options_file),
              "--batch-size", "4", "--unroll-steps", "6", "--negatives", "12", "--log-every", "1",
              "--checkpoint-every", "5", "--keep-checkpoints", "2", "--state-reset", "0.2",
              "--optimizer", "adam", "--lr-decay-steps", "40"]  # the resumed run must take the same rates
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    total_steps = "60"
    subprocess.run(_train_command(*common, "--out", str(tmp_path / "whole"), "--max-steps", total_steps),
                   check=True, env=environment, capture_output=True)

    killed = tmp_path / "killed"
    process = subprocess.Popen(_train_command(*common, "--out", str(killed), "--max-steps", total_steps),
                               env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = killed / "log.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if log.is_file() and len(log.read_text().splitlines()) >= 11:
            break
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    latest = list_checkpoints(killed)[-1]
    assert 0 < int(latest.name.split("-")[1]) < int(total_steps)

    subprocess.run(_train_command("--resume", str(killed), "--max-steps", total_steps),
                   check=True, env=environment, capture_output=True)
    whole_weights = load_file(str(list_checkpoints(tmp_path / "whole")[-1] / "model.safetensors"))
    resumed_weights = load_file(str(list_checkpoints(killed)[-1] / "model.safetensors"))
    assert whole_weights.keys() == resumed_weights.keys()
    for name, tensor in whole_weights.items():
        assert torch.equal(tensor, resumed_weights[name]), name
    assert _losses(killed) == _losses(tmp_path / "whole")
    assert len(list_checkpoints(killed)) == 2


def test_the_cosine_schedule_sets_each_steps_rate_and_holds_the_final_rate_after_the_decay(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    options = _options(synthetic_corpus, vocab_file, micro_options_file, optimizer="adam", learning_rate=1e-3,
                       lr_decay_steps=4, lr_final=2e-4, max_steps=7)
    train(options, tmp_path / "run", progress=False)
    rates = [r["lr"] for r in map(json.loads, (tmp_path / "run" / "log.jsonl").read_text().splitlines()) if "lr" in r]
    # step k (0-based) takes 2e-4 + 8e-4 * (1 + cos(pi * k / 4)) / 2, then 2e-4 from step 4 on
    expected = [1e-3, 2e-4 + 4e-4 * (1 + math.sqrt(0.5)), 6e-4, 2e-4 + 4e-4 * (1 - math.sqrt(0.5)), 2e-4, 2e-4, 2e-4]
    assert rates == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="lr_final"):
        _options(synthetic_corpus, vocab_file, micro_options_file, learning_rate=1e-3, lr_final=2e-3,
                 lr_decay_steps=4, max_steps=1).validate()
    with pytest.raises(ValueError, match=r"min_count \(10\) picks the corpus's new words"):  # it would be ignored
        _options(synthetic_corpus, vocab_file, micro_options_file, min_count=10, max_steps=1).validate()
    with pytest.raises(ValueError, match=r"lr_final is 0\.0002, the end of a decay, but lr_decay_steps is 0"):
        _options(synthetic_corpus, vocab_file, micro_options_file, learning_rate=1e-3, lr_final=2e-4,
                 max_steps=1).validate()


def test_a_run_that_used_up_its_epochs_and_is_extended_with_resume_equals_one_run_of_the_longer_length(
    tmp_path: Path, micro_options_file: Path
):
    """The batch that found the text run out is not taken from the rows: the last checkpoint resumes after the
    last batch trained, so the extended run reads every token the longer run reads."""
    corpus = write_synthetic_corpus(tmp_path / "corpus.txt", 40)
    vocab = tmp_path / "vocab.txt"
    Vocabulary.from_counts(Corpus([str(corpus)]).count_tokens()).save(vocab)
    options = dict(dropout=0.0, checkpoint_every=1000)
    longer = train(_options(corpus, vocab, micro_options_file, epochs=2, **options), tmp_path / "longer",
                   progress=False)
    shorter = train(_options(corpus, vocab, micro_options_file, epochs=1, **options), tmp_path / "extended",
                    progress=False)
    extended = train(TrainingOptions(corpus=[], epochs=2), tmp_path / "extended", resume=True, progress=False)
    assert shorter < extended == longer
    assert _losses(tmp_path / "extended") == _losses(tmp_path / "longer")
    extended_weights, longer_weights = (load_checkpoint(tmp_path / run).model_state for run in ("extended", "longer"))
    for name, tensor in longer_weights.items():
        assert torch.equal(extended_weights[name], tensor), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize(("optimizer", "learning_rate"), [("adagrad", 0.2), ("adam", 1e-3)])
def test_training_on_cuda_takes_the_cpus_losses(tmp_path: Path, synthetic_corpus: Path, vocab_file: Path,
                                                micro_options_file: Path, monkeypatch: pytest.MonkeyPatch,
                                                optimizer: str, learning_rate: float):
    """elmo train picks CUDA where there is one; each optimizer has to run there (Adagrad has no fused CUDA kernel)."""
    options = _options(synthetic_corpus, vocab_file, micro_options_file, optimizer=optimizer,
                       learning_rate=learning_rate, max_steps=6)
    torch.cuda.reset_peak_memory_stats()
    train(options, tmp_path / "cuda", progress=False)
    assert torch.cuda.max_memory_allocated() > 0
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    train(options, tmp_path / "cpu", progress=False)
    assert len(_losses(tmp_path / "cuda")) == 6
    assert _losses(tmp_path / "cuda") == pytest.approx(_losses(tmp_path / "cpu"), rel=1e-4)


def _distributed_worker(rank: int, options: TrainingOptions, out: Path, port: int) -> None:
    torch.set_num_threads(1)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    train(options, out, progress=False)


def test_two_gloo_processes_give_the_loss_curve_and_weights_of_one_process_with_the_same_global_batch(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    options = _options(synthetic_corpus, vocab_file, micro_options_file, max_steps=10, dropout=0.1,
                       state_reset=0.25)
    train(options, tmp_path / "one", progress=False)
    port = 29500 + os.getpid() % 1000
    multiprocessing.spawn(_distributed_worker, args=(options, tmp_path / "two", port), nprocs=2)

    one, two = _losses(tmp_path / "one"), _losses(tmp_path / "two")
    assert len(one) == len(two) == 10
    torch.testing.assert_close(torch.tensor(two), torch.tensor(one), rtol=2e-6, atol=0.0)
    weights_one = load_file(str(list_checkpoints(tmp_path / "one")[-1] / "model.safetensors"))
    weights_two = load_file(str(list_checkpoints(tmp_path / "two")[-1] / "model.safetensors"))
    for name, tensor in weights_one.items():
        torch.testing.assert_close(weights_two[name], tensor, rtol=1e-4, atol=1e-6)


def test_resume_refuses_a_training_text_whose_files_changed(tmp_path: Path, micro_options_file: Path):
    """Rows resume at byte offsets into the files: another size or another set of files is refused by name."""
    corpus = write_synthetic_corpus(tmp_path / "part-1.txt", 40)
    write_synthetic_corpus(tmp_path / "part-2.txt", 40)
    vocab = tmp_path / "vocab.txt"
    Vocabulary.from_counts(Corpus([str(corpus)]).count_tokens()).save(vocab)
    options = _options(tmp_path / "part-*.txt", vocab, micro_options_file, max_steps=2, checkpoint_every=1)
    train(options, tmp_path / "run", progress=False)
    assert load_checkpoint(tmp_path / "run").corpus_files == [
        (str(tmp_path / name), (tmp_path / name).stat().st_size) for name in ("part-1.txt", "part-2.txt")]
    size = corpus.stat().st_size
    with corpus.open("a") as text:
        text.write("one more line\n")
    with pytest.raises(CheckpointError, match=re.escape(f"part-1.txt was {size:,} bytes and is {size + 14:,}")):
        train(TrainingOptions(corpus=[], max_steps=4), tmp_path / "run", resume=True, progress=False)
    (tmp_path / "part-3.txt").write_text("a new file\n")
    with pytest.raises(CheckpointError, match=re.escape("part-3.txt is new")):
        train(TrainingOptions(corpus=[], max_steps=4), tmp_path / "run", resume=True, progress=False)


def test_resume_refuses_a_checkpoint_directory_and_names_its_run(tmp_path: Path, synthetic_corpus: Path,
                                                                  vocab_file: Path, micro_options_file: Path):
    train(_options(synthetic_corpus, vocab_file, micro_options_file, max_steps=2, checkpoint_every=1),
          tmp_path / "run", progress=False)
    checkpoint = list_checkpoints(tmp_path / "run")[0]
    with pytest.raises(CheckpointError, match=re.escape(f"{checkpoint} is a checkpoint, not a run directory: resume "
                                                        f"the run ({tmp_path / 'run'})")):
        train(TrainingOptions(corpus=[], max_steps=4), checkpoint, resume=True, progress=False)
    assert sorted(path.name for path in checkpoint.iterdir()) == sorted(
        ["model.safetensors", "optimizer.safetensors", "state.safetensors", "vocab.txt", "state.json"])


def test_resume_refuses_a_training_text_rewritten_at_the_same_size(tmp_path: Path, micro_options_file: Path):
    """The same lines in another order (a corpus prepared again with another shuffle): the sizes agree, but the
    rows' saved offsets now fall inside lines."""
    corpus = write_synthetic_corpus(tmp_path / "corpus.txt", 40)
    vocab = tmp_path / "vocab.txt"
    Vocabulary.from_counts(Corpus([str(corpus)]).count_tokens()).save(vocab)
    train(_options(corpus, vocab, micro_options_file, max_steps=2), tmp_path / "run", progress=False)
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    saved = load_checkpoint(tmp_path / "run").rows
    starts = {sum(map(len, map(str.encode, lines[:k]))) for k in range(len(lines) + 1)}
    assert all(row.offset in starts for row in saved)
    corpus.write_text("".join(reversed(lines)), encoding="utf-8")
    reversed_starts = {sum(map(len, map(str.encode, list(reversed(lines))[:k]))) for k in range(len(lines) + 1)}
    assert any(row.offset not in reversed_starts for row in saved)  # the case the check is for
    with pytest.raises(CorpusError, match="not the start of a line of the text: the text changed since"):
        train(TrainingOptions(corpus=[], max_steps=4), tmp_path / "run", resume=True, progress=False)


def test_epochs_count_the_corpus_tokens_as_bilm_tf_and_train_every_row_to_the_end(tmp_path: Path,
                                                                                   micro_options_file: Path):
    """A row whose share is one long line holds far more tokens than the rest: with --epochs the run trains
    epochs x targets / (rows x steps) steps (the other rows wrap around), instead of stopping when the rows
    with the least text run out, or, as before, at step 0."""
    short = ["the cat sat on the mat", "a dog ran in the park"] * 30
    long_line = " ".join(["the cat sat on the mat and a dog ran in the park"] * 40)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join([*short, long_line, *short]) + "\n", encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    Vocabulary.from_counts(Corpus([str(corpus)]).count_tokens()).save(vocab)
    n_targets = sum(len(line.split()) + 1 for line in [*short, long_line, *short])
    options = _options(corpus, vocab, micro_options_file, epochs=2, dropout=0.0, checkpoint_every=1000)
    expected = 2 * n_targets // (options.batch_size * options.unroll_steps)
    assert expected > 0
    assert train(options, tmp_path / "run", progress=False) == expected == load_checkpoint(tmp_path / "run").step
    capped = _options(corpus, vocab, micro_options_file, epochs=2, max_steps=3, dropout=0.0, checkpoint_every=1000)
    assert train(capped, tmp_path / "capped", progress=False) == 3
    with pytest.raises(CorpusError, match="less than one step"):
        train(_options(corpus, vocab, micro_options_file, epochs=1, batch_size=n_targets), tmp_path / "big",
              progress=False)


def test_two_processes_given_epochs_stop_at_the_step_one_process_stops_at(tmp_path: Path,
                                                                          micro_options_file: Path):
    """With --epochs every process must stop at the step one process stops at (else one saves while the other
    waits in a collective)."""
    corpus = write_synthetic_corpus(tmp_path / "corpus.txt", 40)
    vocab = tmp_path / "vocab.txt"
    Vocabulary.from_counts(Corpus([str(corpus)]).count_tokens()).save(vocab)
    options = _options(corpus, vocab, micro_options_file, epochs=1, dropout=0.0)
    steps = train(options, tmp_path / "one", progress=False)
    port = 29500 + (os.getpid() + 500) % 1000
    processes = multiprocessing.spawn(_distributed_worker, args=(options, tmp_path / "two", port), nprocs=2,
                                      join=False)
    deadline = time.monotonic() + 300
    while not processes.join(timeout=5):
        if time.monotonic() > deadline:
            for process in processes.processes:
                process.kill()
            pytest.fail("the two processes did not finish")
    assert load_checkpoint(tmp_path / "two").step == steps
    torch.testing.assert_close(torch.tensor(_losses(tmp_path / "two")), torch.tensor(_losses(tmp_path / "one")),
                               rtol=2e-6, atol=0.0)
    assert load_checkpoint(tmp_path / "two").rows == load_checkpoint(tmp_path / "one").rows


def test_an_export_replaces_a_model_whole_or_not_at_all_and_never_a_folder_of_other_files(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path, monkeypatch
):
    from elmo.training import export as export_module

    train(_options(synthetic_corpus, vocab_file, micro_options_file, max_steps=2), tmp_path / "run", progress=False)
    model, vocab = load_language_model(tmp_path / "run")
    out = tmp_path / "model"
    export_model(model, vocab, out, tokenizer="english")
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    with torch.no_grad():
        model.softmax_bias.add_(1.0)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(export_module, "write_softmax", killed)
    with pytest.raises(KeyboardInterrupt):
        export_model(model, vocab, out)
    monkeypatch.undo()
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before  # the old model, whole
    assert not list(tmp_path.glob(".model.*"))  # no partial left beside it
    export_model(model, vocab, out)  # without a tokenizer: the old tokenizer.json goes with the old model
    assert sorted(path.name for path in out.iterdir()) == ["options.json", "softmax.safetensors", "vocab.txt",
                                                           "weights.hdf5"]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep\n")
    with pytest.raises(ValueError, match=r"holds files other than a model's \(mine\.txt\)"):
        export_model(model, vocab, tmp_path / "notes")
    assert (tmp_path / "notes" / "mine.txt").read_text() == "keep\n"


def test_exported_model_loads_through_load_bilm_and_gives_the_training_models_vectors(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    train(_options(synthetic_corpus, vocab_file, micro_options_file, max_steps=5), tmp_path / "run", progress=False)
    model, vocab = load_language_model(tmp_path / "run")
    export_model(model, vocab, tmp_path / "model")
    bilm = load_bilm(tmp_path / "model" / "options.json", tmp_path / "model" / "weights.hdf5")
    sentences = [["the", "big", "dog", "sees", "the", "cat", "."], ["the", "fish", "."]]
    layers = bilm(batch_to_char_ids(sentences))[0].layers

    model.eval()
    projection = MICRO_CONFIG.lstm.projection_dim
    with torch.no_grad():
        for row, sentence in enumerate(sentences):
            n = len(sentence)
            forward_tokens = ["<S>", *sentence, "</S>"]
            backward_tokens = forward_tokens[::-1]
            for half, (stack, tokens) in enumerate(((model.bilm.forward_lstm, forward_tokens),
                                                    (model.bilm.backward_lstm, backward_tokens))):
                vectors = model.bilm.token_encoder(batch_to_char_ids([tokens])[0])
                zero = [LstmState(torch.zeros(1, projection), torch.zeros(1, MICRO_CONFIG.lstm.dim))] * 2
                outputs, _ = stack(vectors, [1] * len(tokens), zero)
                # Token i (1-based) is forward step i, backward step n + 1 - i.
                steps = list(range(1, n + 1)) if half == 0 else list(range(n, 0, -1))
                columns = slice(half * projection, (half + 1) * projection)
                torch.testing.assert_close(layers[0, row, :n, columns], vectors[steps], rtol=1e-5, atol=1e-6)
                for k, output in enumerate(outputs, start=1):
                    torch.testing.assert_close(layers[k, row, :n, columns], output[steps], rtol=1e-5, atol=1e-6)
    reloaded, reloaded_vocab = load_language_model(tmp_path / "model")
    assert reloaded_vocab == vocab
    assert torch.equal(reloaded.softmax_weight, model.softmax_weight)


def test_domain_adaptation_grows_the_vocabulary_keeps_old_rows_and_lowers_domain_perplexity(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    train(_options(synthetic_corpus, vocab_file, micro_options_file, max_steps=20), tmp_path / "general",
          progress=False)
    general, old_vocab = load_language_model(tmp_path / "general")
    export_model(general, old_vocab, tmp_path / "general_model")
    domain_text = tmp_path / "domain.txt"
    lines = write_synthetic_corpus(tmp_path / "base.txt", 200, seed=7).read_text().splitlines()
    domain_text.write_text("".join(line.replace("dog", "patient").replace("cat", "nurse") + " stat\n"
                                   for line in lines))
    domain = Corpus([str(domain_text)])

    grown_vocab = old_vocab.adapted_to(["stat", "the", "patient", "nurse"])
    rest = [token for token in old_vocab.tokens[3:] if token != "the"]
    assert grown_vocab.tokens == [*old_vocab.tokens[:3], "stat", "the", "patient", "nurse", *rest]
    grown = grow_vocabulary(general, old_vocab, grown_vocab)
    old_ids = [old_vocab.ids[token] for token in old_vocab.tokens]
    new_ids = [grown_vocab.ids[token] for token in old_vocab.tokens]
    assert torch.equal(grown.softmax_weight[new_ids], general.softmax_weight[old_ids])
    # For any hidden state, every old word but <UNK> keeps its probability under its new id, and <UNK> and the
    # new words together have what <UNK> had.
    hidden = torch.randn(5, general.softmax_weight.shape[1], generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = torch.softmax(hidden @ general.softmax_weight.T + general.softmax_bias, -1).double()
        after = torch.softmax(hidden @ grown.softmax_weight.T + grown.softmax_bias, -1).double()
    unk = old_vocab.unk_id
    others = [token for token in old_vocab.tokens if token != "<UNK>"]
    torch.testing.assert_close(after[:, [grown_vocab.ids[token] for token in others]],
                               before[:, [old_vocab.ids[token] for token in others]], rtol=1e-5, atol=1e-9)
    added = [grown_vocab.ids[token] for token in ("stat", "patient", "nurse")]
    torch.testing.assert_close(after[:, grown_vocab.unk_id] + after[:, added].sum(-1), before[:, unk], rtol=1e-5,
                               atol=1e-9)
    with pytest.raises(ValueError, match="lacks 1 of the old one's tokens"):
        grow_vocabulary(general, old_vocab, Vocabulary([token for token in grown_vocab.tokens if token != "the"]))

    options = TrainingOptions(corpus=[str(domain_text)], init_from=str(tmp_path / "general_model"), batch_size=4,
                              unroll_steps=6, n_negatives=12, max_steps=40, checkpoint_every=100)
    train(options, tmp_path / "adapted", progress=False)
    adapted, adapted_vocab = load_language_model(tmp_path / "adapted")
    # Ordered for the sampler by the domain text's counts (old words it lacks last): a frequent new word gets a
    # low id, as a vocabulary built from that text would give it.
    by_count = [token for token, _ in domain.count_tokens().most_common()]
    assert adapted_vocab.tokens == list(dict.fromkeys([*old_vocab.tokens[:3], *by_count, *old_vocab.tokens]))
    assert adapted_vocab.ids["stat"] < adapted_vocab.ids["patient"] < len(old_vocab)
    grown = grow_vocabulary(general, old_vocab, adapted_vocab)
    before = evaluate(grown, domain, adapted_vocab, batch_size=8).average
    after = evaluate(adapted, domain, adapted_vocab, batch_size=8).average
    assert after < 0.8 * before


def test_resume_without_a_checkpoint_and_a_second_run_in_the_same_directory_are_refused(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    options = _options(synthetic_corpus, vocab_file, micro_options_file, max_steps=2)
    with pytest.raises(CheckpointError, match="no such run"):
        train(options, tmp_path / "nothing", resume=True, progress=False)
    train(options, tmp_path / "run", progress=False)
    with pytest.raises(CheckpointError, match="already holds a run"):
        train(options, tmp_path / "run", progress=False)


def test_a_run_started_with_relative_paths_resumes_from_another_directory_and_refuses_options_it_would_ignore(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture
):
    monkeypatch.chdir(synthetic_corpus.parent)
    held_out = synthetic_corpus.with_name("held-out.txt")
    held_out.write_text("\n".join(synthetic_corpus.read_text().splitlines()[:20]) + "\n")  # its own file
    arguments = ["train", "--corpus", synthetic_corpus.name, "--vocab", os.path.relpath(vocab_file),
                 "--config", os.path.relpath(micro_options_file), "--valid", held_out.name,
                 "--out", "run", "--max-steps", "2", "--checkpoint-every", "1", "--quiet"]
    assert main(arguments) == 0
    run = synthetic_corpus.parent / "run"
    monkeypatch.chdir(tmp_path.parent)  # where none of the relative names lead anywhere
    assert main(["train", "--resume", str(run), "--lr", "0.5", "--negatives", "4", "--max-steps", "4"]) == 2
    assert "so --negatives, --lr would be ignored" in capsys.readouterr().err
    # Given at the parser's default value (the run used another), still refused rather than silently dropped.
    assert main(["train", "--resume", str(run), "--batch-size", "128", "--max-steps", "4"]) == 2
    assert "so --batch-size would be ignored" in capsys.readouterr().err
    assert main(["train", "--resume", str(run), "--max-steps", "3", "--quiet"]) == 0
    assert [checkpoint.name for checkpoint in list_checkpoints(run)][-1].endswith("3")


def _poison_weights_after(optimizer_steps: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """From the ``optimizer_steps``-th update on, the first weight of the model holds NaN, as after a
    gradient that overflowed."""
    from elmo.training import trainer

    make_optimizer = trainer._make_optimizer

    def poisoning(model, options):
        optimizer = make_optimizer(model, options)
        update = optimizer.step
        done = [0]

        def step(*args, **kwargs):
            result = update(*args, **kwargs)
            done[0] += 1
            if done[0] == optimizer_steps:
                with torch.no_grad():
                    next(model.parameters()).view(-1)[0] = float("nan")
            return result

        optimizer.step = step
        return optimizer

    monkeypatch.setattr(trainer, "_make_optimizer", poisoning)


@pytest.mark.parametrize(("poisoned_at", "caught_by"), [(7, "the training loss is"), (9, "hold NaN or infinite")])
def test_a_run_whose_loss_or_weights_turn_nan_stops_with_exit_1_and_keeps_its_last_good_checkpoints(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, poisoned_at: int, caught_by: str
):
    """Poisoned after update 7, the loss of step 8 is NaN; after update 9 (a checkpoint step) the loss of
    step 9 is still finite and only the weights show it. Either way no checkpoint of NaN weights is written,
    so rotation (``--keep-checkpoints 2``) never deletes the good ones."""

    _poison_weights_after(poisoned_at, monkeypatch)
    run = tmp_path / "run"
    arguments = ["train", "--corpus", str(synthetic_corpus), "--vocab", str(vocab_file), "--config",
                 str(micro_options_file), "--batch-size", "4", "--unroll-steps", "6", "--negatives", "12",
                 "--checkpoint-every", "3", "--keep-checkpoints", "2", "--log-every", "1", "--max-steps", "30",
                 "--out", str(run), "--quiet"]
    assert main(arguments) == 1
    error = capsys.readouterr().err
    stopped_at = poisoned_at + 1 if poisoned_at % 3 else poisoned_at
    assert error.startswith(f"elmo train: error: step {stopped_at}: ") and caught_by in error
    assert "step-00000006" in error and "holds finite weights" in error
    assert [checkpoint.name for checkpoint in list_checkpoints(run)] == ["step-00000003", "step-00000006"]
    model, _ = load_language_model(run)
    assert all(torch.isfinite(parameter).all() for parameter in model.parameters())
    assert all(math.isfinite(loss) for loss in _losses(run)) and len(_losses(run)) >= stopped_at - 1


def test_a_run_whose_loss_passes_the_float_range_of_its_perplexity_logs_null_and_keeps_training(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    """Adam at lr 1000 drives the sampled-softmax loss to ~1e5: finite, but exp(loss) overflows a float."""
    options = _options(synthetic_corpus, vocab_file, micro_options_file, optimizer="adam", learning_rate=1000.0,
                       clip_norm=1e9, max_steps=20, checkpoint_every=10)
    assert train(options, tmp_path / "run", progress=False) == 20

    def refuse(constant: str):
        raise AssertionError(f"log.jsonl holds {constant}, which is not JSON")

    lines = (tmp_path / "run" / "log.jsonl").read_text().splitlines()
    records = [json.loads(line, parse_constant=refuse) for line in lines]
    overflowed = [r for r in records if r["loss"] > 710]
    assert overflowed, "the run did not diverge far enough to test the overflow"
    assert all(r["perplexity"] is None for r in overflowed)
    assert [checkpoint.name for checkpoint in list_checkpoints(tmp_path / "run")] == ["step-00000010", "step-00000020"]
    assert (tmp_path / "run" / "perplexity.png").is_file()


def _stop_with_signal(command: list[str], log: Path, after_lines: int, signal_number: int,
                      environment: dict[str, str]) -> subprocess.CompletedProcess:
    process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if log.is_file() and len(log.read_text().splitlines()) >= after_lines:
            break
        time.sleep(0.005)
    process.send_signal(signal_number)
    stdout, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def test_sigterm_before_the_first_checkpoint_saves_the_step_exits_143_and_resumes_bit_identically(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    """Checkpoints every 1000 steps, so only the signal writes one; log lines every 4 steps, so the run
    stops between two of them and the resumed run must carry the interval's losses to match."""
    common = ["--corpus", str(synthetic_corpus), "--vocab", str(vocab_file), "--config", str(micro_options_file),
              "--batch-size", "4", "--unroll-steps", "6", "--negatives", "12", "--log-every", "4",
              "--checkpoint-every", "1000", "--state-reset", "0.2", "--max-steps", "48"]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(_train_command(*common, "--out", str(tmp_path / "whole")), check=True, env=environment,
                   capture_output=True)

    stopped = tmp_path / "stopped"
    result = _stop_with_signal(_train_command(*common, "--out", str(stopped)), stopped / "log.jsonl", 3,
                               signal.SIGTERM, environment)
    assert result.returncode == 143, result.stderr
    checkpoints = list_checkpoints(stopped)
    assert len(checkpoints) == 1
    step = int(checkpoints[0].name.split("-")[1])
    assert 12 <= step < 48
    assert result.stderr.strip().splitlines() == [
        f"elmo train: SIGTERM: stopped after step {step}, saved in {checkpoints[0]}; continue with: "
        f"elmo train --resume {stopped}"]

    subprocess.run(_train_command("--resume", str(stopped)), check=True, env=environment, capture_output=True)
    whole_weights = load_file(str(list_checkpoints(tmp_path / "whole")[-1] / "model.safetensors"))
    resumed_weights = load_file(str(list_checkpoints(stopped)[-1] / "model.safetensors"))
    assert list_checkpoints(stopped)[-1].name == "step-00000048"
    for name, tensor in whole_weights.items():
        assert torch.equal(tensor, resumed_weights[name]), name
    assert _losses(stopped) == _losses(tmp_path / "whole")
    assert len(_losses(stopped)) == 12


def test_ctrl_c_saves_the_step_and_exits_130_without_a_traceback(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    run = tmp_path / "run"
    command = _train_command("--corpus", str(synthetic_corpus), "--vocab", str(vocab_file), "--config",
                             str(micro_options_file), "--batch-size", "4", "--unroll-steps", "6", "--negatives",
                             "12", "--log-every", "1", "--max-steps", "1000", "--out", str(run))
    result = _stop_with_signal(command, run / "log.jsonl", 2, signal.SIGINT, {**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr
    assert f"continue with: elmo train --resume {run}" in result.stderr
    [checkpoint] = list_checkpoints(run)
    assert int(checkpoint.name.split("-")[1]) >= 2
    model, _ = load_language_model(checkpoint)
    assert all(torch.isfinite(parameter).all() for parameter in model.parameters())


def test_validation_evaluates_as_many_rows_at_once_as_valid_batch_size_says(
    tmp_path: Path, synthetic_corpus: Path, held_out_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    run = tmp_path / "run"
    subprocess.run(_train_command("--corpus", str(synthetic_corpus), "--vocab", str(vocab_file), "--config",
                                  str(micro_options_file), "--batch-size", "4", "--unroll-steps", "6", "--negatives",
                                  "12", "--valid", str(held_out_corpus), "--valid-every", "2",
                                  "--valid-batch-size", "3", "--max-steps", "2", "--out", str(run)),
                   check=True, capture_output=True)
    records = [record for record in map(json.loads, (run / "log.jsonl").read_text().splitlines())
               if "valid_perplexity" in record]
    logged = [record["valid_perplexity"] for record in records]
    model, vocab = load_language_model(run)
    corpus = Corpus([str(held_out_corpus)])
    assert logged == [pytest.approx(evaluate(model, corpus, vocab, 3, 6).average, rel=1e-9)]
    words = held_out_corpus.read_text().split()
    unknown = sum(vocab.token_id(word) == vocab.unk_id for word in words)
    targets = len(words) + len(held_out_corpus.read_text().splitlines())
    assert [record["valid_unknown_share"] for record in records] == [pytest.approx(unknown / targets)]
    assert evaluate(model, corpus, vocab, 32, 6).average != pytest.approx(logged[0], rel=1e-6)  # rows matter


def test_reading_a_live_run_leaves_its_checkpoint_in_the_making_and_a_new_start_clears_a_killed_ones(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    """Listing a run's checkpoints (export, perplexity, --init-from) deleted the trainer's partial directory
    mid-write, and the trainer crashed; only the trainer clears partial directories, when it starts."""
    from elmo.training.checkpoints import resolve_checkpoint

    run = tmp_path / "run"
    train(_options(synthetic_corpus, vocab_file, micro_options_file, max_steps=2, checkpoint_every=2), run,
          progress=False)
    in_the_making = run / "checkpoints" / ".step-00000003.abc.partial"
    in_the_making.mkdir()
    (in_the_making / "model.safetensors").write_bytes(b"half")
    assert resolve_checkpoint(run).name == "step-00000002"
    load_language_model(run)
    assert in_the_making.is_dir()
    train(_options(synthetic_corpus, vocab_file, micro_options_file, max_steps=4, checkpoint_every=2), run,
          resume=True, progress=False)
    assert not in_the_making.exists() and resolve_checkpoint(run).name == "step-00000004"


def test_an_out_that_is_a_file_and_too_few_epochs_are_refused_before_the_model_is_built(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path,
    monkeypatch: pytest.MonkeyPatch
):
    import elmo.training.trainer as trainer

    def no_model(*_):
        raise AssertionError("the model was built before the options were checked")

    monkeypatch.setattr(trainer, "_new_model", no_model)
    (tmp_path / "afile").write_text("not a run")
    with pytest.raises(CheckpointError, match="is a file; --out names a run directory"):
        train(_options(synthetic_corpus, vocab_file, micro_options_file, max_steps=2), tmp_path / "afile",
              progress=False)
    with pytest.raises(CorpusError, match="epoch"):
        train(_options(synthetic_corpus, vocab_file, micro_options_file, max_steps=None, epochs=1,
                       batch_size=4096, unroll_steps=20), tmp_path / "run", progress=False)


def test_a_stop_asked_for_at_a_validation_step_saves_at_once_without_validating(
    tmp_path: Path, synthetic_corpus: Path, held_out_corpus: Path, vocab_file: Path, micro_options_file: Path,
    monkeypatch: pytest.MonkeyPatch
):
    import elmo.training.trainer as trainer

    draw = trainer.StepNoise.draw

    def draw_then_stop_at_step_3(seed, step, *rest):  # a real SIGTERM, as a scheduler sends, during step 4
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return draw(seed, step, *rest)

    monkeypatch.setattr(trainer.StepNoise, "draw", staticmethod(draw_then_stop_at_step_3))
    run = tmp_path / "run"
    options = _options(synthetic_corpus, vocab_file, micro_options_file, max_steps=8, valid_every=2,
                       valid=[str(held_out_corpus)])
    with pytest.raises(trainer.TrainingInterrupted) as stopped:
        train(options, run, progress=False)
    assert stopped.value.step == 4 and stopped.value.checkpoint == run / "checkpoints" / "step-00000004"
    validated = [record["step"] for record in map(json.loads, (run / "log.jsonl").read_text().splitlines())
                 if "valid_perplexity" in record]
    assert validated == [2]


def test_the_last_step_is_validated_though_it_falls_between_validation_steps(
    tmp_path: Path, synthetic_corpus: Path, held_out_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    """A run whose --max-steps is not a multiple of --valid-every ended on a checkpoint with no figure in its log,
    so choosing the best checkpoint had to compute it again."""
    run = tmp_path / "run"
    train(_options(synthetic_corpus, vocab_file, micro_options_file, max_steps=5, valid_every=2,
                   valid=[str(held_out_corpus)], valid_batch_size=3), run, progress=False)
    records = [record for record in map(json.loads, (run / "log.jsonl").read_text().splitlines())
               if "valid_perplexity" in record]
    assert [record["step"] for record in records] == [2, 4, 5]
    model, vocab = load_language_model(run)
    final = evaluate(model, Corpus([str(held_out_corpus)]), vocab, 3, 6).average
    assert records[-1]["valid_perplexity"] == pytest.approx(final, rel=1e-9)
    assert records[-2]["valid_perplexity"] != pytest.approx(final, rel=1e-6)  # step 4's weights are not step 5's


@pytest.mark.parametrize(("limits", "refused"), [({"max_steps": -3}, "max_steps is -3"),
                                                 ({"max_steps": 0, "epochs": 1}, "max_steps is 0"),
                                                 ({"epochs": 0}, "epochs is 0")])
def test_a_step_or_epoch_limit_below_one_is_refused_before_the_run_starts(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path, limits: dict, refused: str
):
    """The command line refuses them; train() took max_steps -3 for a run of no step: it returned 0 and wrote
    no checkpoint."""
    options = _options(synthetic_corpus, vocab_file, micro_options_file, **{"max_steps": None, **limits})
    with pytest.raises(ValueError, match=f"{refused}; expected a positive integer"):
        train(options, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("extra", "refused"), [
    (["--valid-every", "5"], "--valid-every set how the --valid text is evaluated, and no --valid is given"),
    (["--valid-batch-size", "8"], "--valid-batch-size set how the --valid text is evaluated"),
    (["--seed", str(2**64)], f"seed is {2**64}; expected 0 <= seed < 2\\*\\*64"),
])
def test_options_a_run_would_ignore_or_could_not_take_are_refused_before_it_starts(
    tmp_path: Path, synthetic_corpus: Path, vocab_file: Path, micro_options_file: Path, capsys: pytest.CaptureFixture,
    extra: list[str], refused: str
):
    """Without --valid, --valid-every ran a run that never validated; a seed past 2**64 failed after the corpus
    and vocabulary checks with "Overflow when unpacking long long", naming no option."""
    run = tmp_path / "run"
    assert main(["train", "--corpus", str(synthetic_corpus), "--vocab", str(vocab_file), "--config",
                 str(micro_options_file), "--max-steps", "1", "--out", str(run), *extra]) == 2
    assert re.search(refused, capsys.readouterr().err)
    assert not run.exists()


# A run of two steps, each followed by a validation, in a fresh process (tests/glibc_probe.py); printed: what a 256
# MiB block, allocated with malloc, written and freed, leaves resident at the start of each step and of each
# validation. The heap is trimmed first, so that the block's pages are new to the process either way.
_PROBED_RUN = """
import json, sys
from glibc_probe import LIBC, resident_left_by_a_freed_block
import elmo.training.trainer as trainer
from elmo.training import TrainingOptions, train
from elmo.training.language_model import LanguageModel
def leaves():
    LIBC.malloc_trim(0)
    return resident_left_by_a_freed_block()
kept = {"step": [], "validation": []}
forward, evaluate = LanguageModel.forward, trainer.evaluate
def probed_forward(self, *arguments, **keywords):
    if self.training:  # a training step's, not validation's
        kept["step"].append(leaves())
    return forward(self, *arguments, **keywords)
def probed_evaluate(*arguments, **keywords):
    kept["validation"].append(leaves())
    return evaluate(*arguments, **keywords)
LanguageModel.forward, trainer.evaluate = probed_forward, probed_evaluate
corpus, vocab, config, valid, out = sys.argv[1:]
train(TrainingOptions(corpus=[corpus], vocab=vocab, config=config, valid=[valid], valid_every=1, max_steps=2,
                      batch_size=4, unroll_steps=6, n_negatives=12, checkpoint_every=100), out, progress=False)
print(json.dumps(kept))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_the_training_steps_take_large_blocks_from_the_heap_and_validation_does_not(
    tmp_path: Path, synthetic_corpus: Path, held_out_corpus: Path, vocab_file: Path, micro_options_file: Path
):
    """At 512 rows a step's tensors pass glibc's largest mmap threshold: from the heap the next step reuses their
    pages. Validation's large blocks must still be mapped and returned when freed: served from the heap for the
    whole run, they grew a validating process to 23.4 GB (docs/training.md)."""
    from glibc_probe import run_probe  # loads glibc: only where the test runs

    printed = run_probe(_PROBED_RUN, str(synthetic_corpus), str(vocab_file), str(micro_options_file),
                        str(held_out_corpus), str(tmp_path / "run"))
    kept = json.loads(printed.splitlines()[-1])
    assert len(kept["step"]) == 2 and all(bytes_ > 200 * 2**20 for bytes_ in kept["step"])
    assert len(kept["validation"]) == 2 and all(bytes_ < 16 * 2**20 for bytes_ in kept["validation"])
