"""The training loop: bilm-tf's recipe with exact resume and DistributedDataParallel.

One step: each process builds its rows of the global batch, runs both directions from the state the
previous step left, takes the sampled-softmax loss, and back-propagates ``loss * unroll_steps`` (bilm-tf's
gradient scale: summed over time, averaged over rows); DDP averages the gradients of processes that hold
equal shares of the batch, so the update equals the one-process update. Then the global gradient norm is
clipped and the optimizer (Adagrad by default) steps.

Run directory: ``log.jsonl`` and ``perplexity.png`` (run_log.py), ``checkpoints/step-*/`` (checkpoints.py) and
``vocab.txt``; nothing else. Only rank 0 writes. A new run starts in a new directory, one without a run's or a
model's files (others it leaves alone), or one of a run that stopped before its first checkpoint; any other is
refused before the corpus is read (``_check_new_run_directory``).

What stops a run early: a loss or weights that are not finite stop it with ``TrainingDiverged`` and no
checkpoint of that step, so the checkpoints kept are the last good ones. SIGINT or SIGTERM lets the current
step finish, writes a checkpoint and raises ``TrainingInterrupted``; a second signal ends the process at
once. Resuming skips, names and sets aside (``step-*.damaged``) checkpoints whose files fail their checksums,
and continues from the newest one that verifies.

Past 350 lines on purpose: the options, the start of a run and its loop read best together, top to bottom;
what they use (perplexity, the log, the processes, the signals) lives in its own module.
"""

import logging
import math
import signal
from dataclasses import asdict, dataclass, field, fields
from itertools import chain, islice
from pathlib import Path
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from elmo.bilm import BiLMState
from elmo.extras import require
from elmo.files import check_not_an_input, check_output_directory, remove_stale_partials, same_path
from elmo.memory import TRAINING_SLACK_SHARE, FreedMemoryTrimmer, keep_freed_memory, large_blocks_from_heap
from elmo.model_dir import MODEL_FILES
from elmo.modules.low_precision import PRODUCT_DTYPES
from elmo.stop_signals import stop_between_steps
from elmo.training.batches import Batcher
from elmo.training.checkpoints import (
    CHECKPOINTS_DIRECTORY,
    STATE_FILE,
    Checkpoint,
    CheckpointError,
    LogInterval,
    capture_rng,
    checkpoint_directory,
    list_checkpoints,
    load_newest_good_checkpoint,
    nonfinite_tensors,
    restore_rng,
    save_checkpoint,
    set_aside,
)
from elmo.training.corpus import Corpus, CorpusError, matched_files, pass_start_fraction
from elmo.training.export import (
    grow_vocabulary,
    lacks_softmax,
    language_model_with_new_softmax,
    load_language_model,
)
from elmo.training.language_model import LanguageModel, StepNoise, initialize_like_bilm_tf
from elmo.training.perplexity import evaluate
from elmo.training.presets import resolve_config
from elmo.training.processes import Processes
from elmo.training.run_log import LOG_FILE, PLOT_FILE, IntervalMeter, RunLog, read_records
from elmo.training.softmax_sync import (
    SOFTMAX_PARAMETERS,
    CommunicatedBytes,
    all_reduce_softmax_rows,
    dense_gradient_bytes,
)
from elmo.training.vocab import Vocabulary, VocabularyError
from elmo.training.widen import widen

logger = logging.getLogger(__name__)

# The corpus's first words a new run's vocabulary is checked against: enough for a steady share, read in a moment.
CHECKED_WORDS = 50_000
# A word whose type occurs this often in those words is frequent: a vocabulary of this corpus and tokenizer has it
# (its min_count and max_size drop rare words only), so <UNK> is judged among frequent words. Where they are fewer
# than FREQUENT_JUDGED of the words (Chinese raw text split on whitespace: each line one word, seen once), among all.
FREQUENT_COUNT = 5
FREQUENT_JUDGED = 0.10
# Below this rank correlation between a vocabulary's ids and the counts of its frequent words among those words, a
# new run warns that the vocabulary is not in frequency order (Vocabulary.frequency_order).
FREQUENCY_ORDER_WARNED = 0.2
# Judged shares of <UNK> above which a new run warns, and above which it is refused.
UNKNOWN_WARNED = 0.02
UNKNOWN_REFUSED = 0.50
# The run's vocabulary, written at its start; with its log, plot and checkpoints, all that a run directory holds.
RUN_VOCAB_FILE = "vocab.txt"
RUN_ENTRIES = (LOG_FILE, PLOT_FILE, RUN_VOCAB_FILE, CHECKPOINTS_DIRECTORY)


