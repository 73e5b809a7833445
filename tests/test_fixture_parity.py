"""Parity with bilm-tf on AllenNLP's fixture (see tests/fixtures/elmo/NOTICE).

bilm-tf computed the references in 10 batches of 3 rows, batch i holding sentence i of each of the three
lists, with its LSTM state carried from batch to batch per row. We replay exactly that with the explicit
state of ``BiLM.forward``.
"""

import json

import h5py
import numpy as np
import torch

from elmo import batch_to_char_ids, load_bilm


def _replay(fixture_dir, stateful: bool) -> float:
    bilm = load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")
    sentences = json.loads((fixture_dir / "sentences.json").read_text())
    references = [h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    worst = 0.0
    state = None
    for i in range(10):
        batch = [sentences[k][i].split() for k in range(3)]
        with torch.no_grad():
            output, new_state = bilm(batch_to_char_ids(batch), state if stateful else None)
        state = new_state
        for k, tokens in enumerate(batch):
            assert output.mask[k].sum().item() == len(tokens)
            forward_backward = references[k][str(i)][...]
            expected = np.concatenate([forward_backward[0], forward_backward[1]], axis=-1)
            worst = max(worst, np.abs(output.layers[2, k, : len(tokens)].numpy() - expected).max())
    for reference in references:
        reference.close()
    return worst


def test_top_layer_matches_bilm_tf_when_state_is_carried_as_bilm_tf_did(fixture_dir):
    assert _replay(fixture_dir, stateful=True) <= 1e-5


def test_fixture_really_depends_on_the_carried_state(fixture_dir):
    # Guards the test above: a stateless run must NOT match, or the fixture would not test state handling.
    assert _replay(fixture_dir, stateful=False) > 1e-2
