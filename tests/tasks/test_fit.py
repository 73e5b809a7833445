"""``fit`` stops ``patience`` epochs after the best dev score (never before ``min_epochs``) and ends with the
parameters of the best dev epoch, not the last one: driven by a scorer that returns a fixed sequence."""

from collections.abc import Sequence

import pytest
import torch
from torch import nn

from elmo.tasks.options import TrainOptions
from elmo.tasks.train import fit


class _Drifting(nn.Module):
    """A model whose parameters move at every step (Adam on a squared distance), so each epoch ends with
    different parameters and the epoch ``fit`` restores can be told from the others."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(3))

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        return ((self.weight - batch) ** 2).sum()


class _ScriptedScorer:
    """Returns the given dev scores in turn and keeps a copy of the parameters each was given for, by epoch."""

    def __init__(self, scores: Sequence[float]) -> None:
        self.scores = list(scores)
        self.parameters_by_epoch: dict[int, torch.Tensor] = {}

    def __call__(self, model: _Drifting, dev_items: Sequence[torch.Tensor]) -> float:
        epoch = len(self.parameters_by_epoch) + 1
        if epoch > len(self.scores):
            raise AssertionError(f"fit scored epoch {epoch}; it should have stopped by epoch {len(self.scores)}")
        self.parameters_by_epoch[epoch] = model.weight.detach().clone()
        return self.scores[epoch - 1]


def _fit(scores: Sequence[float], patience: int, min_epochs: int, max_epochs: int = 20):
    model = _Drifting()
    scorer = _ScriptedScorer(scores)
    train_items = [torch.tensor([1.0, -2.0, 3.0])] * 4
    result = fit(model, train_items, train_items[:1], scorer,
                 TrainOptions(max_epochs=max_epochs, patience=patience, min_epochs=min_epochs, batch_size=2),
                 batch_of=torch.stack)
    return model, scorer, result


def test_fit_stops_patience_epochs_after_the_best_and_restores_the_best_epochs_parameters():
    scores = [0.2, 0.9, 0.5, 0.4, 0.3]
    model, scorer, result = _fit(scores, patience=2, min_epochs=1)
    # epoch 2 is best; epochs 3 and 4 are no better, and 4 - 2 = patience: stop after epoch 4
    assert (result.best_epoch, result.best_dev, result.epochs_run) == (2, 0.9, 4)
    assert result.dev_history == [0.2, 0.9, 0.5, 0.4]
    assert not torch.equal(scorer.parameters_by_epoch[2], scorer.parameters_by_epoch[4])  # they moved on
    assert torch.equal(model.weight.detach(), scorer.parameters_by_epoch[2])


def test_fit_does_not_stop_before_min_epochs_and_a_later_best_epoch_wins():
    scores = [0.2, 0.9, 0.5, 0.4, 0.95, 0.3, 0.1]
    model, scorer, result = _fit(scores, patience=2, min_epochs=5)
    # patience runs out at epoch 4, but min_epochs keeps it going; epoch 5 is the new best, patience ends at 7
    assert (result.best_epoch, result.best_dev, result.epochs_run) == (5, 0.95, 7)
    assert result.dev_history == scores
    assert torch.equal(model.weight.detach(), scorer.parameters_by_epoch[5])


@pytest.mark.parametrize("min_epochs", [1, 4])
def test_fit_runs_max_epochs_when_the_dev_score_keeps_rising(min_epochs: int):
    model, scorer, result = _fit([0.1, 0.2, 0.3, 0.4], patience=1, min_epochs=min_epochs, max_epochs=4)
    assert (result.best_epoch, result.epochs_run, result.dev_history) == (4, 4, [0.1, 0.2, 0.3, 0.4])
    assert torch.equal(model.weight.detach(), scorer.parameters_by_epoch[4])