class TrainingDiverged(RuntimeError):
    """The loss or the weights stopped being finite; nothing of that step was written."""


class TrainingInterrupted(Exception):
    """SIGINT or SIGTERM stopped the run after ``step``; ``checkpoint`` holds that step (``None`` when the run
    stopped before its first step)."""

    def __init__(self, signal_number: int, step: int, checkpoint: Path | None) -> None:
        self.signal_number, self.step, self.checkpoint = signal_number, step, checkpoint
        super().__init__(f"{signal.Signals(signal_number).name} after step {step}")

    @property
    def exit_code(self) -> int:
        """The shell's code for a process ended by the signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signal_number


@dataclass
class TrainingOptions:
    """Everything that defines a run; defaults are bilm-tf's (``batch_size`` is its rows per GPU)."""

    corpus: list[str]
    vocab: str | None = None
    config: str | None = None  # None: tiny from scratch, the init_from model's own shape
    tokenizer: str = "whitespace"
    valid: list[str] = field(default_factory=list)
    init_from: str | None = None
    min_count: int = 1
    batch_size: int = 128
    unroll_steps: int = 20
    n_negatives: int = 8192
    precision: str = "float32"  # the training kernels' products: a name of PRODUCT_DTYPES
    optimizer: str = "adagrad"
    learning_rate: float = 0.2
    lr_decay_steps: int = 0
    lr_final: float | None = None
    initial_accumulator: float = 1.0
    dropout: float = 0.1
    state_reset: float = 0.0
    clip_norm: float = 10.0
    seed: int = 0
    max_steps: int | None = None
    epochs: int | None = None
    checkpoint_every: int = 500
    keep_checkpoints: int = 3
    valid_every: int = 500
    valid_batch_size: int = 32
    log_every: int = 10

    def validate(self) -> None:
        if self.max_steps is None and self.epochs is None:
            raise ValueError("give --max-steps or --epochs (or both): training needs a stopping point")
        if self.vocab is None and self.init_from is None:
            raise ValueError("give --vocab (make one with `elmo vocab`), or --init-from a trained model")
        positive = {"batch_size": self.batch_size, "unroll_steps": self.unroll_steps, "n_negatives": self.n_negatives,
                    "checkpoint_every": self.checkpoint_every, "keep_checkpoints": self.keep_checkpoints,
                    "valid_every": self.valid_every, "valid_batch_size": self.valid_batch_size,
                    "log_every": self.log_every, "min_count": self.min_count}
        positive |= {name: value for name, value in (("max_steps", self.max_steps), ("epochs", self.epochs))
                     if value is not None}
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"{name} is {value}; expected a positive integer")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout is {self.dropout}; expected 0 <= dropout < 1")
        if not 0.0 <= self.state_reset <= 1.0:
            raise ValueError(f"state_reset is {self.state_reset}; expected a probability, 0 <= state_reset <= 1")
        if self.optimizer not in ("adagrad", "adam"):
            raise ValueError(f"optimizer is {self.optimizer!r}; expected 'adagrad' or 'adam'")
        if self.precision not in PRODUCT_DTYPES:
            raise ValueError(f"precision is {self.precision!r}; expected one of {', '.join(PRODUCT_DTYPES)}")
        if self.learning_rate <= 0 or self.clip_norm <= 0:
            raise ValueError("learning_rate and clip_norm must be positive")
        if not 0 <= self.seed < 2**64:
            raise ValueError(f"seed is {self.seed}; expected 0 <= seed < 2**64, as PyTorch's generators take")
        if self.lr_decay_steps < 0:
            raise ValueError(f"lr_decay_steps is {self.lr_decay_steps}; expected 0 (constant rate) or more")
        if self.min_count != 1 and (self.vocab is not None or self.init_from is None):
            raise ValueError(f"min_count ({self.min_count}) picks the corpus's new words to add to init_from's "
                             "vocabulary; with vocab, or without init_from, the vocabulary is the vocab file's: "
                             "give one of min_count and vocab")
        if self.lr_final is not None and self.lr_decay_steps == 0:
            raise ValueError(f"lr_final is {self.lr_final}, the end of a decay, but lr_decay_steps is 0 (a constant "
                             "rate): give lr_decay_steps too, or leave lr_final out")
        if self.lr_final is not None and not 0 < self.lr_final <= self.learning_rate:
            raise ValueError(f"lr_final is {self.lr_final}; expected 0 < lr_final <= learning_rate "
                             f"({self.learning_rate})")

    def step_limit(self, corpus: Corpus) -> int:
        """The step to stop after: ``max_steps``, or with ``epochs`` bilm-tf's count, ``epochs`` times the
        corpus's targets (a sentence of n words is n + 1) over the tokens a step trains, whichever comes first.
        Rows wrap around into the next pass, so every row trains to the end (had the run stopped when the row
        with the least text ran out, text of the other rows would never be read). CorpusError if the corpus holds
        less than one step's tokens."""
        limits = [] if self.max_steps is None else [self.max_steps]
        if self.epochs is not None:
            n_targets = sum(len(sentence) + 1 for sentence in corpus.sentences())
            epoch_steps = self.epochs * n_targets // (self.batch_size * self.unroll_steps)
            if epoch_steps == 0:
                raise CorpusError(f"the corpus holds {n_targets} tokens (with one end of sentence each): "
                                  f"--epochs {self.epochs} is less than one step of {self.batch_size} x "
                                  f"{self.unroll_steps}; use a smaller batch or more text")
            limits.append(epoch_steps)
        if not limits:
            raise ValueError("give --max-steps or --epochs (or both): training needs a stopping point")
        return min(limits)

    def learning_rate_at(self, step: int) -> float:
        """The rate of the step after ``step`` steps: constant, or a cosine from ``learning_rate`` down to
        ``lr_final`` (default a tenth of it) over ``lr_decay_steps`` steps and ``lr_final`` after. A function of
        the step alone, so a resumed run takes the same rates."""
        if self.lr_decay_steps == 0:
            return self.learning_rate
        final = self.lr_final if self.lr_final is not None else self.learning_rate / 10
        progress = min(step, self.lr_decay_steps) / self.lr_decay_steps
        return final + (self.learning_rate - final) * 0.5 * (1.0 + math.cos(math.pi * progress))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TrainingOptions":
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


