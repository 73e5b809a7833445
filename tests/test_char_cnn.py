"""The character CNN's convolutions as products over windows (the CUDA path) against Conv1d, in float64."""

import pytest
import torch

from elmo.characters import batch_to_char_ids
from elmo.config import CharCNNConfig
from elmo.modules.char_cnn import TokenEncoder

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


@pytest.mark.parametrize("device", DEVICES)
def test_the_products_over_windows_give_conv1ds_pooled_values_and_gradients(device: str):
    torch.manual_seed(0)
    config = CharCNNConfig(embedding_dim=4, filters=((1, 3), (2, 5), (4, 6)), n_highway=1,
                           max_characters_per_token=12, activation="relu")
    encoder = TokenEncoder(config, 8).double().to(device)
    with torch.no_grad():
        for parameter in encoder.parameters():
            parameter.normal_(0.0, 0.5)
    tokens = ["a", "bank", "rivers", "übergrößen", "小米", "x" * 20]
    char_ids = batch_to_char_ids([tokens], 12)[0].to(device)
    results = []
    for run in (encoder._pooled_by_products, encoder._pooled_by_conv1d):
        encoder.zero_grad()
        table = torch.nn.functional.pad(encoder.char_embeddings, (0, 0, 1, 0))  # as TokenEncoder.forward makes it
        pooled = run(torch.nn.functional.embedding(char_ids, table))
        (pooled * torch.linspace(-1, 1, pooled.numel(), device=device, dtype=pooled.dtype).view_as(pooled)).sum() \
            .backward()
        results.append((pooled.detach(), [p.grad.clone() for p in encoder.parameters() if p.grad is not None]))
    (products, product_grads), (convolved, conv_grads) = results
    assert products.shape == (len(tokens), 14)
    torch.testing.assert_close(products, convolved, rtol=0, atol=1e-12)
    assert len(product_grads) == len(conv_grads) == 7  # the embeddings, and each filter's weight and bias
    for product_grad, conv_grad in zip(product_grads, conv_grads, strict=True):
        torch.testing.assert_close(product_grad, conv_grad, rtol=0, atol=1e-12)
