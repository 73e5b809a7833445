"""Trained language models on disk: export to the published layout, and load back for evaluation or
further training.

An exported model directory holds ``options.json`` and ``weights.hdf5`` exactly as bilm-tf publishes
them (so every ELMo reader, ours included, loads it), plus ``vocab.txt`` and ``softmax.safetensors``
(``weight`` ``(vocab_size, projection_dim)``, ``bias`` ``(vocab_size,)``), which bilm-tf leaves out of its
dumps but which domain adaptation and perplexity need.
"""

from pathlib import Path

import torch
from safetensors.torch import load_file, save

from elmo.files import write_bytes_atomic
from elmo.training.checkpoints import CheckpointError, load_checkpoint
from elmo.training.language_model import LanguageModel
from elmo.training.vocab import Vocabulary
from elmo.weights import load_bilm, save_bilm

SOFTMAX_FILE = "softmax.safetensors"


def export_model(model: LanguageModel, vocab: Vocabulary, out_dir: str | Path) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_bilm(model.bilm, out_dir / "options.json", out_dir / "weights.hdf5")
    vocab.save(out_dir / "vocab.txt")
    softmax = {"weight": model.softmax_weight.detach().float().contiguous(),
               "bias": model.softmax_bias.detach().float().contiguous()}
    write_bytes_atomic(out_dir / SOFTMAX_FILE, save(softmax))
    return out_dir


def load_language_model(path: str | Path) -> tuple[LanguageModel, Vocabulary]:
    """An exported model directory, a checkpoint directory, or a run directory (its newest checkpoint)."""
    path = Path(path)
    if (path / "options.json").is_file() and (path / "weights.hdf5").is_file():
        for needed in ("vocab.txt", SOFTMAX_FILE):
            if not (path / needed).is_file():
                raise CheckpointError(f"{path} lacks {needed}; was it exported by `elmo export`? (a published "
                                      "bilm-tf model has no softmax, so it can be embedded with but not trained on)")
        vocab = Vocabulary.load(path / "vocab.txt")
        bilm = load_bilm(path / "options.json", path / "weights.hdf5")
        softmax = load_file(str(path / SOFTMAX_FILE))
        if softmax["weight"].shape != (len(vocab), bilm.config.lstm.projection_dim):
            raise CheckpointError(f"{path}/{SOFTMAX_FILE} has weight {tuple(softmax['weight'].shape)}; expected "
                                  f"({len(vocab)}, {bilm.config.lstm.projection_dim}) from vocab.txt and options.json")
        model = LanguageModel(bilm.config, len(vocab))
        model.bilm.load_state_dict(bilm.state_dict())
        with torch.no_grad():
            model.softmax_weight.copy_(softmax["weight"])
            model.softmax_bias.copy_(softmax["bias"])
        return model, vocab
    checkpoint = load_checkpoint(path)
    model = LanguageModel(checkpoint.config, len(checkpoint.vocab))
    model.load_state_dict(checkpoint.model_state)
    return model, checkpoint.vocab


def grow_vocabulary(model: LanguageModel, old_vocab: Vocabulary, new_vocab: Vocabulary) -> LanguageModel:
    """``model`` with its softmax grown to ``new_vocab`` (which must extend ``old_vocab``): old rows kept
    as they are; each new word starts as ``<UNK>``'s row with the bias lowered by ``log(n_new)``, so
    the new words share ``<UNK>``'s former probability instead of each taking all of it."""
    if new_vocab.tokens[: len(old_vocab)] != old_vocab.tokens:
        raise ValueError("the new vocabulary does not start with the old one; old softmax rows would change meaning")
    n_new = len(new_vocab) - len(old_vocab)
    if n_new == 0:
        return model
    grown = LanguageModel(model.config, len(new_vocab))
    grown.bilm.load_state_dict(model.bilm.state_dict())
    with torch.no_grad():
        unk = old_vocab.unk_id
        grown.softmax_weight[: len(old_vocab)] = model.softmax_weight
        grown.softmax_bias[: len(old_vocab)] = model.softmax_bias
        grown.softmax_weight[len(old_vocab) :] = model.softmax_weight[unk]
        grown.softmax_bias[len(old_vocab) :] = model.softmax_bias[unk] - torch.log(torch.tensor(float(n_new)))
    return grown