def _make_optimizer(model: LanguageModel, options: TrainingOptions) -> torch.optim.Optimizer:
    """Adam or TF's Adagrad, fused (one kernel over all parameters; 3-4x faster than the per-tensor loop on CPU)
    where PyTorch has a fused kernel for every parameter: Adam's on CPU and CUDA, Adagrad's on CPU only (on CUDA it
    runs PyTorch's default, the multi-tensor loop)."""
    fused_devices = ("cpu", "cuda") if options.optimizer == "adam" else ("cpu",)
    fused = all(p.device.type in fused_devices and p.is_floating_point() for p in model.parameters())
    if options.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=options.learning_rate, fused=fused)
    # TF's Adagrad: accumulator starts at initial_accumulator, no epsilon.
    return torch.optim.Adagrad(model.parameters(), lr=options.learning_rate,
                               initial_accumulator_value=options.initial_accumulator, eps=0.0, fused=fused)


def _load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """The saved state, run by this code's implementation (fused or not), whichever the checkpoint's run used."""
    implementation: list[dict[str, Any]] = [
        {key: group[key] for key in ("fused", "foreach") if key in group} for group in optimizer.param_groups
    ]
    optimizer.load_state_dict(state)
    for group, keys in zip(optimizer.param_groups, implementation, strict=True):
        group.update(keys)


