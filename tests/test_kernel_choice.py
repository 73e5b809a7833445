"""Which LSTM kernel runs (``modules/bidirectional.py``, ``pick_kernel``) must not change what a caller can do:
autocast and gradients of gradients work whatever the batch's lengths."""

import pytest
import torch

from elmo.bilm import BiLM
from elmo.characters import batch_to_char_ids
from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig

EQUAL_LENGTHS = [["the", "cat", "sat"], ["a", "dog", "ran"]]  # full rows: the paired or the fused kernel
RAGGED = [["the", "cat", "sat"], ["a", "dog"]]  # the step loop
BFLOAT16_EPS = 2.0**-8


def _bilm(clip: float, seed: int = 0) -> BiLM:
    """A small biLM on weights N(0, 0.3): large enough that the clips of 3 fire, small enough not to saturate."""
    torch.manual_seed(seed)
    bilm = BiLM(BiLMConfig(
        char_cnn=CharCNNConfig(embedding_dim=8, filters=((1, 8), (2, 8), (3, 16)), n_highway=1, activation="relu"),
        lstm=LSTMConfig(dim=32, projection_dim=16, n_layers=2, cell_clip=clip, proj_clip=clip,
                        use_skip_connections=True),
    ))
    with torch.no_grad():
        for parameter in bilm.parameters():
            parameter.normal_(0.0, 0.3)
    return bilm


@pytest.mark.parametrize("clip", [3.0, 0.0], ids=["clipped", "unclipped"])
@pytest.mark.parametrize("wants_grad", [True, False], ids=["grad", "no-grad"])
@pytest.mark.parametrize("sentences", [EQUAL_LENGTHS, RAGGED], ids=["equal-lengths", "ragged"])
def test_cpu_autocast_bfloat16_gives_the_float32_layers_and_gradients(clip, wants_grad, sentences):
    """Under autocast the full rows used to reach the paired kernel (float32 weights against bfloat16 gradients)
    or the fused LSTM (bfloat16 layers written into float32 ones) and fail. Layers within 4 bfloat16 eps of the
    largest float32 value (measured: 1.5); gradients in the float32 ones' direction (measured: 1 - cos < 2e-4)."""
    bilm = _bilm(clip)
    char_ids = batch_to_char_ids(sentences, bilm.config.char_cnn.max_characters_per_token)
    expected, _ = bilm(char_ids)
    expected.layers.pow(2).sum().backward()
    expected_gradients = [parameter.grad.clone() for parameter in bilm.parameters()]
    bilm.zero_grad()

    with torch.set_grad_enabled(wants_grad), torch.autocast("cpu", dtype=torch.bfloat16):
        output, _ = bilm(char_ids)
    assert output.layers.dtype == torch.bfloat16  # with autograd or not: oneDNN's products skipped autocast's casts
    largest = float(expected.layers.detach().abs().max())
    torch.testing.assert_close(output.layers.float(), expected.layers, atol=4 * BFLOAT16_EPS * largest, rtol=0)
    if wants_grad:
        output.layers.float().pow(2).sum().backward()
        for parameter, expected_gradient in zip(bilm.parameters(), expected_gradients, strict=True):
            cosine = torch.nn.functional.cosine_similarity(parameter.grad.flatten(), expected_gradient.flatten(), dim=0)
            assert cosine > 0.99


def _penalty_gradients(bilm: BiLM, sentences: list[list[str]], n_rows: int,
                       square_outputs: bool = True) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A gradient penalty over the first ``n_rows`` sentences: the gradient of their layers' loss with respect to
    their token vectors, and the gradient of that gradient's squared norm with respect to the LSTM parameters."""
    char_ids = batch_to_char_ids(sentences, bilm.config.char_cnn.max_characters_per_token)
    mask = (char_ids > 0).any(dim=-1)
    token_vectors = bilm.encode_tokens(char_ids, mask).detach().requires_grad_()
    output, _ = bilm.contextualize(token_vectors, mask)
    layers = output.layers[:, :n_rows]
    loss = layers.pow(2).sum() if square_outputs else layers.sum()
    (d_token_vectors,) = torch.autograd.grad(loss, token_vectors, create_graph=True)
    lstm_parameters = [*bilm.forward_lstm.parameters(), *bilm.backward_lstm.parameters()]
    penalty_gradients = torch.autograd.grad(d_token_vectors[:n_rows].pow(2).sum(), lstm_parameters)
    return d_token_vectors[:n_rows].detach(), list(penalty_gradients)


def test_reference_kernels_give_second_order_gradients_of_full_rows_equal_to_the_ragged_step_loops():
    """The same two sentences, once as the whole batch (full rows, ``reference_kernels`` on) and once beside a
    shorter third one (a ragged batch: the step loop anyway); each row runs on its own, so both gradients agree."""
    bilm = _bilm(3.0).double()
    bilm.reference_kernels = True
    gradient, penalty_gradients = _penalty_gradients(bilm, EQUAL_LENGTHS, 2)
    bilm.reference_kernels = False
    ragged_gradient, ragged_penalty_gradients = _penalty_gradients(bilm, [*EQUAL_LENGTHS, ["birds"]], 2)
    torch.testing.assert_close(gradient, ragged_gradient, atol=1e-12, rtol=0)
    for got, want in zip(penalty_gradients, ragged_penalty_gradients, strict=True):
        assert want.abs().max() > 1e-3
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("square_outputs", [True, False], ids=["squared-loss", "linear-loss"])
def test_second_order_gradients_through_the_paired_kernel_fail_naming_the_switch(square_outputs):
    """Without the switch full rows run the paired kernel, whose backward is first-order only: differentiating its
    gradients must fail saying what to do, also for a loss linear in the layers (whose incoming gradients need no
    grad, where the kernel's term used to be dropped without a word)."""
    bilm = _bilm(3.0).double()
    with pytest.raises(RuntimeError, match="reference_kernels = True"):
        _penalty_gradients(bilm, EQUAL_LENGTHS, 2, square_outputs)
