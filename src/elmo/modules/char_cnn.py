"""The context-free token encoder: character CNN -> highway layers -> linear projection.

It sees one token at a time, so it gives a vector to any word in any language, and the same vector
for the same token wherever it stands.
"""

from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from elmo.config import CHARACTER_IDS, CharCNNConfig
from elmo.modules.prepacked import PrepackedWeight, linear, prepacked_product

# Tokens per product when the filters run as one product (see TokenEncoder._pooled_by_one_product).
_TOKEN_BLOCK = 32
# Tokens per pass without autograd: the convolutions' outputs take about 400 KB a token (2,048 filters).
_TOKENS_PER_PASS = 256
# With autograd (training) every distinct token of a batch goes at once, in this many groups of tokens of similar
# length, each cut to its own longest token (``_pooled_in_length_groups``).
_LENGTH_GROUPS = 8


def _characters_used(char_ids: torch.Tensor) -> torch.Tensor:
    """Each token's positions up to its last id that differs from its final one: its characters and its start and
    end marks, before the padding that runs to its end (a padded token's row, all 0, uses none). Past that point
    every window of a filter holds one id only and gives one value; before it, ids made by hand may hold padding
    or 0s inside a token, and each window there counts."""
    differs = char_ids != char_ids[:, -1:]
    positions = torch.arange(1, char_ids.shape[1] + 1, device=char_ids.device)
    return (differs * positions).amax(dim=1) if char_ids.shape[1] else differs.sum(dim=1)