def _new_model(options: TrainingOptions, corpus: Corpus, warn: bool) -> tuple[LanguageModel, Vocabulary]:
    """The model a new run starts from and its vocabulary, checked against the corpus (``_check_vocabulary_fits``;
    ``warn``: whether this process logs its warning)."""
    torch.manual_seed(options.seed)
    if options.init_from is None:
        if options.vocab is None:
            raise ValueError("a model trained from scratch needs a vocabulary (--vocab) or --init-from")
        vocab = Vocabulary.load(options.vocab)
        _check_vocabulary_fits(vocab, corpus, f"--vocab {options.vocab}", warn)
        model = LanguageModel(resolve_config(options.config or "tiny"), len(vocab))
        initialize_like_bilm_tf(model)
        return model, vocab
    if lacks_softmax(options.init_from):
        if options.vocab is None:
            raise ValueError(f"--init-from {options.init_from} holds no softmax: give --vocab (`elmo vocab`) for the "
                             "new one that training starts over its biLM")
        vocab = Vocabulary.load(options.vocab)
        _check_vocabulary_fits(vocab, corpus, f"--vocab {options.vocab}", warn)
        return _shaped(language_model_with_new_softmax(options.init_from, vocab), options), vocab
    words_to_add = None if options.vocab is None else Vocabulary.load(options.vocab)  # refused before the model loads
    model, old_vocab = load_language_model(options.init_from)
    model = _shaped(model, options)
    if words_to_add is not None:
        tokens_by_frequency = words_to_add.tokens
        source = f"the vocabulary of --init-from {options.init_from} with --vocab {options.vocab}"
    else:
        tokens_by_frequency = [token for token, count in corpus.count_tokens().most_common()
                               if count >= options.min_count]
        source = (f"the vocabulary of --init-from {options.init_from} with the corpus's words seen at least "
                  f"{options.min_count} times")
    vocab = old_vocab.adapted_to(tokens_by_frequency)
    _check_vocabulary_fits(vocab, corpus, source, warn)
    return grow_vocabulary(model, old_vocab, vocab), vocab


def _check_vocabulary_fits(vocab: Vocabulary, corpus: Corpus, source: str, warn: bool) -> None:
    """``_check_vocabulary_order``, then: VocabularyError when ``vocab`` maps more than ``UNKNOWN_REFUSED`` of the
    frequent words among the corpus's first ``CHECKED_WORDS`` to ``<UNK>`` (of all of them where few are frequent), a
    logged warning above ``UNKNOWN_WARNED``: a vocabulary made from text split by another tokenizer (``--tokenizer``
    defaults to whitespace whatever split the vocabulary's text) or from other text trains on ``<UNK>`` targets, and
    nothing else in a run would say so. Both checks read the same words, tokenized once."""
    sample = [list(islice(chain.from_iterable(corpus.sentences()), CHECKED_WORDS))]  # one "sentence" of the words
    counts = vocab.count_unknown(sample, CHECKED_WORDS, FREQUENT_COUNT)
    overall = counts.unknown / counts.words
    judged_by_frequent = counts.frequent >= FREQUENT_JUDGED * counts.words
    share = counts.frequent_unknown / counts.frequent if judged_by_frequent else overall
    _check_vocabulary_order(vocab, sample, source, warn)
    if share <= UNKNOWN_WARNED:
        return
    frequent = (f"{counts.frequent_unknown / counts.frequent:.1%} of the {counts.frequent:,} whose type occurs there "
                f"at least {FREQUENT_COUNT} times" if counts.frequent else
                f"none of them of a type that occurs there at least {FREQUENT_COUNT} times")
    judged = "" if judged_by_frequent else " (too few frequent words to judge by: the share of all is judged)"
    problem = (f"{source} maps {overall:.1%} of the first {counts.words:,} words of the corpus to <UNK>, {frequent}"
               f"{judged}. A vocabulary leaves out rare words, not frequent ones: was it made from text split by "
               f"another tokenizer than --tokenizer {corpus.tokenizer_name}, or from other text?")
    if share > UNKNOWN_REFUSED:
        raise VocabularyError(f"{problem} A run is refused above {UNKNOWN_REFUSED:.0%}: give the --tokenizer that "
                              "split the vocabulary's text, or make the vocabulary from this corpus (`elmo vocab`)")
    if warn:
        logger.warning("%s Above %.0f%%, it would be refused.", problem, UNKNOWN_REFUSED * 100)


