"""Trained language models on disk: export to the published layout, and load back for evaluation or
further training.

An exported model directory holds ``options.json`` and ``weights.hdf5`` exactly as bilm-tf publishes
them (so every ELMo reader, ours included, loads it), plus ``vocab.txt`` and ``softmax.safetensors``
(``weight`` ``(vocab_size, projection_dim)``, ``bias`` ``(vocab_size,)``), which bilm-tf leaves out of its
dumps but which domain adaptation and perplexity need, and ``tokenizer.json`` (the run's tokenizer). The
softmax is float32 as exported, or, in a shipped model that would otherwise pass its size bound, float16 or
int8 (each row's weights rounded to 255 steps of its largest magnitude, ``weight_scale`` ``(vocab_size,)``
holding that step; the bias float32); it is float32 once loaded. A shipped model's name (``en``) finds its
directory; it can be evaluated or trained on once it holds a softmax.
"""

import hashlib
import json
import math
import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save

from elmo.files import (
    check_not_a_link,
    check_output_directory,
    entries_besides,
    new_partial_directory,
    publish_directory,
    write_bytes_atomic,
    write_text_atomic,
)
from elmo.model_dir import (
    DEFAULT_TOKENIZER,
    MODEL_FILES,
    OPTIONS_FILE,
    SOFTMAX_FILE,
    TOKENIZER_FILE,
    VOCAB_FILE,
    WEIGHTS_FILE,
    ModelDir,
    is_model_directory,
    locate_model,
    tokenizer_file_text,
)
from elmo.tokenizers import TOKENIZERS
from elmo.training.checkpoints import (
    STATE_FILE,
    CheckpointError,
    list_checkpoints,
    load_checkpoint,
    resolve_checkpoint,
)
from elmo.training.language_model import LanguageModel, initialize_like_bilm_tf
from elmo.training.vocab import Vocabulary
from elmo.weights import save_bilm

SOFTMAX_DTYPES = (torch.float32, torch.float16, torch.int8)  # the weight's; an int8 weight has a float32 scale
INT8_STEPS = 127  # an int8 row holds -127..127 steps of its scale (-128 unused: the range stays symmetric)
# softmax.safetensors metadata: the sha256 of the vocabulary its rows follow, so that a vocab.txt of the same size
# in another order (or another run's) is refused rather than scored against the wrong rows. Files without it
# (exports before 2026-12-06) load as before.
VOCAB_DIGEST_KEY = "vocab_sha256"


def vocab_digest(vocab: Vocabulary) -> str:
    """The sha256 of ``vocab``'s tokens in id order (one a line), whatever line ends or BOM its file had."""
    return hashlib.sha256("".join(f"{token}\n" for token in vocab.tokens).encode("utf-8")).hexdigest()


def check_export_target(out_dir: str | Path) -> Path:
    """``out_dir`` if an export may replace it: new, empty, or a model directory (its files only), and not a
    symbolic link (``check_not_a_link``); ValueError otherwise, before any work (the export replaces the whole
    directory, made beside it first: its folder must take one, ``check_output_directory``)."""
    out_dir = Path(out_dir)
    check_not_a_link(out_dir)
    check_output_directory(out_dir.parent, f"--out {out_dir}: its folder")
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir} is a file; a model is a directory (give a new path)")
    others = entries_besides(out_dir, MODEL_FILES)
    if others:
        raise ValueError(f"{out_dir} holds files other than a model's ({', '.join(others[:5])}), which the export "
                         "would replace with the directory: give a new or empty directory, or a model to replace")
    return out_dir


