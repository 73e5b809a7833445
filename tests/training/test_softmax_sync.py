"""Two training processes exchange the softmax's gradient by its rows: what they send scales with the rows a step
touches (shared negatives and targets), not with the vocabulary."""

import json
import os
from pathlib import Path

import torch
from torch import multiprocessing

from elmo.training import Corpus, TrainingOptions, Vocabulary, train
from elmo.training.batches import Batcher
from elmo.training.corpus import pass_start_fraction
from elmo.training.language_model import StepNoise

VOCAB_SIZE = 100_000
N_NEGATIVES = 64


def _worker(rank: int, options: TrainingOptions, out: Path, port: int) -> None:
    torch.set_num_threads(1)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    train(options, out, progress=False)


def _rows_touched(options: TrainingOptions, vocab: Vocabulary, n_steps: int) -> list[int]:
    """Per step, the distinct softmax rows of the global batch: negatives and both directions' targets."""
    corpus = Corpus(options.corpus)
    batcher = Batcher(corpus, vocab, range(options.batch_size), options.batch_size, options.unroll_steps,
                      options.seed, options.epochs, pass_start_fraction=pass_start_fraction(options.seed))
    counts = []
    for step in range(n_steps):
        inputs = batcher.next_batch()
        noise = StepNoise.draw(options.seed, step, options.dropout, options.n_negatives, len(vocab),
                               range(options.batch_size), options.batch_size)
        rows = torch.cat([noise.candidates.ids, inputs.forward_targets.reshape(-1),
                          inputs.backward_targets.reshape(-1)])
        counts.append(len(torch.unique(rows)))
    batcher.close()
    return counts


def test_two_processes_send_the_touched_softmax_rows_not_the_whole_100k_vocabulary(
    tmp_path: Path, synthetic_corpus: Path, micro_options_file: Path
):
    words = Vocabulary.from_counts(Corpus([str(synthetic_corpus)]).count_tokens()).tokens
    vocab = Vocabulary([*words, *(f"unseen{i}" for i in range(VOCAB_SIZE - len(words)))])
    vocab.save(tmp_path / "vocab.txt")
    options = TrainingOptions(corpus=[str(synthetic_corpus)], vocab=str(tmp_path / "vocab.txt"),
                              config=str(micro_options_file), batch_size=4, unroll_steps=6, n_negatives=N_NEGATIVES,
                              log_every=1, checkpoint_every=100, max_steps=3)
    port = 29500 + (os.getpid() + 7) % 1000
    multiprocessing.spawn(_worker, args=(options, tmp_path / "run", port), nprocs=2)

    records = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    sent = [record["communicated_bytes"] for record in records if "communicated_bytes" in record]
    projection_dim = json.loads(micro_options_file.read_text())["lstm"]["projection_dim"]
    row_bytes = (projection_dim + 1) * 4  # a weight row and its bias, float32
    assert len(sent) == 3
    for step, (step_sent, rows) in enumerate(zip(sent, _rows_touched(options, vocab, 3), strict=True)):
        assert step_sent["softmax_rows"] == rows * row_bytes, step
        assert step_sent["softmax_rows"] < 0.002 * VOCAB_SIZE * row_bytes  # DDP would send all 100,000 rows
        assert step_sent["targets"] == 2 * 2 * 6 * 8  # this process's 2 rows x 6 steps, both directions, int64
        assert 0 < step_sent["dense"] < VOCAB_SIZE * row_bytes / 10