def _check_vocabulary_order(vocab: Vocabulary, sample: list[list[str]], source: str, warn: bool) -> None:
    """A logged warning when ``vocab`` is not in bilm-tf's order (the specials first, then the words most frequent
    first, judged on ``sample``, the corpus's first words): the sampler draws id k as the k-th most frequent word,
    so a vocabulary in another order (sorted, say) trains worse without any other sign (about 20 % higher validation
    perplexity after 100 steps in a test)."""
    if not warn:
        return
    if not vocab.specials_first():
        logger.warning("%s does not begin with <S>, </S> and <UNK>: the sampler takes id k for the k-th most "
                       "frequent word, and these three are among the most frequent targets. Make the vocabulary "
                       "with `elmo vocab`, or put them first.", source)
    order = vocab.frequency_order(sample, CHECKED_WORDS, FREQUENT_COUNT)
    if order is not None and order < FREQUENCY_ORDER_WARNED:
        logger.warning("%s is not in frequency order: the ranks of its ids and of its words' counts among the first "
                       "%s words of the corpus correlate by %.2f (about 0.5 or more for a vocabulary of similar text). "
                       "The sampler takes id k for the k-th most frequent word, so training is slower; make the "
                       "vocabulary with `elmo vocab`, which orders it.", source, f"{CHECKED_WORDS:,}", order)


def _shaped(model: LanguageModel, options: TrainingOptions) -> LanguageModel:
    """The starting model as it is, or widened to ``options.config`` (``widen`` refuses other changes)."""
    return model if options.config is None else widen(model, resolve_config(options.config))


def train(options: TrainingOptions, out_dir: str | Path, resume: bool = False, progress: bool = True) -> int:
    """Train (or, with ``resume``, continue the run in ``out_dir`` from its newest checkpoint, with
    ``options``' ``max_steps``/``epochs``); returns the number of steps done."""
    require("train", "elmo.training.train")  # matplotlib draws perplexity.png at the first checkpoint
    processes = Processes.from_environment()
    try:
        return _train(options, Path(out_dir), resume, progress, processes)
    finally:
        processes.close()