def export_model(model: LanguageModel, vocab: Vocabulary, out_dir: str | Path, tokenizer: str | None = None) -> Path:
    """Write the model directory (the softmax in float32; ``write_softmax`` writes it smaller); ``tokenizer`` (how
    the training text was split) goes to ``tokenizer.json``, which the embedder and ``elmo perplexity`` then use by
    default. ValueError, before any file is written, when ``vocab`` is not the softmax's (one row per token) or
    ``tokenizer`` is not one of ``TOKENIZERS``: either would replace a model with one that does not load. The files
    are written beside ``out_dir`` and the directory replaced whole (``publish_directory``): a failed export leaves
    the old model, and a killed one the old model or the new one (where the system cannot swap two directories in
    one step, possibly neither, the old one beside it as ``.NAME.*.partial``), never one's weights with the other's
    softmax or vocabulary."""
    softmax_rows = model.softmax_weight.shape[0]
    if len(vocab) != softmax_rows:
        raise ValueError(f"the vocabulary has {len(vocab)} tokens but the model's softmax has {softmax_rows} rows, "
                         "one per token; export the vocabulary the model was trained with")
    if tokenizer is not None and tokenizer not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {tokenizer!r}; expected one of {sorted(TOKENIZERS)}")
    out_dir = check_export_target(out_dir)
    partial = new_partial_directory(out_dir)
    try:
        save_bilm(model.bilm, partial / OPTIONS_FILE, partial / WEIGHTS_FILE)
        vocab.save(partial / VOCAB_FILE)
        if tokenizer is not None:
            write_text_atomic(partial / TOKENIZER_FILE, tokenizer_file_text(tokenizer))
        write_softmax(model, vocab, partial)
        publish_directory(partial, out_dir)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return out_dir


def write_softmax(model: LanguageModel, vocab: Vocabulary, out_dir: str | Path,
                  dtype: torch.dtype = torch.float32) -> Path:
    """``softmax.safetensors`` with its weight in ``dtype``: float32; float16, half the size (``ValueError`` when a
    value does not fit its range, +-65504, which would load back as infinite); or int8, a quarter of the size, each
    row's weights rounded to the nearest of 255 steps spanning its largest magnitude (error at most half a step).
    The bias stays float32 (one number a word): its error would go into every logit of its word unweighted.
    The file records the digest of ``vocab``, the vocabulary its rows follow (``VOCAB_DIGEST_KEY``)."""
    if dtype not in SOFTMAX_DTYPES:
        raise ValueError(f"softmax dtype {dtype}; expected one of {', '.join(map(str, SOFTMAX_DTYPES))}")
    weight, bias = model.softmax_weight.detach().float(), model.softmax_bias.detach().float()
    rows = _int8_rows(weight) if dtype == torch.int8 else {"weight": weight.to(dtype).contiguous()}
    softmax = {**rows, "bias": bias.contiguous()}
    for name, tensor in softmax.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            source = bias if name == "bias" else weight  # weight_scale is the weight's
            raise ValueError(f"the softmax {name} has values that {dtype} cannot hold (largest magnitude "
                             f"{source.abs().max().item():.4g}); write it as float32")
    if len(vocab) != weight.shape[0]:
        raise ValueError(f"the vocabulary has {len(vocab)} tokens but the softmax has {weight.shape[0]} rows")
    path = Path(out_dir) / SOFTMAX_FILE
    write_bytes_atomic(path, save(softmax, metadata={VOCAB_DIGEST_KEY: vocab_digest(vocab)}))
    return path


