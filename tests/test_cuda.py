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
