"""The float32 fast paths against the float64 NumPy reference (``float64_reference.py``), directly.

``test_reference.py`` runs the model in float64, where no fast path runs (oneDNN's reordered weights, the tanh
identity and the paired training kernel's CPU products are float32 only). Here the model runs as users run it, in
float32, and every layer is compared with the reference computed in float64 from the same weight file.

Tolerance: float32 rounds each value to within ``eps = 2**-23`` (1.2e-7) of its magnitude, and a difference
from the exact result grows with the magnitudes a computation passes through, not only with the value it ends
at: a clipped layer of magnitude 0.4 is computed from token vectors of magnitude 12. So each comparison allows
``16 eps`` of the largest magnitude among the values compared (all layers of the batch; one gradient). The
measured differences are at most 2.1 eps of it in inference and 5 eps in training (per test below); a wrong
gate, bias, clip or product would miss by orders of magnitude more.
"""

import copy

import numpy as np
import pytest
import torch
from float64_reference import CASES, SENTENCES, Reference, case_model

from elmo import BiLM, batch_to_char_ids, load_bilm
from elmo.embedder import Embedder
from elmo.modules import lstm as lstm_module
from elmo.modules.bidirectional import Kernel, pick_kernel, run_directions
from elmo.modules.lstm import fast_tanh, tanh_by_sigmoid
from elmo.modules.prepacked import HAS_ONEDNN, can_reorder
from elmo.training.softmax import SampledSoftmaxNll, sample_log_uniform, sampled_softmax_nll

EPS = torch.finfo(torch.float32).eps
TOLERANCE_EPS = 16

pytestmark = pytest.mark.skipif(not HAS_ONEDNN, reason="this PyTorch build has no oneDNN: no fast path to check")


def _assert_within_float32_rounding(got: list[np.ndarray], expected: list[np.ndarray], label: str = "") -> None:
    """``got`` equals ``expected`` to ``TOLERANCE_EPS`` eps of the largest magnitude in ``expected``."""
    expected_flat = np.concatenate([array.ravel() for array in expected])
    got_flat = np.concatenate([np.asarray(array, dtype=np.float64).ravel() for array in got])
    assert got_flat.shape == expected_flat.shape
    tolerance = TOLERANCE_EPS * EPS * np.abs(expected_flat).max()
    np.testing.assert_allclose(got_flat, expected_flat, rtol=0, atol=tolerance, err_msg=label)


def _assert_inference_fast_path_ran(bilm: BiLM) -> None:
    """oneDNN's reordered weights served the char CNN and every LSTM product (a clipping model's step loop)."""
    assert bilm.token_encoder._prepacked_filters.key is not None
    for stack in (bilm.forward_lstm, bilm.backward_lstm):
        for layer in stack.layers:
            assert layer._prepacked_input.key is not None and layer._prepacked_recurrent.key is not None
            assert layer.projection is None or layer._prepacked_projection.key is not None


def _layers_of_every_path(bilm: BiLM, sentences: list[list[str]]) -> dict[str, list[np.ndarray]]:
    """Every sentence's ``(n_layers + 1, T, 2P)`` from ``BiLM.forward`` (one padded batch, one row each) and from
    the ``Embedder`` (lanes of 2 rows: sentences one after another on a row, restarts; the token cache)."""
    with torch.no_grad():
        output, _ = bilm(batch_to_char_ids(sentences))
    forward = [output.layers[:, row, : len(tokens)].numpy() for row, tokens in enumerate(sentences)]
    return {"BiLM.forward": forward, "Embedder": Embedder(bilm).embed(sentences, "all", batch_size=2)}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fast_tanh_in_half_precision_is_tanh(dtype):
    """``2 sigmoid(2x) - 1`` loses small values in a 16-bit format (tanh(1e-4) came out 0)."""
    x = torch.tensor([1e-4, 3e-3, -0.02, 0.5, 4.0], dtype=dtype)
    with torch.no_grad():
        assert torch.equal(fast_tanh(x), torch.tanh(x))
        assert fast_tanh(x)[0] != 0


