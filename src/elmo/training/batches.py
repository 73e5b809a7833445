"""Batches as bilm-tf makes them: ``rows x unroll_steps`` tokens per direction, rows continuing from batch
to batch, and the tensors the language model reads.

The input side is characters, so every distinct token of a batch (both directions) is encoded once and
gathered; the targets are word ids (``-1`` where a row has run out, in evaluation only).
"""

from dataclasses import dataclass, fields, replace
from functools import lru_cache

import numpy as np
import torch

from elmo.characters import token_to_char_ids
from elmo.training.corpus import Corpus, OpenFiles, RowPosition, RowReader
from elmo.training.vocab import Vocabulary

NO_TARGET = -1


@dataclass
class ModelInputs:
    """One batch for the language model.

    ``char_ids``: ``(n_distinct_tokens, max_characters)``; ``forward_tokens`` / ``backward_tokens``:
    ``(rows, steps)`` indices into ``char_ids``; ``forward_targets`` / ``backward_targets``: ``(rows, steps)``
    word ids, ``NO_TARGET`` where there is none.
    """

    char_ids: torch.Tensor
    forward_tokens: torch.Tensor
    backward_tokens: torch.Tensor
    forward_targets: torch.Tensor
    backward_targets: torch.Tensor

    @property
    def n_targets(self) -> int:
        return int((self.forward_targets != NO_TARGET).sum())

    def to(self, device: torch.device) -> "ModelInputs":
        """The batch on ``device``; itself on the CPU, where batches are built."""
        if device.type == "cpu":
            return self
        return ModelInputs(*(getattr(self, f.name).to(device) for f in fields(ModelInputs)))


@lru_cache(maxsize=1 << 18)
def _char_ids(token: str, max_characters: int) -> np.ndarray:
    """A token's character ids (below 263) as read-only uint16, shared by every batch it is in: stacking these
    instead of making a tensor of tuples took a 1,024-row batch from 89 to 73 ms on a CPU of this project."""
    ids = np.asarray(token_to_char_ids(token, max_characters), dtype=np.uint16)
    ids.setflags(write=False)
    return ids


class Batcher:
    """Batches for the global rows ``rows`` (those this process owns) of an ``n_rows``-row global batch.

    Training reads with no ``max_epochs``: each row wraps around into the next pass over its share, so every
    batch is full, and the trainer decides when to stop (``TrainingOptions.step_limit``). With ``max_epochs``,
    ``pad=False`` ends at the first batch some row cannot fill; ``pad=True`` (evaluation) pads rows that ran
    out, with ``<S>`` inputs and no targets, until every row has run out, so every token is scored once.
    Every row starts each pass ``pass_start_fraction`` into its share of the text (``RowReader``).
    """

    def __init__(self, corpus: Corpus, vocab: Vocabulary, rows: range, n_rows: int, unroll_steps: int,
                 seed: int, max_epochs: int | None, max_characters: int = 50,
                 positions: list[RowPosition] | None = None, pad: bool = False,
                 pass_start_fraction: float = 0.0) -> None:
        if positions is not None and len(positions) != len(rows):
            raise ValueError(f"{len(positions)} row positions for {len(rows)} rows")
        self.corpus = corpus
        self.vocab = vocab
        self.unroll_steps = unroll_steps
        self.max_characters = max_characters
        self.pad = pad
        self.files = OpenFiles(corpus)
        self.readers = [
            RowReader(corpus, self.files, row, n_rows, seed, max_epochs, None if positions is None else positions[k],
                      pass_start_fraction)
            for k, row in enumerate(rows)
        ]

    def positions(self) -> list[RowPosition]:
        """Where every row stands now, as copies (a checkpoint's record)."""
        return [replace(reader.position, sentence=list(reader.position.sentence)) for reader in self.readers]

    def close(self) -> None:
        self.files.close()

    def restore(self, positions: list[RowPosition]) -> None:
        """Put every row back where ``positions`` says."""
        for reader, position in zip(self.readers, positions, strict=True):
            reader.position = position

    def next_batch(self) -> ModelInputs | None:
        """The next batch, or None when the text has run out; then every row stands where it stood before the
        call, so a checkpoint saved after it resumes where the last trained batch ended."""
        before = [replace(reader.position) for reader in self.readers]
        rows = [reader.take(self.unroll_steps) for reader in self.readers]
        n_steps = self.unroll_steps
        if self.pad:
            if all(not row.forward_inputs for row in rows):
                return None
        elif any(len(row.forward_inputs) < n_steps for row in rows):
            self.restore(before)
            return None
        distinct: dict[str, int] = {}
        pad_index = distinct.setdefault("<S>", 0)
        token_id = self.vocab.token_id
        forward_tokens: list[list[int]] = []
        backward_tokens: list[list[int]] = []
        forward_targets: list[list[int]] = []
        backward_targets: list[list[int]] = []
        for row in rows:  # Python lists, one tensor each at the end: a tensor per row cost most of a batch
            padding = n_steps - len(row.forward_inputs)
            forward_tokens.append([distinct.setdefault(t, len(distinct)) for t in row.forward_inputs]
                                  + [pad_index] * padding)
            backward_tokens.append([distinct.setdefault(t, len(distinct)) for t in row.backward_inputs]
                                   + [pad_index] * padding)
            forward_targets.append([token_id(t) for t in row.forward_targets] + [NO_TARGET] * padding)
            backward_targets.append([token_id(t) for t in row.backward_targets] + [NO_TARGET] * padding)
        char_ids = torch.from_numpy(np.stack([_char_ids(token, self.max_characters) for token in distinct])).long()
        return ModelInputs(char_ids, *(torch.tensor(ids, dtype=torch.long) for ids in
                                       (forward_tokens, backward_tokens, forward_targets, backward_targets)))