def _int8_rows(weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """``weight`` as int8 steps and each row's step (``weight_scale``); a row of zeros gets step 1. ValueError
    for NaN or infinite weights, which int8 would store as ordinary numbers."""
    if not bool(torch.isfinite(weight).all()):
        raise ValueError("the softmax weight has NaN or infinite values, which int8 cannot hold")
    largest = weight.abs().amax(dim=1)
    scale = torch.where(largest > 0, largest / INT8_STEPS, torch.ones_like(largest))
    steps = torch.round(weight / scale.unsqueeze(1)).clamp(-INT8_STEPS, INT8_STEPS).to(torch.int8)
    return {"weight": steps.contiguous(), "weight_scale": scale.contiguous()}


def _model_or_run(path: Path) -> bool:
    """What training reads as a model: a model directory, a checkpoint, or a run holding checkpoints."""
    return is_model_directory(path) or (path / STATE_FILE).is_file() or bool(list_checkpoints(path))


def resolve_model(path: str | Path) -> Path:
    """``path`` itself, or the shipped model's directory when it is a bare name such as ``en`` and no model or run
    of that name is here (``locate_model``), so a run can record where its starting model came from."""
    return locate_model(path, _model_or_run)


def model_tokenizer(path: str | Path) -> str:
    """The tokenizer a model was trained with: a model directory's ``tokenizer.json``, or a run's options."""
    path = resolve_model(path)
    if is_model_directory(path):
        return ModelDir.find(path).tokenizer
    directory = resolve_checkpoint(path)
    try:
        return json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))["options"]["tokenizer"]
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_TOKENIZER  # load_language_model names what is wrong with the checkpoint


def load_language_model(path: str | Path) -> tuple[LanguageModel, Vocabulary]:
    """An exported model directory, a shipped model's name, a checkpoint directory, or a run directory (its
    newest checkpoint)."""
    given = Path(path)
    path = resolve_model(given)
    shipped = path != given  # a bare name, read as the shipped model
    if is_model_directory(path):
        model_dir = ModelDir.find(path)
        for needed in (VOCAB_FILE, SOFTMAX_FILE):
            if (path / needed).is_file():
                continue
            if shipped:
                raise CheckpointError(
                    f"the shipped model {given.name!r} holds no softmax ({SOFTMAX_FILE}), which perplexity and further "
                    f"training need (published ELMo weights leave it out); it embeds text (`elmo embed --model "
                    f"{given.name}`). For perplexity, give a run directory or a model written by `elmo export`")
            raise CheckpointError(f"{path} lacks {needed}; was it exported by `elmo export`? (a published "
                                  "bilm-tf model has no softmax, so it can be embedded with but not trained on)")
        vocab = Vocabulary.load(path / VOCAB_FILE)
        bilm = model_dir.load_bilm()
        softmax = _read_softmax(path / SOFTMAX_FILE, vocab, bilm.config.lstm.projection_dim)
        model = LanguageModel(bilm.config, len(vocab))
        model.bilm.load_state_dict(bilm.state_dict())
        with torch.no_grad():
            model.softmax_weight.copy_(softmax["weight"])
            model.softmax_bias.copy_(softmax["bias"])
        return model, vocab
    checkpoint = load_checkpoint(path)
    return checkpoint.language_model(), checkpoint.vocab


def lacks_softmax(path: str | Path) -> bool:
    """Whether ``path`` (a name or directory as ``load_language_model`` takes it) is a model directory without a
    softmax: published ELMo weights, or a model shipped without one."""
    directory = resolve_model(path)
    return is_model_directory(directory) and not (directory / SOFTMAX_FILE).is_file()


def language_model_with_new_softmax(path: str | Path, vocab: Vocabulary) -> LanguageModel:
    """A language model from a biLM that has no softmax: its weights, and a new softmax over ``vocab`` as a new
    run starts one (bilm-tf's initializer). So published ELMo weights can be trained further on a domain's text."""
    bilm = ModelDir.find(resolve_model(path)).load_bilm()
    model = LanguageModel(bilm.config, len(vocab))
    initialize_like_bilm_tf(model)
    model.bilm.load_state_dict(bilm.state_dict())
    return model


