import dataclasses

import numpy as np
import pytest
import torch

from elmo import BiLM, BiLMConfig, batch_to_char_ids
from elmo.lanes import pack_lanes
from elmo.modules.lstm import LstmState, ProjectedLstm


def test_every_position_runs_once_lanes_stay_a_prefix_and_restarts_mark_sequence_starts():
    lengths = [5, 1, 9, 3, 3, 7, 2, 4, 6, 1]
    packing = pack_lanes(lengths, n_lanes=3)
    total = sum(lengths)
    assert sorted(packing.forward_index.tolist()) == list(range(total))
    assert sorted(packing.backward_index.tolist()) == list(range(total))
    assert packing.batch_sizes == sorted(packing.batch_sizes, reverse=True)  # running lanes are a prefix
    assert packing.batch_sizes[0] == 3 and sum(packing.batch_sizes) == total
    # Longest first to the least loaded lane: the loads are 14, 14 and 13, so 14 steps.
    assert len(packing.batch_sizes) == 14

    offsets = np.concatenate([[0], np.cumsum(lengths)])
    starts = set(offsets[:-1].tolist())
    lane_of_slot = np.concatenate([np.arange(n) for n in packing.batch_sizes])
    step_of_slot = np.repeat(np.arange(len(packing.batch_sizes)), packing.batch_sizes)
    for slot, position in enumerate(packing.forward_index.tolist()):
        step, lane = int(step_of_slot[slot]), int(lane_of_slot[slot])
        restarted = step in packing.restarts and lane in packing.restarts[step].tolist()
        assert restarted == (position in starts and step > 0)
    # The backward direction reads each sequence from its end: its first step is the sequence's last position.
    for slot, position in enumerate(packing.backward_index.tolist()):
        forward_position = int(packing.forward_index[slot])
        sequence = int(np.searchsorted(offsets, forward_position, side="right") - 1)
        assert position == offsets[sequence] + offsets[sequence + 1] - 1 - forward_position


def test_bad_lane_arguments_are_named():
    with pytest.raises(ValueError, match="n_lanes is 0"):
        pack_lanes([3], 0)
    with pytest.raises(ValueError, match="at least one step"):
        pack_lanes([3, 0], 2)


def test_restarted_rows_equal_each_sequence_run_alone_from_zeros():
    torch.manual_seed(0)
    layer = ProjectedLstm(6, 10, 4, cell_clip=3.0, proj_clip=3.0).double()
    with torch.no_grad():
        layer.bias.normal_()
    lengths = [4, 2, 3, 3, 1]
    inputs = torch.randn(sum(lengths), 6, dtype=torch.float64)
    packing = pack_lanes(lengths, n_lanes=2)
    zeros = LstmState(torch.zeros(2, 4, dtype=torch.float64), torch.zeros(2, 10, dtype=torch.float64))
    with torch.no_grad():
        outputs, _ = layer(inputs[packing.forward_index], packing.batch_sizes, zeros, packing.restarts)
        laned = torch.empty_like(outputs)
        laned[packing.forward_index] = outputs
        start = 0
        for length in lengths:
            alone, _ = layer(inputs[start : start + length], [1] * length,
                             LstmState(zeros.h[:1], zeros.c[:1]))
            torch.testing.assert_close(laned[start : start + length], alone, atol=1e-12, rtol=0)
            start += length


def test_lanes_give_each_sentence_its_vectors_alone(fixture_bilm, fixture_sentences):
    sentences = [*fixture_sentences[:9], ["single"], fixture_sentences[0] * 3]
    lengths = [len(tokens) for tokens in sentences]
    with torch.no_grad():
        char_ids = batch_to_char_ids([[token for tokens in sentences for token in tokens]])
        token_vectors = fixture_bilm.encode_tokens(char_ids, torch.ones(char_ids.shape[:2], dtype=torch.bool))[0]
        laned = fixture_bilm.contextualize_lanes(token_vectors, lengths, n_lanes=3)
        start = 0
        for tokens in sentences:
            alone, _ = fixture_bilm(batch_to_char_ids([tokens]))
            torch.testing.assert_close(laned[:, start : start + len(tokens)], alone.layers[:, 0], atol=1e-5, rtol=0)
            start += len(tokens)
    assert start == laned.shape[1]


