"""The same code path on CUDA. Skipped on machines without a GPU (CI has none); run where one is lent."""

import numpy as np
import pytest
import torch

from elmo.embedder import Embedder

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


def test_cuda_vectors_equal_cpu_vectors(fixture_dir, fixture_sentences):
    cpu = Embedder.load(str(fixture_dir)).embed(fixture_sentences)
    gpu = Embedder.load(str(fixture_dir), device="cuda").embed(fixture_sentences)
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=0)


def test_the_shipped_models_cuda_vectors_equal_cpu_vectors_with_pytorchs_default_tf32_convolutions():
    """cuDNN's TF32 convolutions (PyTorch's default) moved en's vectors by 2.7e-3; the CUDA path multiplies instead."""
    assert torch.backends.cudnn.allow_tf32
    sentences = [["The", "bank", "of", "the", "river", "flooded", "."], ["I", "deposited", "cash", "at", "the", "bank"],
                 ["Supercalifragilistic", "words", "are", "long"]]
    cpu = Embedder.load("en").embed(sentences, "all")
    gpu = Embedder.load("en", device="cuda").embed(sentences, "all")
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=0)


def test_an_unclipped_models_cuda_vectors_equal_cpu_vectors_with_pytorchs_default_tf32_rnns(fixture_bilm,
                                                                                           fixture_sentences):
    """A model without clips runs cuDNN's fused LSTM on CUDA, in TF32 by PyTorch's default unless told not to."""
    import dataclasses

    from elmo import BiLM

    assert torch.backends.cudnn.allow_tf32
    config = fixture_bilm.config
    unclipped = BiLM(dataclasses.replace(config, lstm=dataclasses.replace(config.lstm, cell_clip=0.0,
                                                                          proj_clip=0.0))).eval()
    unclipped.load_state_dict(fixture_bilm.state_dict())
    cpu = Embedder(unclipped).embed(fixture_sentences, "all")
    gpu = Embedder(unclipped, device="cuda").embed(fixture_sentences, "all")
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


def test_cuda_training_step_gives_the_cpu_loss_and_gradients():
    """The paired training kernel and the sampled softmax's backward on CUDA (batched products, no oneDNN)."""
    from elmo.bilm import BiLMState
    from elmo.training.batches import ModelInputs
    from elmo.training.language_model import LanguageModel, StepNoise, initialize_like_bilm_tf
    from elmo.training.presets import resolve_config

    torch.manual_seed(0)
    model = LanguageModel(resolve_config("tiny"), 500)
    initialize_like_bilm_tf(model)
    generator = torch.Generator().manual_seed(1)
    n_rows, n_steps, n_distinct = 8, 20, 60
    char_ids = torch.randint(1, 262, (n_distinct, 50), generator=generator)
    inputs = ModelInputs(char_ids, *(torch.randint(0, n_distinct, (n_rows, n_steps), generator=generator)
                                     for _ in range(2)),
                         *(torch.randint(0, 500, (n_rows, n_steps), generator=generator) for _ in range(2)))
    noise = StepNoise.draw(0, 0, 0.1, 100, 500, range(n_rows), n_rows)
    results = []
    for device in ("cpu", "cuda"):
        model.to(device).zero_grad()
        moved = ModelInputs(*(tensor.to(device) for tensor in vars(inputs).values()))
        state = model.bilm.zero_state(n_rows)
        output = model(moved, BiLMState(state.h.to(device), state.c.to(device)), noise)
        (output.loss * n_steps).backward()
        # copies: the CPU's gradients would move with the model to CUDA
        results.append((output.loss.item(), [p.grad.to("cpu", copy=True) for p in model.parameters()]))
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-5)
    for cpu_grad, cuda_grad in zip(results[0][1], results[1][1], strict=True):
        torch.testing.assert_close(cuda_grad, cpu_grad, atol=1e-4, rtol=1e-3)
