"""Sequence tagger after the paper's NER model: token features (the ELMo mix, optionally with static word
vectors) -> dropout -> BiLSTM (or Transformer) -> per-tag scores -> a linear-chain CRF, which scores whole tag
sequences so that an ``I-x`` never follows ``O`` in a decoded answer unless the data make it likely."""

import torch
from torch import nn
from torchcrf import CRF

from elmo.tasks.encoders import BILSTM, EncoderChoice
from elmo.tasks.inputs import Batch, TokenFeatures
from elmo.tasks.options import DROPOUT, HIDDEN


class SequenceTagger(nn.Module):
    """``loss(batch)``: mean negative log-likelihood of the gold tags plus the mix regularization;
    ``decode(batch)``: the best tag ids of each sentence (lists of its real length)."""

    def __init__(self, features: TokenFeatures, n_tags: int, hidden: int = HIDDEN, dropout: float = DROPOUT,
                 encoder: EncoderChoice = BILSTM) -> None:
        super().__init__()
        self.features = features
        self.encoder = encoder.build(features.dim, hidden)
        self.dropout = nn.Dropout(dropout)
        self.scores = nn.Linear(self.encoder.dim, n_tags)
        self.crf = CRF(n_tags, batch_first=True)

    def emissions(self, batch: Batch) -> torch.Tensor:
        """``(B, T, n_tags)``."""
        encoded = self.encoder(self.features(batch), batch.lengths)
        return self.scores(self.dropout(encoded))

    def loss(self, batch: Batch) -> torch.Tensor:
        nll = -self.crf(self.emissions(batch), batch.targets, batch.mask, reduction="mean")
        return nll + self.features.regularization()

    def decode(self, batch: Batch) -> list[list[int]]:
        return self.crf.decode(self.emissions(batch), batch.mask)