def _without_padding_windows(char_ids: torch.Tensor, widest: int) -> torch.Tensor:
    """``char_ids`` cut to the positions the max-pooled convolutions need: the longest token, then ``widest``
    positions of padding.

    Past a token's last character every window holds padding only, and every such window of a filter gives the
    same value; a filter's max needs one of them, not the 40-odd a short word has in 50 positions. Cutting where
    every token keeps at least one such window (or all it had) leaves every max unchanged, and its gradient too.
    Most words are short, so this halves the convolutions' work or better.
    """
    n_used = _characters_used(char_ids)
    n_positions = min(char_ids.shape[1], int(n_used.max()) + widest) if len(char_ids) else char_ids.shape[1]
    return char_ids[:, :n_positions]


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
        self.char_embeddings = nn.Parameter(torch.empty(CHARACTER_IDS, config.embedding_dim))
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.embedding_dim, n_filters, kernel_size=width) for width, n_filters in config.filters
        )
        self.highways = nn.ModuleList(Highway(config.n_filters) for _ in range(config.n_highway))
        self.projection = nn.Linear(config.n_filters, output_dim) if config.n_filters != output_dim else None
        self.output_dim = output_dim
        self._prepacked_filters = PrepackedWeight()
        self._prepacked_projection = PrepackedWeight()
        nn.init.uniform_(self.char_embeddings, -1.0, 1.0)

    def conv_layers(self) -> list[nn.Conv1d]:
        """``convolutions``, typed as the Conv1d layers they are (a ModuleList's items are typed as plain Modules)."""
        return cast("list[nn.Conv1d]", list(self.convolutions))

    def highway_layers(self) -> list[Highway]:
        """``highways``, typed as the Highway layers they are."""
        return cast("list[Highway]", list(self.highways))

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        wants_grad = torch.is_grad_enabled() and self.char_embeddings.requires_grad
        if not (wants_grad or torch.compiler.is_compiling()) and len(char_ids) > _TOKENS_PER_PASS:
            # Nothing needs all tokens at once without a backward pass: bound the memory, however many come.
            # (Not while exporting, where the number of tokens is symbolic.)
            return torch.cat([self(block) for block in char_ids.split(_TOKENS_PER_PASS)])
        widest = max(conv.kernel_size[0] for conv in self.conv_layers())
        if torch.compiler.is_compiling():  # the kept width depends on the data: all 50 positions
            pooled = self._pooled(char_ids, widest)
        elif len(char_ids) > _TOKENS_PER_PASS:
            pooled = self._pooled_in_length_groups(char_ids, widest)
        else:
            pooled = self._pooled(_without_padding_windows(char_ids, widest), widest)
        token_vectors = self.activation(pooled)
        for highway in self.highways:
            token_vectors = highway(token_vectors)
        if self.projection is not None:
            token_vectors = linear(token_vectors, self.projection.weight, self.projection.bias,
                                   self._prepacked_projection)
        return token_vectors

    def _pooled(self, char_ids: torch.Tensor, widest: int) -> torch.Tensor:
        """``(n_tokens, n_filters)``: the max-pooled convolutions over ``char_ids``' positions."""
        table = F.pad(self.char_embeddings, (0, 0, 1, 0))  # row 0: the zero "no character" embedding
        characters = F.embedding(char_ids, table)  # (n_tokens, positions, dim)
        packed = self._prepacked_filters.get_derived(characters, list(self.convolutions.parameters()),
                                                     lambda: self._filters_as_one_weight(widest))
        if packed is not None and len(characters):
            return self._pooled_by_one_product(characters, packed, widest)
        if characters.is_cuda:
            return self._pooled_by_products(characters)
        return self._pooled_by_conv1d(characters)

    def _pooled_in_length_groups(self, char_ids: torch.Tensor, widest: int) -> torch.Tensor:
        """``_pooled`` of many tokens (a training batch's distinct tokens) in ``_LENGTH_GROUPS`` groups of similar
        length, each cut to its own longest token (``_without_padding_windows``): one long token (a URL, a Chinese
        word's 3-byte characters) no longer sets the width every short one is computed at. The same maxima, and
        gradients, as one cut; put back in the tokens' order."""
        order = torch.argsort(_characters_used(char_ids), stable=True)
        groups = order.split(-(-len(order) // _LENGTH_GROUPS))
        pooled = torch.cat([self._pooled(_without_padding_windows(char_ids[group], widest), widest)
                            for group in groups])
        return pooled[torch.argsort(order)]

    def _filters_as_one_weight(self, widest: int) -> torch.Tensor:
        """``(n_filters, widest * dim)``: every filter over a window of ``widest`` characters, zero past its width."""
        rows = []
        for conv in self.conv_layers():
            n_filters, dim, width = conv.weight.shape
            row = conv.weight.new_zeros((n_filters, widest, dim))
            row[:, :width] = conv.weight.detach().transpose(1, 2)
            rows.append(row.reshape(n_filters, widest * dim))
        return torch.cat(rows)

    def _pooled_by_conv1d(self, characters: torch.Tensor) -> torch.Tensor:
        """The max-pooled convolutions as PyTorch's Conv1d runs them (it wants (n_tokens, dim, positions))."""
        return torch.cat([conv(characters.transpose(1, 2)).amax(dim=2) for conv in self.conv_layers()], dim=1)

    def _pooled_by_products(self, characters: torch.Tensor) -> torch.Tensor:
        """The max-pooled convolutions, each filter width as a matrix product over its windows, with gradients.

        The CUDA path: cuDNN runs float32 convolutions in TF32 by PyTorch's default (``cudnn.allow_tf32``), which
        moved the shipped ``en`` model's vectors by up to 2.7e-3 from the CPU's (docs/performance.md, "GPU");
        matrix products follow ``torch.backends.cuda.matmul``, full float32 unless the caller lowers it.
        """
        pooled = []
        for conv in self.conv_layers():
            width = conv.kernel_size[0]
            windows = characters.unfold(1, width, 1)  # (n_tokens, positions - width + 1, dim, width)
            products = F.linear(windows.flatten(2), conv.weight.flatten(1), conv.bias)
            pooled.append(products.amax(dim=1))
        return torch.cat(pooled, dim=1)

    def _pooled_by_one_product(self, characters: torch.Tensor, packed: torch.Tensor, widest: int) -> torch.Tensor:
        """The max-pooled convolutions, all filters as one matrix product over windows of ``widest`` characters.

        oneDNN's direct convolution with 16 input channels runs far below the matrix product's peak; one product
        over 7-character windows (112 inputs) runs faster overall, though it multiplies more (most filters are
        the widest ones; docs/performance.md). A narrower filter's window past the last character would read padding, so
        those positions are left out of the max. Inference only: training keeps Conv1d and its gradients.
        """
        n_positions, dim = characters.shape[1:]
        convolutions = self.conv_layers()
        bias = torch.cat([conv.bias for conv in convolutions if conv.bias is not None])  # each has one
        last_start = torch.cat([torch.full((conv.out_channels,), n_positions - conv.kernel_size[0])
                                for conv in convolutions]).to(characters.device)
        past_the_end = torch.arange(n_positions, device=characters.device)[:, None] > last_start[None, :]
        windows = F.pad(characters, (0, 0, 0, widest - 1)).unfold(1, widest, 1)  # (n_tokens, positions, dim, widest)
        pooled = []
        for start in range(0, len(characters), _TOKEN_BLOCK):
            block = windows[start : start + _TOKEN_BLOCK].transpose(2, 3).reshape(-1, widest * dim)
            products = prepacked_product(block, packed, bias).view(-1, n_positions, len(bias))
            pooled.append(products.masked_fill_(past_the_end, float("-inf")).amax(dim=1))
        return torch.cat(pooled)
