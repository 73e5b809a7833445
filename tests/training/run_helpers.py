"""Micro training runs for the tests of checkpoints, stopping and the training commands."""

from pathlib import Path

from elmo.training import Corpus, TrainingOptions, Vocabulary, train


def micro_options(directory: Path, corpus: Path, config: Path, **overrides) -> TrainingOptions:
    """Options of a run that takes about a tenth of a second a step on one CPU thread."""
    vocab = directory / "vocab.txt"
    if not vocab.is_file():
        Vocabulary.from_counts(Corpus([str(corpus)]).count_tokens()).save(vocab)
    settings = dict(batch_size=4, unroll_steps=6, n_negatives=12, log_every=1, checkpoint_every=100)
    settings.update(overrides)
    return TrainingOptions(corpus=[str(corpus)], vocab=str(vocab), config=str(config), **settings)


def train_micro_run(directory: Path, corpus: Path, config: Path, name: str, **overrides) -> Path:
    run = directory / name
    train(micro_options(directory, corpus, config, **overrides), run, progress=False)
    return run
