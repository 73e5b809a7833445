"""Sentence classifier: token features (the ELMo mix, optionally with static word vectors) -> dropout ->
BiLSTM (or Transformer) -> attention pooling (a learned score per token, softmax over the real tokens) -> MLP
-> label scores.
Attention lets a few decisive words ("dull", "不错") carry a long sentence, which mean pooling would dilute."""

import torch
from torch import nn

from elmo.tasks.encoders import BILSTM, EncoderChoice
from elmo.tasks.inputs import Batch, TokenFeatures
from elmo.tasks.options import DROPOUT, HIDDEN


class SentenceClassifier(nn.Module):
    """``logits(batch) -> (B, n_labels)``; ``loss``: cross-entropy plus the mix regularization;
    ``decode``: the best label id of each sentence."""

    def __init__(self, features: TokenFeatures, n_labels: int, hidden: int = HIDDEN, dropout: float = DROPOUT,
                 encoder: EncoderChoice = BILSTM) -> None:
        super().__init__()
        self.features = features
        self.encoder = encoder.build(features.dim, hidden)
        self.attention = nn.Linear(self.encoder.dim, 1)
        self.dropout = nn.Dropout(dropout)
        self.mlp = nn.Sequential(nn.Linear(self.encoder.dim, hidden), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(hidden, n_labels))

    def pooled(self, batch: Batch) -> torch.Tensor:
        """``(B, 2 * hidden)``: the attention-weighted sum of the encoded tokens."""
        encoded = self.encoder(self.features(batch), batch.lengths)
        scores = self.attention(encoded).squeeze(-1).masked_fill(~batch.mask, float("-inf"))
        return torch.einsum("bt,btd->bd", torch.softmax(scores, dim=1), encoded)

    def logits(self, batch: Batch) -> torch.Tensor:
        return self.mlp(self.dropout(self.pooled(batch)))

    def loss(self, batch: Batch) -> torch.Tensor:
        return nn.functional.cross_entropy(self.logits(batch), batch.targets) + self.features.regularization()

    def decode(self, batch: Batch) -> list[int]:
        return self.logits(batch).argmax(dim=-1).tolist()
