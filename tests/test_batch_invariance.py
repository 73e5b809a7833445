import json

import torch

from elmo import batch_to_char_ids, load_bilm


def test_sentence_alone_equals_same_sentence_in_a_padded_batch(fixture_dir):
    bilm = load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")
    sentences = [s.split() for batch in json.loads((fixture_dir / "sentences.json").read_text()) for s in batch]
    sentences = [*sentences[:12], [], ["single"]]  # mixed lengths, an empty row and a one-token row
    with torch.no_grad():
        batched, _ = bilm(batch_to_char_ids(sentences))
        worst = 0.0
        for row, tokens in enumerate(sentences):
            alone, _ = bilm(batch_to_char_ids([tokens]))
            n = len(tokens)
            assert alone.layers.shape[2] == n
            worst = max(worst, (batched.layers[:, row, :n] - alone.layers[:, 0]).abs().max().item() if n else 0.0)
            assert not batched.layers[:, row, n:].any()  # padding positions are exactly zero
    assert worst <= 1e-5


def test_row_order_in_the_batch_does_not_matter(fixture_dir):
    bilm = load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")
    sentences = [s.split() for s in json.loads((fixture_dir / "sentences.json").read_text())[0]]
    permutation = torch.randperm(len(sentences), generator=torch.Generator().manual_seed(0)).tolist()
    with torch.no_grad():
        output, state = bilm(batch_to_char_ids(sentences))
        shuffled, shuffled_state = bilm(batch_to_char_ids([sentences[i] for i in permutation]))
    for new_row, old_row in enumerate(permutation):
        n = len(sentences[old_row])
        assert torch.allclose(shuffled.layers[:, new_row, :n], output.layers[:, old_row, :n], atol=1e-5, rtol=0)
        assert torch.allclose(shuffled_state.h[:, :, new_row], state.h[:, :, old_row], atol=1e-5, rtol=0)


def test_empty_batch_and_all_empty_sentences_give_empty_layers(fixture_dir):
    bilm = load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")
    with torch.no_grad():
        none, _ = bilm(batch_to_char_ids([]))
        empties, _ = bilm(batch_to_char_ids([[], []]))
    assert none.layers.shape == (3, 0, 0, 32)
    assert empties.layers.shape == (3, 2, 0, 32)
    assert empties.mask.shape == (2, 0)