def _train(options: TrainingOptions, out_dir: Path, resume: bool, progress: bool, processes: Processes) -> int:
    if out_dir.exists() and not out_dir.is_dir():
        raise CheckpointError(f"{out_dir} is a file; --out names a run directory")
    checkpoint: Checkpoint | None = None
    if resume:
        checkpoint = _load_for_resume(out_dir, processes)
        saved = TrainingOptions.from_json(checkpoint.options)
        if options.max_steps is not None or options.epochs is not None:
            saved.max_steps, saved.epochs = options.max_steps, options.epochs
        options = saved
    else:
        _check_new_run_directory(out_dir, options)
        _check_text_files(out_dir, options)
    options.validate()
    new_run = checkpoint is None
    corpus = Corpus(options.corpus, options.tokenizer, check_utf8=new_run)
    valid_corpus = Corpus(options.valid, options.tokenizer, check_utf8=new_run) if options.valid else None
    if checkpoint is not None:
        _check_same_corpus(checkpoint, corpus, out_dir)
    step_limit = options.step_limit(corpus)  # refuses --epochs too few for one step before the model is built
    if checkpoint is not None and checkpoint.step >= step_limit and processes.is_writer:
        logger.warning("the run is at step %d, at or past its limit of %d steps (--max-steps or --epochs): nothing "
                       "to train; give a larger limit to go on", checkpoint.step, step_limit)
    if processes.is_writer and (out_dir / CHECKPOINTS_DIRECTORY).is_dir():
        # a killed run's; only the writer may: readers list runs live
        remove_stale_partials(out_dir / CHECKPOINTS_DIRECTORY)
    rows = processes.rows(options.batch_size)

    if checkpoint is None:
        model, vocab = _new_model(options, corpus, warn=processes.is_writer)
        step, positions, state = 0, None, model.bilm.zero_state(options.batch_size)
    else:
        vocab = checkpoint.vocab
        model = checkpoint.language_model()
        step, positions, state = checkpoint.step, checkpoint.rows, checkpoint.lstm_state
    state = BiLMState(state.h[:, :, rows.start : rows.stop], state.c[:, :, rows.start : rows.stop])
    model.to(processes.device).train()
    model.product_dtype = PRODUCT_DTYPES[options.precision]
    state = BiLMState(state.h.to(processes.device), state.c.to(processes.device))
    optimizer = _make_optimizer(model, options)
    if checkpoint is not None:
        _load_optimizer_state(optimizer, checkpoint.optimizer_state)
        restore_rng(checkpoint.rng)
    wrapped: torch.nn.Module = model
    if processes.world_size > 1:  # the softmax's gradient is exchanged by its rows instead (softmax_sync.py)
        DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, list(SOFTMAX_PARAMETERS))
        wrapped = DistributedDataParallel(model)
    communicated = CommunicatedBytes()
    keep_freed_memory()  # most tensors of a step have the last step's sizes: reused, not faulted in (elmo.memory)
    # The char CNN's tensors vary with the batch's words: the trimmer bounds what is held, at 1.5x the working set.
    trimmer = FreedMemoryTrimmer(slack_share=TRAINING_SLACK_SHARE)

    batcher = Batcher(corpus, vocab, rows, options.batch_size, options.unroll_steps, options.seed, None,
                      model.config.char_cnn.max_characters_per_token,
                      None if positions is None else positions[rows.start : rows.stop],
                      pass_start_fraction=pass_start_fraction(options.seed))
    log = RunLog(out_dir, step) if processes.is_writer else None
    if log is not None and checkpoint is None:
        vocab.save(out_dir / RUN_VOCAB_FILE)
    bar = tqdm(total=step_limit, initial=step, disable=not (progress and processes.is_writer),
               unit="step", dynamic_ncols=True)
    tokens_per_step = options.batch_size * options.unroll_steps
    interval = IntervalMeter(checkpoint.log_interval if checkpoint is not None else LogInterval())
    last_saved = step
    interrupted = False
    with stop_between_steps() as stop:
        try:
            while step < step_limit:
                if processes.any(stop.signal_number is not None):
                    interrupted = True
                    break
                inputs = batcher.next_batch()
                assert inputs is not None  # rows wrap around: the text never runs out
                noise = StepNoise.draw(options.seed, step, options.dropout, options.n_negatives, len(vocab), rows,
                                       options.batch_size, options.state_reset)
                with large_blocks_from_heap():  # a step's large tensors reuse the last step's pages (elmo.memory)
                    output = wrapped(inputs.to(processes.device), noise.reset_rows(state), noise)
                    (output.loss * options.unroll_steps).backward()
                    if processes.world_size > 1:
                        communicated = all_reduce_softmax_rows(
                            model.softmax_weight, model.softmax_bias, noise.candidates.ids,
                            torch.stack([inputs.forward_targets, inputs.backward_targets]), processes.world_size)
                        communicated.dense = dense_gradient_bytes(model)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), options.clip_norm)
                    for group in optimizer.param_groups:
                        group["lr"] = options.learning_rate_at(step)
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
                state = output.state
                step += 1
                trimmer.after_batch()
                step_nll_sums = processes.sum(output.nll_sums.detach()).cpu()
                n_targets = output.n_targets * processes.world_size
                if not bool(torch.isfinite(step_nll_sums).all()):
                    _diverged(out_dir, step, f"the training loss is {(step_nll_sums / n_targets).tolist()} "
                              "(forward, backward)")
                interval.add(step_nll_sums, n_targets)

                if step % options.log_every == 0:
                    record = interval.record(step, tokens_per_step)
                    record["lr"] = options.learning_rate_at(step - 1)  # the rate of the step just taken
                    if processes.world_size > 1:  # this process's share of the last step's collectives
                        record["communicated_bytes"] = asdict(communicated)
                    bar.set_postfix(loss=f"{record['loss']:.3f}", ppl=f"{record['perplexity']:.1f}",
                                    tok_s=f"{record['tokens_per_s']:.0f}")
                    if log is not None:
                        log.write(record)
                bar.update(1)
                # A stop asked for now skips the validation (minutes on a large text) so the checkpoint is written
                # within a scheduler's grace period. The run's last step is validated wherever it falls, so the
                # log holds the figure of the checkpoint a finished run ends on.
                if (valid_corpus is not None and (step % options.valid_every == 0 or step == step_limit)
                        and not processes.any(stop.signal_number is not None)):
                    _validate(model, valid_corpus, vocab, options, processes, log, step)
                if step % options.checkpoint_every == 0:
                    _save(out_dir, options, model, vocab, optimizer, step, batcher, state, processes, log, interval)
                    last_saved = step
        finally:
            bar.close()
            batcher.close()
        if step != last_saved:
            _save(out_dir, options, model, vocab, optimizer, step, batcher, state, processes, log, interval)
            last_saved = step
    processes.barrier()
    if interrupted:
        saved_at = checkpoint_directory(out_dir, step) if last_saved == step and step > 0 else None
        raise TrainingInterrupted(stop.signal_number or signal.SIGTERM, step, saved_at)
    return step


