"""The training kernels (paired LSTM layers with their own backward, the sampled softmax's own backward, the char
CNN cut to the positions it needs) against autograd through the step loop: the same loss, state and gradients."""

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from training_helpers import MICRO_CONFIG, write_synthetic_corpus

import elmo.modules.char_cnn as char_cnn
from elmo.bilm import BiLMState
from elmo.characters import PADDING_CHAR_ID, batch_to_char_ids
from elmo.modules.char_cnn import TokenEncoder
from elmo.training.batches import Batcher
from elmo.training.corpus import Corpus
from elmo.training.language_model import LanguageModel, StepNoise, initialize_like_bilm_tf
from elmo.training.softmax import SampledSoftmaxNll, sample_log_uniform, sampled_softmax_nll
from elmo.training.vocab import Vocabulary

N_ROWS, N_STEPS = 6, 7


def _step_results(model: LanguageModel, inputs, state: BiLMState, noise: StepNoise, reference: bool):
    model.zero_grad()
    model.reference_kernels = reference
    output = model(inputs, state, noise)
    (output.loss * N_STEPS).backward()
    return output, {name: parameter.grad.clone() for name, parameter in model.named_parameters()}


def _problem(tmp_path: Path, dtype: torch.dtype, cell_clip: float, proj_clip: float):
    corpus_path = write_synthetic_corpus(tmp_path / "corpus.txt", 200)
    corpus = Corpus([str(corpus_path)])
    vocab = Vocabulary.from_counts(corpus.count_tokens())
    config = replace(MICRO_CONFIG, lstm=replace(MICRO_CONFIG.lstm, cell_clip=cell_clip, proj_clip=proj_clip))
    torch.manual_seed(0)
    model = LanguageModel(config, len(vocab))
    initialize_like_bilm_tf(model)
    with torch.no_grad():  # larger weights than at the start of training, so that the clips fire
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.3)
    model = model.to(dtype)
    batcher = Batcher(corpus, vocab, range(N_ROWS), N_ROWS, N_STEPS, seed=0, max_epochs=None)
    inputs = batcher.next_batch()
    batcher.close()
    generator = torch.Generator().manual_seed(1)
    zero = model.bilm.zero_state(N_ROWS)
    state = BiLMState(torch.randn(zero.h.shape, generator=generator, dtype=dtype) * 0.2,
                      torch.randn(zero.c.shape, generator=generator, dtype=dtype) * 0.2)
    noise = StepNoise.draw(0, 3, 0.2, 10, len(vocab), range(N_ROWS), N_ROWS)
    return model, inputs, state, noise


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_paired_kernels_give_the_step_loops_loss_state_and_gradients_with_both_clips_firing(tmp_path, dtype,
                                                                                           tolerance):
    model, inputs, state, noise = _problem(tmp_path, dtype, cell_clip=0.5, proj_clip=0.1)
    reference, reference_grads = _step_results(model, inputs, state, noise, reference=True)
    paired, paired_grads = _step_results(model, inputs, state, noise, reference=False)

    torch.testing.assert_close(paired.nll_sums, reference.nll_sums, rtol=0, atol=tolerance * N_ROWS * N_STEPS)
    torch.testing.assert_close(paired.state.h, reference.state.h, rtol=0, atol=tolerance)
    torch.testing.assert_close(paired.state.c, reference.state.c, rtol=0, atol=tolerance)
    assert paired.n_targets == reference.n_targets
    for name, expected in reference_grads.items():
        torch.testing.assert_close(paired_grads[name], expected, rtol=0, atol=tolerance, msg=name)

    # The clips fired: without them the step loop's gradients are others.
    unclipped, _, _, _ = _problem(tmp_path, dtype, cell_clip=1e6, proj_clip=1e6)
    _, unclipped_grads = _step_results(unclipped, inputs, state, noise, reference=True)
    for name in ("bilm.forward_lstm.layers.0.recurrent_weight", "bilm.backward_lstm.layers.1.projection"):
        assert (unclipped_grads[name] - reference_grads[name]).abs().max() > 1e-3


def test_bfloat16_products_give_the_float64_step_loops_loss_and_gradients_to_bfloat16s_precision(tmp_path):
    """elmo train --precision bfloat16: the kernels' products on bfloat16 copies (modules/low_precision.py), all
    else float32. Against the float64 step loop, with the presets' clips: float32 within 1e-5 of it, bfloat16
    within 3 % (its 8 significant bits; 1.7 % at most here, on weights larger than training's) and measurably off
    (the products did run in bfloat16). With tight clips (0.1) rounding moves which values the clips hold, and a
    few gradients of the char CNN differ by up to 13 %."""
    model, inputs, state64, noise = _problem(tmp_path, torch.float64, cell_clip=3.0, proj_clip=3.0)
    reference, reference_grads = _step_results(model, inputs, state64, noise, reference=True)
    model.to(torch.float32)
    state = BiLMState(state64.h.float(), state64.c.float())
    loss_errors, gradient_errors = {}, {}
    for product_dtype in (None, torch.bfloat16):
        model.product_dtype = product_dtype
        result, grads = _step_results(model, inputs, state, noise, reference=False)
        loss_errors[product_dtype] = ((result.nll_sums.double() - reference.nll_sums).abs().max()
                                      / reference.nll_sums.abs().max()).item()
        gradient_errors[product_dtype] = max(((grads[name].double() - expected).norm() / expected.norm()).item()
                                             for name, expected in reference_grads.items() if expected.norm() > 0)
    assert loss_errors[None] < 1e-6 and gradient_errors[None] < 1e-5
    assert 1e-5 < loss_errors[torch.bfloat16] < 1e-2
    assert 1e-4 < gradient_errors[torch.bfloat16] < 3e-2, gradient_errors