def _lanes_equal_each_alone(bilm: BiLM, token_vectors: torch.Tensor, lengths: list[int], n_lanes: int) -> torch.Tensor:
    """Runs the sentences on the lanes, asserts each equals ``contextualize`` on it alone (float64), returns them."""
    laned = bilm.contextualize_lanes(token_vectors, lengths, n_lanes)
    start = 0
    for length in lengths:
        alone, _ = bilm.contextualize(token_vectors[None, start : start + length],
                                      torch.ones((1, length), dtype=torch.bool))
        torch.testing.assert_close(laned[:, start : start + length], alone.layers[:, 0], atol=1e-12, rtol=0)
        start += length
    return laned


def test_lanes_hold_on_a_model_with_long_input_gate_blocks_and_no_sentences():
    torch.manual_seed(3)
    bilm = BiLM(BiLMConfig.preset("small")).double().eval()
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 40, size=70).tolist()  # empty ones too; 1,500+ positions: several gate blocks
    token_vectors = torch.randn(sum(lengths), bilm.config.lstm.projection_dim, dtype=torch.float64)
    with torch.no_grad():
        laned = _lanes_equal_each_alone(bilm, token_vectors, lengths, n_lanes=8)
        assert bilm.contextualize_lanes(token_vectors[:0], [], n_lanes=8).shape == (3, 0, laned.shape[2])
        # lengths as an array, whose truth value is ambiguous (the empty check raised on it)
        torch.testing.assert_close(bilm.contextualize_lanes(token_vectors, np.array(lengths), n_lanes=8), laned,
                                   atol=0, rtol=0)
        assert bilm.contextualize_lanes(token_vectors[:0], np.array([], dtype=int), n_lanes=8).shape[1] == 0
        with pytest.raises(ValueError, match="add up to 3 tokens but 0"):
            bilm.contextualize_lanes(token_vectors[:0], [3], n_lanes=8)


def test_a_model_without_clipping_runs_each_sentence_on_its_own_fused_row(monkeypatch):
    fused_calls = []
    fused = ProjectedLstm._fused
    monkeypatch.setattr(ProjectedLstm, "_fused", lambda self, *args: fused_calls.append(1) or fused(self, *args))
    torch.manual_seed(4)
    config = BiLMConfig.preset("small")
    config = dataclasses.replace(config, lstm=dataclasses.replace(config.lstm, cell_clip=0.0, proj_clip=0.0))
    bilm = BiLM(config).double().eval()
    assert all(layer.fuses for layer in bilm.forward_lstm.layers)
    lengths = [5, 0, 9, 2]
    token_vectors = torch.randn(sum(lengths), config.lstm.projection_dim, dtype=torch.float64)
    with torch.no_grad():
        _lanes_equal_each_alone(bilm, token_vectors, lengths, n_lanes=2)
    assert len(fused_calls) == 2 * 2 * (1 + len(lengths))  # directions x layers x (the lanes, then each alone)


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, torch.float32])
def test_contextualize_refuses_a_mask_that_is_not_bool_naming_its_dtype(dtype):
    """A 0/1 integer mask indexes positions instead of selecting them (it failed with a shape mismatch)."""
    bilm = BiLM(BiLMConfig.preset("small")).eval()
    token_vectors = torch.zeros(2, 3, bilm.config.lstm.projection_dim)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=dtype)
    with pytest.raises(TypeError, match=f"mask has dtype {dtype}; expected torch.bool"):
        bilm.contextualize(token_vectors, mask)
    output, _ = bilm.contextualize(token_vectors, mask.bool())
    assert output.layers.shape[:3] == (3, 2, 3)