def _read_softmax(path: Path, vocab: Vocabulary, projection_dim: int) -> dict[str, torch.Tensor]:
    """``weight`` and ``bias`` as float32, whichever of ``SOFTMAX_DTYPES`` the file holds; ``CheckpointError``
    names what does not match vocab.txt and options.json (also a vocab.txt other than the one the rows were
    written for, where the file records its digest)."""
    try:
        with safe_open(str(path), "pt") as handle:  # the tensors and the metadata in one opening
            softmax = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118 (not iterable)
            metadata = handle.metadata() or {}
    except (OSError, SafetensorError) as error:
        raise CheckpointError(f"{path} is unreadable ({type(error).__name__}: {error})") from None
    vocab_size = len(vocab)
    expected = {"weight": (vocab_size, projection_dim), "bias": (vocab_size,)}
    if "weight" in softmax and softmax["weight"].dtype == torch.int8:
        expected["weight_scale"] = (vocab_size,)
    elif "weight" in softmax and "weight_scale" in softmax:
        raise CheckpointError(f"{path} has a weight_scale but its weight is {softmax['weight'].dtype}; only an int8 "
                              "weight has one")
    missing = [name for name in expected if name not in softmax]
    if missing:
        raise CheckpointError(f"{path} lacks {', '.join(map(repr, missing))}; expected tensors {sorted(expected)}")
    for name, shape in expected.items():
        tensor = softmax[name]
        if tuple(tensor.shape) != shape:
            raise CheckpointError(f"{path} has {name} {tuple(tensor.shape)}; expected {shape} from vocab.txt and "
                                  "options.json")
        allowed = SOFTMAX_DTYPES if name == "weight" else SOFTMAX_DTYPES[:2]
        if tensor.dtype not in allowed:
            raise CheckpointError(f"{path} has {name} of dtype {tensor.dtype}; expected one of "
                                  f"{', '.join(str(dtype).removeprefix('torch.') for dtype in allowed)}")
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"{path} has NaN or infinite values in {name}")
    recorded = metadata.get(VOCAB_DIGEST_KEY)
    if recorded is not None and recorded != vocab_digest(vocab):
        raise CheckpointError(f"{path} was written for another vocabulary than {path.parent / 'vocab.txt'} (the same "
                              f"{vocab_size:,} tokens in another order, or other tokens): its rows would score the "
                              "wrong words; restore the vocab.txt exported with it")
    weight = softmax["weight"].float()
    if "weight_scale" in expected:
        scale = softmax["weight_scale"].float()
        if not bool((scale > 0).all()):
            raise CheckpointError(f"{path} has a weight_scale that is not positive in {int((scale <= 0).sum())} rows; "
                                  "each row's step is its largest magnitude / 127 (1 for a row of zeros)")
        weight = weight * scale.unsqueeze(1)
    return {"weight": weight, "bias": softmax["bias"].float()}


def grow_vocabulary(model: LanguageModel, old_vocab: Vocabulary, new_vocab: Vocabulary) -> LanguageModel:
    """``model`` with its softmax moved to ``new_vocab`` (which must hold every token of ``old_vocab``, in
    any order): each old word keeps its row and bias under its new id, each new word starts as ``<UNK>``'s
    row, and ``<UNK>`` and the new words get ``<UNK>``'s bias lowered by ``log(n_new + 1)``, so together they
    share ``<UNK>``'s former probability (every other word keeps its own) instead of each taking all of it."""
    lost = [token for token in old_vocab.tokens if token not in new_vocab.ids]
    if lost:
        raise ValueError(f"the new vocabulary lacks {len(lost)} of the old one's tokens (first {lost[0]!r}); "
                         "their trained softmax rows would be lost")
    if new_vocab == old_vocab:
        return model
    old_ids = torch.tensor([old_vocab.ids.get(token, old_vocab.unk_id) for token in new_vocab.tokens])
    is_new = torch.tensor([token not in old_vocab.ids for token in new_vocab.tokens])
    grown = LanguageModel(model.config, len(new_vocab))
    grown.bilm.load_state_dict(model.bilm.state_dict())
    with torch.no_grad():
        grown.softmax_weight.copy_(model.softmax_weight[old_ids])
        grown.softmax_bias.copy_(model.softmax_bias[old_ids])
        shared_bias = model.softmax_bias[old_vocab.unk_id] - math.log(int(is_new.sum()) + 1)
        grown.softmax_bias[is_new] = shared_bias
        grown.softmax_bias[new_vocab.unk_id] = shared_bias
    return grown