def test_evaluation_runs_in_the_models_own_type_with_gradients_on_too(tmp_path):
    """Evaluation (no noise) scores in float32 whatever ``product_dtype`` the training steps use: with gradients on
    (a loss's gradient for saliency) the paired kernels ran bfloat16 products: a loss sum 0.13 off here, 0.016 on
    the shipped en."""
    model, inputs, state, _ = _problem(tmp_path, torch.float32, cell_clip=3.0, proj_clip=3.0)
    model.product_dtype = None
    with torch.no_grad():
        expected = model(inputs, state, None).nll_sums
    model.product_dtype = torch.bfloat16
    scored = model(inputs, state, None).nll_sums
    assert scored.requires_grad
    torch.testing.assert_close(scored.detach(), expected, rtol=0, atol=1e-4)


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_sampled_softmax_kernel_equals_autograd_with_accidental_hits_and_repeated_targets(dtype, tolerance):
    generator = torch.Generator().manual_seed(0)
    vocab_size, dim, n_positions = 40, 6, 600  # more rows than one block of the kernel
    hidden = torch.randn(n_positions, dim, generator=generator, dtype=dtype, requires_grad=True)
    weight = torch.randn(vocab_size, dim, generator=generator, dtype=dtype, requires_grad=True)
    bias = torch.randn(vocab_size, generator=generator, dtype=dtype, requires_grad=True)
    targets = torch.randint(0, 8, (n_positions,), generator=generator)  # frequent ids: repeats and hits
    candidates = sample_log_uniform(12, vocab_size, torch.Generator().manual_seed(2))
    assert torch.isin(targets, candidates.ids).any() and not torch.isin(targets, candidates.ids).all()
    upstream = torch.rand(n_positions, generator=generator, dtype=dtype)

    expected = sampled_softmax_nll(hidden, targets, weight, bias, candidates)
    expected_grads = torch.autograd.grad(expected, (hidden, weight, bias), upstream)
    got = SampledSoftmaxNll.apply(hidden, targets, weight, bias, candidates)
    got_grads = torch.autograd.grad(got, (hidden, weight, bias), upstream)

    torch.testing.assert_close(got, expected, rtol=0, atol=tolerance)
    # Each gradient within the tolerance of its largest magnitude: the weight's sums 600 positions to about 18,
    # where float32 rounding alone is 1e-5 on some CPUs' kernels.
    for got_grad, expected_grad in zip(got_grads, expected_grads, strict=True):
        scale = max(1.0, float(expected_grad.abs().max()))
        torch.testing.assert_close(got_grad, expected_grad, rtol=0, atol=tolerance * scale)