@pytest.mark.parametrize("tanh", [fast_tanh, tanh_by_sigmoid])
def test_fast_tanh_and_the_identity_equal_float64_tanh_to_float32_rounding(tanh):
    """The identity ``2 sigmoid(2x) - 1`` that the inference cell uses where MKL's tanh is slow, and whichever
    ``fast_tanh`` picks on this CPU. Measured: 1.5 eps (1.8e-7) for the identity."""
    x = torch.linspace(-12.0, 12.0, 200_001)
    with torch.no_grad():
        got = tanh(x).double()
    assert (got - torch.tanh(x.double())).abs().max() <= 4 * EPS


def test_fast_tanh_takes_pytorchs_tanh_exactly_where_mkl_runs_intels_code(monkeypatch):
    x = torch.linspace(-3.0, 3.0, 1001)
    for fast in (True, False):
        monkeypatch.setattr(lstm_module, "mkl_tanh_is_fast", lambda fast=fast: fast)
        with torch.no_grad():
            expected = torch.tanh(x) if fast else tanh_by_sigmoid(x)
            assert torch.equal(fast_tanh(x), expected)
    assert not torch.equal(torch.tanh(x), tanh_by_sigmoid(x))  # so the choice is seen


def test_every_layer_of_the_fixture_in_float32_equals_the_float64_reference(fixture_dir, fixture_sentences):
    """AllenNLP's fixture model (its clips fire: 376 cell and 246 projection values on these sentences).
    Measured: 1.1e-6 on values up to 7.1, 1.4 eps of it, on each path."""
    weight_file = fixture_dir / "lm_weights.hdf5"
    reference = Reference.from_files(fixture_dir / "options.json", weight_file)
    expected = [reference.embed(tokens)[0] for tokens in fixture_sentences]
    assert reference.cell_clips_fired > 0 and reference.proj_clips_fired > 0
    bilm = load_bilm(fixture_dir / "options.json", weight_file)  # its own copy: the Embedder puts it in eval mode
    for path, got in _layers_of_every_path(bilm, fixture_sentences).items():
        _assert_within_float32_rounding(got, expected, path)
    _assert_inference_fast_path_ran(bilm)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_layer_on_random_weights_in_float32_equals_the_float64_reference(case, tmp_path):
    """Weights N(0, 0.6), clips 0.7 and 0.4: the clips fire hundreds of times (counted by the reference). The
    model without clips runs as PyTorch's fused LSTM, the others on oneDNN's reordered weights. Measured, of the
    largest value: all-projections 3.1e-6 (2.1 eps), no-projections 2.2e-7 (1.1 eps), no-clips 4.0e-6 (1.3 eps)."""
    bilm, reference = case_model(case, tmp_path)
    expected = [reference.embed(tokens)[0] for tokens in SENTENCES]
    lstm = bilm.config.lstm
    if lstm.cell_clip:
        assert reference.cell_clips_fired > 100
    if lstm.has_projection and lstm.proj_clip:
        assert reference.proj_clips_fired > 100
    for path, got in _layers_of_every_path(bilm, SENTENCES).items():
        assert all(array.dtype == np.float32 for array in got), path
        _assert_within_float32_rounding(got, expected, path)
    if lstm.cell_clip:
        _assert_inference_fast_path_ran(bilm)


