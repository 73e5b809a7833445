"""The context-free token encoder: character CNN -> highway layers -> linear projection.

It sees one token at a time, so it gives a vector to any word in any language, and the same vector
for the same token wherever it stands.
"""

import torch
import torch.nn.functional as F
from torch import nn

from elmo.config import CharCNNConfig
from elmo.modules.prepacked import PrepackedWeight, linear


class Highway(nn.Module):
    """One highway layer as bilm-tf computes it: ``y = g * relu(W_t x + b_t) + (1 - g) * x``,
    ``g = sigmoid(W_c x + b_c)``; ``g`` is the share of the transformed input (bilm-tf's "carry" gate).
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.transform = nn.Linear(dim, dim)
        self.carry = nn.Linear(dim, dim)
        self._prepacked_transform = PrepackedWeight()
        self._prepacked_carry = PrepackedWeight()

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(linear(inputs, self.carry.weight, self.carry.bias, self._prepacked_carry))
        transformed = linear(inputs, self.transform.weight, self.transform.bias, self._prepacked_transform)
        return gate * F.relu(transformed) + (1.0 - gate) * inputs


class TokenEncoder(nn.Module):
    """Character ids ``(n_tokens, max_characters)`` -> token vectors ``(n_tokens, output_dim)``.

    ``char_embeddings`` holds the 261 published rows; id 0 (no character) embeds to zeros.
    Each convolution is max-pooled over positions and THEN activated, as bilm-tf does.
    """

    def __init__(self, config: CharCNNConfig, output_dim: int) -> None:
        super().__init__()
        self.activation = torch.tanh if config.activation == "tanh" else F.relu
        self.char_embeddings = nn.Parameter(torch.empty(261, config.embedding_dim))
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.embedding_dim, n_filters, kernel_size=width) for width, n_filters in config.filters
        )
        self.highways = nn.ModuleList(Highway(config.n_filters) for _ in range(config.n_highway))
        self.projection = nn.Linear(config.n_filters, output_dim) if config.n_filters != output_dim else None
        self.output_dim = output_dim
        self._prepacked_projection = PrepackedWeight()
        nn.init.uniform_(self.char_embeddings, -1.0, 1.0)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        table = F.pad(self.char_embeddings, (0, 0, 1, 0))  # row 0: the zero "no character" embedding
        # (n_tokens, max_characters, dim) -> (n_tokens, dim, max_characters) for Conv1d.
        characters = F.embedding(char_ids, table).transpose(1, 2)
        pooled = [conv(characters).amax(dim=2) for conv in self.convolutions]
        token_vectors = self.activation(torch.cat(pooled, dim=1))
        for highway in self.highways:
            token_vectors = highway(token_vectors)
        if self.projection is not None:
            token_vectors = linear(token_vectors, self.projection.weight, self.projection.bias,
                                   self._prepacked_projection)
        return token_vectors