def _cut_widths_against_all_positions(monkeypatch, char_ids: torch.Tensor) -> list[int]:
    """The widths the char CNN cut the tokens' ``(tokens, 50)`` ids to, after checking its vectors and gradients
    (float64) equal those of all 50 positions, in the tokens' order."""
    config = replace(MICRO_CONFIG.char_cnn, filters=((1, 4), (3, 5), (5, 6)))
    torch.manual_seed(0)
    encoder = TokenEncoder(config, 7).double()
    upstream = torch.randn(len(char_ids), 7, dtype=torch.float64)

    def vectors_and_gradients():
        encoder.zero_grad()
        vectors = encoder(char_ids)
        (vectors * upstream).sum().backward()
        return vectors.detach(), [parameter.grad.clone() for parameter in encoder.parameters()]

    widths: list[int] = []
    cut = char_cnn._without_padding_windows
    monkeypatch.setattr(char_cnn, "_without_padding_windows",
                        lambda ids, widest: widths.append(cut(ids, widest).shape[1]) or cut(ids, widest))
    trimmed = vectors_and_gradients()
    monkeypatch.setattr(char_cnn, "_without_padding_windows", lambda ids, widest: ids)
    whole = vectors_and_gradients()
    torch.testing.assert_close(trimmed[0], whole[0], rtol=0, atol=1e-12)
    for got, expected in zip(trimmed[1], whole[1], strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    return widths


def test_char_cnn_cut_to_the_needed_positions_keeps_vectors_and_gradients(monkeypatch):
    sentences = [["a", "tree", "grows", "<S>"], ["unbelievably", "x"]]
    widths = _cut_widths_against_all_positions(monkeypatch, batch_to_char_ids(sentences).reshape(-1, 50))
    assert widths == [14 + 5]  # "unbelievably" and its two markers, then the widest filter's width


def test_char_cnn_cut_keeps_the_ids_after_padding_inside_a_hand_made_token(monkeypatch):
    """The cut kept as many positions as a token has ids that are not padding: ids made by hand with the padding
    id inside a token lost their last characters (a vector 0.59 off)."""
    char_ids = batch_to_char_ids([["ab", "ab"]]).reshape(-1, 50)
    char_ids[1, 3:20] = PADDING_CHAR_ID
    char_ids[1, 20:23] = torch.tensor([100, 120, char_ids[0, 3]])  # then two characters and the end mark
    assert _cut_widths_against_all_positions(monkeypatch, char_ids) == [23 + 5]


def test_char_cnn_cut_keeps_the_windows_between_zeros_and_padding_in_a_hand_made_token(monkeypatch):
    """A token's 0s (the id of a padded token's row) before its padding: both were read as padding, and the cut
    dropped the windows over the 0s and over the change from them to the padding (a vector 0.12 off)."""
    char_ids = batch_to_char_ids([["bank", "ab"]]).reshape(-1, 50)
    char_ids[0, 20:48] = 0
    assert char_ids[0, 48:].tolist() == [PADDING_CHAR_ID] * 2
    assert _cut_widths_against_all_positions(monkeypatch, char_ids) == [50]  # 48 used, then no room to cut


def test_a_training_batchs_tokens_in_length_groups_keep_their_vectors_gradients_and_order(monkeypatch):
    """More tokens than one pass holds (a training batch's distinct tokens) run in groups of similar length, each
    cut to its own longest token: every group narrower than one cut, the vectors and gradients those of all 50
    positions, in the tokens' own order."""
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 9, (600,), generator=generator).tolist()
    lengths[17], lengths[450] = 40, 33  # a long token or two set the width of a single cut
    words = ["".join(chr(97 + (k * 7 + i) % 26) for i in range(length)) for k, length in enumerate(lengths)]
    widths = _cut_widths_against_all_positions(monkeypatch, batch_to_char_ids([words]).reshape(-1, 50))
    assert len(widths) == char_cnn._LENGTH_GROUPS and max(widths) == 42 + 5 and min(widths) <= 6 + 5


@pytest.mark.parametrize("reference", [False, True])
def test_a_training_step_refuses_padded_rows_instead_of_scoring_padding_as_words(tmp_path, reference):
    """Padding targets (-1) indexed the last word's softmax row and counted as targets: a wrong loss, or NaN."""
    corpus = Corpus([str(write_synthetic_corpus(tmp_path / "corpus.txt", 3))])
    vocab = Vocabulary.from_counts(corpus.count_tokens())
    batcher = Batcher(corpus, vocab, range(4), 4, 40, seed=0, max_epochs=1, pad=True)
    inputs = batcher.next_batch()
    assert inputs is not None and bool((inputs.forward_targets < 0).any())
    model = LanguageModel(MICRO_CONFIG, len(vocab))
    model.reference_kernels = reference
    noise = StepNoise.draw(0, 0, 0.0, 4, len(vocab), range(4), 4)
    with pytest.raises(ValueError, match="padding targets"):
        model(inputs, model.bilm.zero_state(4), noise)
    assert torch.isfinite(model(inputs, model.bilm.zero_state(4)).nll_sums).all()  # evaluation masks them


def _softmax_problem():
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(30, 6, generator=generator, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(40, 6, generator=generator, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(40, generator=generator, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 40, (30,), generator=generator)
    return hidden, targets, weight, bias, sample_log_uniform(12, 40, torch.Generator().manual_seed(2))


def test_gradients_of_the_sampled_softmax_kernels_gradients_are_refused_naming_the_switch():
    """``once_differentiable`` let ``autograd.grad(..., create_graph=True)`` with respect to the weight go through
    and gave the second-order term as zero; autograd's statement of the same loss has a nonzero one."""
    hidden, targets, weight, bias, candidates = _softmax_problem()
    expected = sampled_softmax_nll(hidden, targets, weight, bias, candidates).sum()
    (expected_d_hidden,) = torch.autograd.grad(expected, hidden, create_graph=True)
    (second_order,) = torch.autograd.grad(expected_d_hidden.pow(2).sum(), weight)
    assert second_order.abs().max() > 1e-3
    got = SampledSoftmaxNll.apply(hidden, targets, weight, bias, candidates).sum()
    (d_hidden,) = torch.autograd.grad(got, hidden, create_graph=True)
    torch.testing.assert_close(d_hidden, expected_d_hidden.detach(), rtol=0, atol=1e-12)
    with pytest.raises(RuntimeError, match=r"first-order gradients only.*reference_kernels = True"):
        torch.autograd.grad(d_hidden.pow(2).sum(), weight)


def test_a_second_backward_through_the_sampled_softmax_kernel_is_refused():
    """The backward overwrites the saved logits, so a second one (``retain_graph``) would be wrong."""
    hidden, targets, weight, bias, candidates = _softmax_problem()
    loss = SampledSoftmaxNll.apply(hidden, targets, weight, bias, candidates).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="runs once per forward"):
        loss.backward()
