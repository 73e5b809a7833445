"""Continuous batching: many sentences run one after another on a few LSTM rows ("lanes").

A batch of sentences padded side by side keeps running after its short rows end: the longest sentence runs
its last steps on a few rows, and each time step reads the whole recurrent weight (32 MB for the original
model) whatever the number of rows. Here each of ``n_lanes`` rows takes a sentence, and when it ends the row
takes the next one, with its state set back to zeros at the boundary. Sentences go longest first to the lane
with the least work so far, so the lanes end at nearly the same step and almost every step runs full.

The result is exact: a sentence's vectors do not depend on the sentences before it on its lane, because its
state starts from zeros, as it does alone (``tests/test_lanes.py``).
"""

import heapq
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch


class LanePacking(NamedTuple):
    """Where each step of each lane reads from, time-major, as ``modules/lstm.py`` takes sequences.

    Positions index the sequences laid end to end (sequence i at ``offsets[i]:offsets[i] + lengths[i]``).
    """

    forward_index: torch.Tensor  # packed slot -> position; lanes sorted longest first, all lanes of step 0 first
    backward_index: torch.Tensor  # the same lanes and steps, each sequence read from its last position back
    batch_sizes: list[int]  # lanes still running at each step
    restarts: dict[int, torch.Tensor]  # step -> lanes (rows of that step) where a new sequence begins
    first_sequences: list[int]  # the sequence each lane runs first (with a lane per sequence, the one it runs)


def pack_lanes(lengths: Sequence[int], n_lanes: int) -> LanePacking:
    """Assign sequences of ``lengths`` (each >= 1) to at most ``n_lanes`` lanes, longest to the least loaded."""
    if n_lanes < 1:
        raise ValueError(f"n_lanes is {n_lanes}; expected at least 1")
    if any(length < 1 for length in lengths):
        raise ValueError("every sequence needs at least one step")
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    loads = [(0, lane) for lane in range(min(n_lanes, len(lengths)))]
    lane_sequences: list[list[int]] = [[] for _ in loads]
    for sequence in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        load, lane = heapq.heappop(loads)
        lane_sequences[lane].append(sequence)
        heapq.heappush(loads, (load + lengths[sequence], lane))
    lane_sequences.sort(key=lambda sequences: -sum(lengths[i] for i in sequences))

    n_steps = sum(lengths[i] for i in lane_sequences[0]) if lane_sequences else 0
    forward = np.full((n_steps, len(lane_sequences)), -1, dtype=np.int64)  # (step, lane), -1 once a lane ends
    backward = forward.copy()
    restarts: dict[int, list[int]] = {}
    for lane, sequences in enumerate(lane_sequences):
        step = 0
        for sequence in sequences:
            positions = np.arange(offsets[sequence], offsets[sequence + 1])
            forward[step : step + len(positions), lane] = positions
            backward[step : step + len(positions), lane] = positions[::-1]
            if step > 0:
                restarts.setdefault(step, []).append(lane)
            step += len(positions)
    running = forward >= 0  # each step's running lanes come first: lanes are sorted by their load
    return LanePacking(
        forward_index=torch.from_numpy(forward[running]),
        backward_index=torch.from_numpy(backward[running]),
        batch_sizes=running.sum(axis=1).tolist(),
        restarts={step: torch.tensor(lanes) for step, lanes in restarts.items()},
        first_sequences=[sequences[0] for sequences in lane_sequences],
    )