def _check_new_run_directory(out_dir: Path, options: TrainingOptions) -> None:
    """Refuse, before the corpus is read, an ``out_dir`` where a new run would overwrite what is not its own: a
    path under a file (found otherwise at the first write, after the work), the ``--init-from`` model's own
    directory (its vocab.txt would be replaced by the grown one while its softmax stays in the old order, so the
    model is silently ruined), a finished or checkpointed run (``--resume`` continues it), and a directory holding
    a model's files, or a run's file names without its log (a model's vocab.txt, a user's word list; a run writes
    its log first). Other files (a log tee'd there) are left alone. A directory of a run that stopped before its
    first checkpoint may be reused."""
    check_output_directory(out_dir, "--out")
    if options.init_from is not None and same_path(out_dir, Path(options.init_from)):
        raise CheckpointError(f"--out {out_dir} is the directory of --init-from {options.init_from}: the run would "
                              f"replace the model's {RUN_VOCAB_FILE} with the grown vocabulary and leave its softmax "
                              "in the old order, ruining it; give the run a directory of its own")
    if list_checkpoints(out_dir):
        raise CheckpointError(f"{out_dir} already holds a run; continue it with --resume or choose another --out")
    if not out_dir.is_dir():
        return
    entries = sorted(entry.name for entry in out_dir.iterdir()
                     if not (entry.name.startswith(".") and entry.name.endswith(".partial")))  # killed writes'
    model_files = [name for name in entries if name in MODEL_FILES and name not in RUN_ENTRIES]
    if model_files:
        raise CheckpointError(f"--out {out_dir} holds a model's files ({', '.join(model_files)}), not a run's: the run "
                              f"would write its {RUN_VOCAB_FILE} beside them; give a new or empty directory")
    run_files = [name for name in entries if name in RUN_ENTRIES]  # others (a tee'd train.log) the run leaves alone
    if run_files and LOG_FILE not in run_files:
        raise CheckpointError(f"--out {out_dir} holds {', '.join(run_files)} but no {LOG_FILE}, so not a run's (a "
                              "run writes its log first), and the run would replace them: give a new or empty "
                              "directory")
    read_records(out_dir / LOG_FILE)  # RunLogError where another program's log.jsonl stands there
    inputs = [*options.corpus, *options.valid, *([options.vocab] if options.vocab is not None else [])]
    check_not_an_input(out_dir / RUN_VOCAB_FILE, inputs, f"the run's {RUN_VOCAB_FILE}")


def _check_text_files(out_dir: Path, options: TrainingOptions) -> None:
    """CorpusError, before the text is read, for a --corpus or --valid file inside the run directory (a pattern
    that matches the run's own files: it would train on its vocabulary and log, and refuse to resume once they
    changed) or a --valid file that is also a --corpus file (validation would score text the run trains on)."""
    run = out_dir.resolve()
    corpus = matched_files(options.corpus)
    valid = matched_files(options.valid) if options.valid else []
    for option, path in [*(("--corpus", path) for path in corpus), *(("--valid", path) for path in valid)]:
        if path.resolve().is_relative_to(run):
            raise CorpusError(f"{option} names {path}, inside the run directory {out_dir}, where the run writes its "
                              "own files: keep the text outside --out (or give a pattern that does not match it)")
    for path in valid:
        if any(same_path(path, trained) for trained in corpus):
            raise CorpusError(f"--valid {path} is also a --corpus file: validation would score text the run trains "
                              "on; give held-out text")


def _load_for_resume(out_dir: Path, processes: Processes) -> Checkpoint:
    """The newest checkpoint that verifies; newer ones that do not are named and set aside. A checkpoint directory
    itself is refused: the run would go on inside it, beside the run it came from, unseen by its log and export."""
    if (out_dir / STATE_FILE).is_file():
        run = out_dir.parent.parent if out_dir.parent.name == CHECKPOINTS_DIRECTORY else None
        raise CheckpointError(f"{out_dir} is a checkpoint, not a run directory: resume the run"
                              f"{f' ({run})' if run is not None else ''}, whose newest good checkpoint it continues "
                              "from, or start a new run from this checkpoint with --init-from")
    checkpoint, directory, refused = load_newest_good_checkpoint(out_dir)
    processes.barrier()  # every process has read its checkpoint before any is renamed
    for damaged, reason in refused:
        if processes.is_writer:
            moved = set_aside(damaged)
            logger.warning("%s; set aside as %s", reason, moved.name)
    if refused and processes.is_writer:
        logger.warning("resuming from %s (step %d), the newest checkpoint that verifies", directory, checkpoint.step)
    return checkpoint


