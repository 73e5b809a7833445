"""Trained language models on disk: export to the published layout, and load back for evaluation or
further training.

An exported model directory holds ``options.json`` and ``weights.hdf5`` exactly as bilm-tf publishes
them (so every ELMo reader, ours included, loads it), plus ``vocab.txt`` and ``softmax.safetensors``
(``weight`` ``(vocab_size, projection_dim)``, ``bias`` ``(vocab_size,)``), which bilm-tf leaves out of its
dumps but which domain adaptation and perplexity need, and ``tokenizer.json`` (the run's tokenizer). A
shipped model's name (``en``) finds its directory; it can be evaluated or trained on once it holds a softmax.
"""

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save

from elmo.files import write_bytes_atomic, write_text_atomic
from elmo.model_dir import DEFAULT_TOKENIZER, ModelDir, shipped_models_root
from elmo.training.checkpoints import STATE_FILE, CheckpointError, load_checkpoint, resolve_checkpoint
from elmo.training.language_model import LanguageModel
from elmo.training.vocab import Vocabulary
from elmo.weights import save_bilm

SOFTMAX_FILE = "softmax.safetensors"


def export_model(model: LanguageModel, vocab: Vocabulary, out_dir: str | Path, tokenizer: str | None = None) -> Path:
    """Write the model directory; ``tokenizer`` (how the training text was split) goes to ``tokenizer.json``,
    which the embedder and ``elmo perplexity`` then use by default."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_bilm(model.bilm, out_dir / "options.json", out_dir / "weights.hdf5")
    vocab.save(out_dir / "vocab.txt")
    if tokenizer is not None:
        write_text_atomic(out_dir / "tokenizer.json", json.dumps({"name": tokenizer}) + "\n")
    softmax = {"weight": model.softmax_weight.detach().float().contiguous(),
               "bias": model.softmax_bias.detach().float().contiguous()}
    write_bytes_atomic(out_dir / SOFTMAX_FILE, save(softmax))
    return out_dir


def _shipped_directory(path: Path) -> Path | None:
    """The shipped model's directory when ``path`` is a bare name such as ``en`` and no such path exists."""
    if path.exists() or len(path.parts) != 1:
        return None
    shipped = shipped_models_root() / path.name
    return shipped if (shipped / "options.json").is_file() else None


def model_tokenizer(path: str | Path) -> str:
    """The tokenizer a model was trained with: a model directory's ``tokenizer.json``, or a run's options."""
    path = Path(path)
    path = _shipped_directory(path) or path
    if (path / "options.json").is_file():
        return ModelDir.find(path).tokenizer
    directory = resolve_checkpoint(path)
    try:
        return json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))["options"]["tokenizer"]
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_TOKENIZER  # load_language_model names what is wrong with the checkpoint


def load_language_model(path: str | Path) -> tuple[LanguageModel, Vocabulary]:
    """An exported model directory, a shipped model's name, a checkpoint directory, or a run directory (its
    newest checkpoint)."""
    path = Path(path)
    shipped = _shipped_directory(path)
    if shipped is not None:
        name, path = path.name, shipped
    if (path / "options.json").is_file():
        model_dir = ModelDir.find(path)
        for needed in ("vocab.txt", SOFTMAX_FILE):
            if (path / needed).is_file():
                continue
            if shipped is not None:
                raise CheckpointError(
                    f"the shipped model {name!r} holds no softmax ({SOFTMAX_FILE}), which perplexity and further "
                    f"training need (published ELMo weights leave it out); it embeds text (`elmo embed --model "
                    f"{name}`). For perplexity, give a run directory or a model written by `elmo export`")
            raise CheckpointError(f"{path} lacks {needed}; was it exported by `elmo export`? (a published "
                                  "bilm-tf model has no softmax, so it can be embedded with but not trained on)")
        vocab = Vocabulary.load(path / "vocab.txt")
        bilm = model_dir.load_bilm()
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