@pytest.mark.parametrize("case", ["all-projections", "no-projections"])
def test_paired_training_kernel_in_float32_equals_the_float64_reference_and_its_gradients(case, tmp_path):
    """Both directions' stacks on the paired kernel (CPU products on oneDNN) from a random state, both clips
    firing. Outputs and final states against the NumPy reference, row by row; every gradient (inputs, initial
    state, each parameter) against autograd through the float64 step loop, whose forward ``test_reference.py``
    ties to the same reference. Measured: outputs at most 4.5 eps of the largest, gradients 5.0 eps."""
    bilm, reference = case_model(case, tmp_path)
    lstm = bilm.config.lstm
    n_rows, n_steps = 3, 6
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(2, n_rows * n_steps, lstm.projection_dim, generator=generator)
    h0 = torch.randn(2, lstm.n_layers, n_rows, lstm.projection_dim, generator=generator) * 0.3
    c0 = torch.randn(2, lstm.n_layers, n_rows, lstm.dim, generator=generator) * 0.3
    upstream = [torch.randn(2, n_rows * n_steps, lstm.projection_dim, generator=generator)
                for _ in range(lstm.n_layers)]
    upstream_h, upstream_c = torch.randn(h0.shape, generator=generator), torch.randn(c0.shape, generator=generator)

    def run(stacks, dtype: torch.dtype, reference_kernel: bool):
        leaves = [tensor.to(dtype, copy=True).requires_grad_() for tensor in (inputs, h0, c0)]
        kernel = pick_kernel(stacks[0], leaves[0], [n_rows] * n_steps, None, reference_kernel)
        run = run_directions(*stacks, leaves[0], [n_rows] * n_steps, leaves[1], leaves[2], reference=reference_kernel)
        loss = sum((layer * weights.to(dtype)).sum() for layer, weights in zip(run.layers, upstream, strict=True))
        loss = loss + (run.h * upstream_h.to(dtype)).sum() + (run.c * upstream_c.to(dtype)).sum()
        gradients = torch.autograd.grad(loss, leaves + [p for stack in stacks for p in stack.parameters()])
        return kernel, run, gradients

    stacks = (bilm.forward_lstm, bilm.backward_lstm)
    kernel, paired, paired_gradients = run(stacks, torch.float32, reference_kernel=False)
    assert kernel is Kernel.PAIRED and can_reorder(inputs)  # the kernel's per-step products run on oneDNN
    kernel, _, expected_gradients = run([copy.deepcopy(stack).double() for stack in stacks], torch.float64, True)
    assert kernel is Kernel.STEP_LOOP

    got, expected = [], []
    for direction in (0, 1):
        for row in range(n_rows):
            steps = [inputs[direction, step * n_rows + row].double().numpy() for step in range(n_steps)]
            states = [(h0[direction, k, row].double().numpy(), c0[direction, k, row].double().numpy())
                      for k in range(lstm.n_layers)]
            outputs, finals = reference.run_direction(steps, direction, states)
            for k in range(lstm.n_layers):
                got += [paired.layers[k][direction, row::n_rows].detach().numpy(),
                        paired.h[direction, k, row].detach().numpy(), paired.c[direction, k, row].detach().numpy()]
                expected += [np.array(outputs[k]), *finals[k]]
    assert reference.cell_clips_fired > 50
    if lstm.has_projection:
        assert reference.proj_clips_fired > 50
    _assert_within_float32_rounding(got, expected)
    for got_gradient, expected_gradient in zip(paired_gradients, expected_gradients, strict=True):
        _assert_within_float32_rounding([got_gradient.numpy()], [expected_gradient.numpy()])


def test_sampled_softmax_kernel_in_float32_equals_autograd_in_float64():
    """The kernel's float32 products (oneDNN on the sampled rows) against the plain statement in float64, over more
    rows than one block, with accidental hits and repeated targets. Measured: 0.8 eps of the largest loss,
    gradients at most 1.7 eps of the largest entry."""
    generator = torch.Generator().manual_seed(0)
    vocab_size, dim, n_positions = 300, 24, 600
    hidden = torch.randn(n_positions, dim, generator=generator)
    weight = torch.randn(vocab_size, dim, generator=generator) * 0.5
    bias = torch.randn(vocab_size, generator=generator)
    targets = torch.randint(0, 20, (n_positions,), generator=generator)
    candidates = sample_log_uniform(40, vocab_size, torch.Generator().manual_seed(2))
    assert torch.isin(targets, candidates.ids).any()
    upstream = torch.rand(n_positions, generator=generator)

    leaves = [tensor.clone().requires_grad_() for tensor in (hidden, weight, bias)]
    got = SampledSoftmaxNll.apply(leaves[0], targets, leaves[1], leaves[2], candidates)
    got_gradients = torch.autograd.grad(got, leaves, upstream)
    leaves = [tensor.double().requires_grad_() for tensor in (hidden, weight, bias)]
    expected = sampled_softmax_nll(leaves[0], targets, leaves[1], leaves[2], candidates)
    expected_gradients = torch.autograd.grad(expected, leaves, upstream.double())

    _assert_within_float32_rounding([got.detach().numpy()], [expected.detach().numpy()])
    for got_gradient, expected_gradient in zip(got_gradients, expected_gradients, strict=True):
        _assert_within_float32_rounding([got_gradient.numpy()], [expected_gradient.numpy()])
