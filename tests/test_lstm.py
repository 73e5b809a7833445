import subprocess
import sys
import textwrap

import pytest
import torch

from elmo.modules.lstm import LstmState, ProjectedLstm, _cudnn_in_full_float32, _step_linear
from elmo.modules.prepacked import HAS_ONEDNN


def _run(layer, inputs, batch_sizes, state):
    outputs, final = layer(inputs, batch_sizes, state)
    (outputs.sum() + final.h.sum() + final.c.sum()).backward()
    return outputs.detach(), final.h.detach(), final.c.detach(), [p.grad.clone() for p in layer.parameters()]


def test_fused_lstm_without_clips_equals_the_step_loop_with_gradients():
    torch.manual_seed(0)
    for projection_dim in (5, 9):  # with and without the projection
        layer = ProjectedLstm(7, 9, projection_dim, cell_clip=0.0, proj_clip=0.0).double()
        with torch.no_grad():
            layer.bias.normal_()
        batch_sizes = [4, 4, 3, 1]  # packed: rows end at different steps
        inputs = torch.randn(sum(batch_sizes), 7, dtype=torch.float64)
        state = LstmState(torch.randn(4, projection_dim, dtype=torch.float64), torch.randn(4, 9, dtype=torch.float64))
        fused = _run(layer, inputs, batch_sizes, state)
        layer.zero_grad()
        layer.cell_clip = 1e30  # a clip that never fires sends the same cell through the step loop
        loop = _run(layer, inputs, batch_sizes, state)
        for a, b in zip(fused[:3], loop[:3], strict=True):
            torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
        for a, b in zip(fused[3], loop[3], strict=True):
            torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_the_fused_lstm_runs_under_pytorchs_newer_float32_precision_setting():
    """A caller who sets ``torch.backends.fp32_precision`` (PyTorch's newer TF32 switch): the fused path entered
    cuDNN's flags on the CPU too, which read the older switch, and that refuses once the newer is set. In a fresh
    interpreter, as a user's process starts (a process that used the older switch reads it without a complaint)."""
    code = textwrap.dedent("""
        import torch
        from elmo.modules.lstm import LstmState, ProjectedLstm, _cudnn_in_full_float32
        torch.manual_seed(0)
        layer = ProjectedLstm(7, 9, 5, cell_clip=0.0, proj_clip=0.0).double()
        inputs = torch.randn(6, 7, dtype=torch.float64)
        state = LstmState(torch.zeros(3, 5, dtype=torch.float64), torch.zeros(3, 9, dtype=torch.float64))
        torch.backends.fp32_precision = "ieee"
        with torch.no_grad():
            fused = layer(inputs, [3, 3], state, fused=True)[0]
            layer.cell_clip = 1e30  # the step loop, which no setting of cuDNN touches
            print(float((fused - layer(inputs, [3, 3], state)[0]).abs().max()))
        # What a CUDA run sets (no GPU needed to set it): the newer switch, for cuDNN's RNNs alone, then back
        torch.backends.cudnn.rnn.fp32_precision = "tf32"
        with _cudnn_in_full_float32():
            print(torch.backends.cudnn.rnn.fp32_precision)
        print(torch.backends.cudnn.rnn.fp32_precision, torch.backends.cudnn.conv.fp32_precision)
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-800:]
    difference, inside, after = run.stdout.splitlines()
    assert float(difference) < 1e-12
    assert (inside, after) == ("ieee", "tf32 ieee")


def test_a_process_on_the_older_float32_switch_has_it_set_for_cudnn_and_put_back():
    with _cudnn_in_full_float32():
        assert not torch.backends.cudnn.allow_tf32
    assert torch.backends.cudnn.allow_tf32  # PyTorch's default


def test_blocked_step_product_equals_linear_with_gradients():
    torch.manual_seed(1)
    for n_rows, n_in, n_out in [(1, 24, 768), (5, 24, 768), (3, 300, 512), (4, 7, 44)]:
        inputs = torch.randn(n_rows, n_in, dtype=torch.float64, requires_grad=True)
        weight = torch.randn(n_out, n_in, dtype=torch.float64, requires_grad=True)
        addend = torch.randn(n_rows, n_out, dtype=torch.float64)
        blocked = _step_linear(inputs, weight, addend)
        expected = addend + torch.nn.functional.linear(inputs, weight)
        torch.testing.assert_close(_step_linear(inputs, weight), expected - addend, atol=1e-12, rtol=0)
        torch.testing.assert_close(blocked, expected, atol=1e-12, rtol=0)
        upstream = torch.randn_like(expected)
        grads = torch.autograd.grad(blocked, (inputs, weight), upstream)
        expected_grads = torch.autograd.grad(expected, (inputs, weight), upstream)
        for got, want in zip(grads, expected_grads, strict=True):
            torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


@pytest.mark.skipif(not HAS_ONEDNN, reason="this PyTorch build has no oneDNN")
def test_prepacked_products_without_autograd_give_the_autograd_paths_outputs_and_follow_weight_changes():
    """The input, recurrent and projection products run from oneDNN's reordered weights under no_grad."""
    torch.manual_seed(2)
    layer = ProjectedLstm(16, 512, 64, cell_clip=3.0, proj_clip=3.0)
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.normal_(0.0, 0.1)
    batch_sizes = [8] * 5 + [6, 4, 2, 1]
    inputs = torch.randn(sum(batch_sizes), 16)
    state = LstmState(torch.randn(8, 64), torch.randn(8, 512))
    keys = []
    for _ in range(2):  # the second round runs after an in-place change to a weight, which must repack it
        with torch.no_grad():
            prepacked_outputs, prepacked_final = layer(inputs, batch_sizes, state)
        keys.append((layer._prepacked_input.key, layer._prepacked_recurrent.key, layer._prepacked_projection.key))
        assert None not in keys[-1]  # all three products ran from reordered weights
        outputs, final = layer(inputs, batch_sizes, state)  # autograd on: the blocked products
        torch.testing.assert_close(prepacked_outputs, outputs.detach(), atol=1e-5, rtol=0)
        torch.testing.assert_close(prepacked_final.h, final.h.detach(), atol=1e-5, rtol=0)
        torch.testing.assert_close(prepacked_final.c, final.c.detach(), atol=1e-5, rtol=0)
        with torch.no_grad():
            layer.recurrent_weight.mul_(1.5)
            layer.projection.mul_(0.9)
    assert keys[0][0] == keys[1][0] and keys[0][1] != keys[1][1] and keys[0][2] != keys[1][2]