def corpus_files(corpus: Corpus) -> list[tuple[str, int]]:
    return [(str(path), size) for path, size in zip(corpus.paths, corpus.sizes, strict=True)]


def _check_same_corpus(checkpoint: Checkpoint, corpus: Corpus, out_dir: Path) -> None:
    """CheckpointError when the training text's files are not those the run read: its rows stand at byte offsets
    into them, so a file added, removed or changed in size would put them mid-line or elsewhere in the text."""
    if not checkpoint.corpus_files:  # written before the files were recorded
        return
    recorded, now = dict(checkpoint.corpus_files), dict(corpus_files(corpus))
    changes = [f"{path} is gone" for path in recorded if path not in now]
    changes += [f"{path} is new" for path in now if path not in recorded]
    changes += [f"{path} was {recorded[path]:,} bytes and is {now[path]:,}" for path in recorded
                if path in now and now[path] != recorded[path]]
    if list(recorded) != list(now) and not changes:
        changes = ["its files are in another order"]
    if changes:
        raise CheckpointError(f"the training text of {out_dir} is not the text it read ({'; '.join(changes[:3])}"
                              f"{'; ...' if len(changes) > 3 else ''}): resuming would read from the wrong places; "
                              "restore the files, or start a new run from this one with --init-from")


def _diverged(out_dir: Path, step: int, what: str) -> None:
    kept = list_checkpoints(out_dir)
    last_good = (f"the newest checkpoint, {kept[-1]}, holds finite weights" if kept
                 else "no checkpoint had been written yet")
    raise TrainingDiverged(f"step {step}: {what}; the run stopped without writing a checkpoint of this step "
                           f"({last_good}). A lower --lr or --clip-norm may keep a new run from diverging.")


def _validate(model: LanguageModel, corpus: Corpus, vocab: Vocabulary, options: TrainingOptions,
              processes: Processes, log: RunLog | None, step: int) -> None:
    if processes.is_writer:
        result = evaluate(model, corpus, vocab, options.valid_batch_size, options.unroll_steps, processes.device)
        note = result.unknown_note()
        tqdm.write(f"step {step}: validation perplexity {result.average:.2f}" + (f" ({note})" if note else ""))
        if log is not None:
            log.write({"step": step, "valid_perplexity": result.average, "valid_forward_perplexity": result.forward,
                       "valid_backward_perplexity": result.backward, "valid_unknown_share": result.unknown_share})
    processes.barrier()


def _save(out_dir: Path, options: TrainingOptions, model: LanguageModel, vocab: Vocabulary,
          optimizer: torch.optim.Optimizer, step: int, batcher: Batcher, state: BiLMState, processes: Processes,
          log: RunLog | None, interval: IntervalMeter) -> None:
    """A checkpoint of ``step``; never of weights that are not finite (they would replace good checkpoints)."""
    model_state = {name: tensor.cpu() for name, tensor in model.state_dict().items()}
    nonfinite = nonfinite_tensors(model_state)
    if nonfinite:
        _diverged(out_dir, step, f"weights {', '.join(nonfinite[:3])}{', ...' if len(nonfinite) > 3 else ''} "
                  "hold NaN or infinite values")
    positions, full_state = processes.gather_rows(batcher.positions(), state)
    if processes.is_writer:
        checkpoint = Checkpoint(
            step=step, options=asdict(options), config=model.config, vocab=vocab,
            model_state=model_state, optimizer_state=optimizer.state_dict(),
            lstm_state=BiLMState(full_state.h.cpu(), full_state.c.cpu()), rows=positions, rng=capture_rng(),
            log_interval=interval.saved(), corpus_files=corpus_files(batcher.corpus))
        save_checkpoint(out_dir, checkpoint, options.keep_checkpoints)
        if log is not None:
            log.plot()
    processes.barrier()
