"""Extractive QA after BiDAF (Seo et al. 2017), the ELMo paper's SQuAD baseline, sized for CPUs.

Question and passage tokens go through the same features (the task-learned ELMo mix, static vectors) and
the same contextual BiLSTM, giving ``H`` (passage) and ``U`` (question). Attention flow: a similarity
``S[t, j] = w . [h_t; u_j; h_t * u_j]``; passage-to-question attention ``U~[t] = sum_j softmax_j(S[t]) u_j``
and question-to-passage attention ``h~ = sum_t softmax_t(max_j S[t, j]) h_t``, joined as
``G = [H; U~; H * U~; H * h~]``. A modeling BiLSTM reads ``G`` into ``M``; the start pointer scores
``[G; M]``, the end pointer ``[G; M2]`` with ``M2`` a second BiLSTM over ``M``.

``attention=False`` is the passage-only diagnostic (Kaushik and Lipton 2018): ``G = H``, the question is
never read, which measures how much of a data set is answerable without it.

``encoder`` picks the kind of all three contextual layers (contextual, modeling, end modeling): BiLSTMs as in
BiDAF, or Transformers (``elmo.tasks.encoders``).
"""

from dataclasses import dataclass

import torch
from torch import nn

from elmo.tasks.encoders import BILSTM, EncoderChoice
from elmo.tasks.inputs import Batch, TokenFeatures
from elmo.tasks.options import DROPOUT, HIDDEN, MAX_ANSWER_TOKENS
from elmo.tasks.qa_spans import best_spans


@dataclass
class QABatch:
    """``question`` and ``passage`` batches of token inputs; ``starts``/``ends`` ``(B,)`` the gold span."""

    question: Batch
    passage: Batch
    starts: torch.Tensor
    ends: torch.Tensor


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)


class AttentionFlow(nn.Module):
    """``(H (B, Tp, d), U (B, Tq, d), masks) -> G (B, Tp, 4d)``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.passage_weight = nn.Linear(dim, 1)
        self.question_weight = nn.Linear(dim, 1, bias=False)
        self.product_weight = nn.Parameter(torch.empty(dim).uniform_(-dim ** -0.5, dim ** -0.5))

    def forward(self, passage: torch.Tensor, question: torch.Tensor, passage_mask: torch.Tensor,
                question_mask: torch.Tensor) -> torch.Tensor:
        similarity = (self.passage_weight(passage) + self.question_weight(question).transpose(1, 2)
                      + torch.einsum("btd,bjd->btj", passage * self.product_weight, question))
        to_question = _masked_softmax(similarity, question_mask[:, None, :], dim=2) @ question
        best = similarity.masked_fill(~question_mask[:, None, :], float("-inf")).max(dim=2).values
        to_passage = torch.einsum("bt,btd->bd", _masked_softmax(best, passage_mask, dim=1), passage)
        return torch.cat([passage, to_question, passage * to_question, passage * to_passage[:, None, :]], dim=-1)


class SpanQA(nn.Module):
    """``log_probs(batch) -> (start, end)`` each ``(B, Tp)``, -inf at padding; ``loss``: the negative
    log-likelihood of the gold start plus that of the gold end, plus the mix regularization; ``decode``: the
    best span of each passage (inclusive token indices), at most ``max_answer_tokens`` long."""

    def __init__(self, features: TokenFeatures, hidden: int = HIDDEN, dropout: float = DROPOUT,
                 max_answer_tokens: int = MAX_ANSWER_TOKENS, attention: bool = True,
                 encoder: EncoderChoice = BILSTM) -> None:
        super().__init__()
        self.features = features
        self.encoder = encoder.build(features.dim, hidden)
        self.attention = AttentionFlow(self.encoder.dim) if attention else None
        flow_dim = self.encoder.dim * (4 if attention else 1)
        self.modeling = encoder.build(flow_dim, hidden)
        self.end_modeling = encoder.build(self.modeling.dim, hidden)
        self.dropout = nn.Dropout(dropout)
        self.start_pointer = nn.Linear(flow_dim + self.modeling.dim, 1)
        self.end_pointer = nn.Linear(flow_dim + self.end_modeling.dim, 1)
        self.max_answer_tokens = max_answer_tokens

    def log_probs(self, batch: QABatch) -> tuple[torch.Tensor, torch.Tensor]:
        passage = batch.passage
        encoded = self.encoder(self.features(passage), passage.lengths)
        if self.attention is not None:
            question = self.encoder(self.features(batch.question), batch.question.lengths)
            flow = self.attention(encoded, question, passage.mask, batch.question.mask)
        else:
            flow = encoded
        modeled = self.modeling(self.dropout(flow), passage.lengths)
        end_modeled = self.end_modeling(self.dropout(modeled), passage.lengths)
        start = self.start_pointer(self.dropout(torch.cat([flow, modeled], dim=-1))).squeeze(-1)
        end = self.end_pointer(self.dropout(torch.cat([flow, end_modeled], dim=-1))).squeeze(-1)
        mask = passage.mask
        return (torch.log_softmax(start.masked_fill(~mask, float("-inf")), dim=1),
                torch.log_softmax(end.masked_fill(~mask, float("-inf")), dim=1))

    def loss(self, batch: QABatch) -> torch.Tensor:
        start, end = self.log_probs(batch)
        nll = nn.functional.nll_loss(start, batch.starts) + nn.functional.nll_loss(end, batch.ends)
        return nll + self.features.regularization()

    def decode(self, batch: QABatch) -> list[tuple[int, int]]:
        start, end = self.log_probs(batch)
        return best_spans(start, end, batch.passage.mask, self.max_answer_tokens)
