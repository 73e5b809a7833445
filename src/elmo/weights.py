"""``options.json`` + ``weights.hdf5`` <-> ``BiLM``: the one place that knows bilm-tf's weight layout.

bilm-tf (TensorFlow 1) wrote these files and AllenNLP reads them; we read and write the same layout.
TF multiplies ``x @ W`` with ``W`` stored ``(in, out)``; PyTorch's ``F.linear`` stores ``(out, in)``,
so every matrix is transposed on the way in and back on the way out (exact, so round trips are
bit-identical). The LSTM bias ``B`` is kept as stored, without TF's forget bias of 1.0: the LSTM
adds that at run time, as TF does, so no arithmetic touches a loaded number.
"""

import json
import math
import re
from pathlib import Path

import h5py
import numpy as np
import torch

from elmo.bilm import BiLM
from elmo.config import CHARACTER_IDS, N_CHARACTERS, BiLMConfig
from elmo.files import atomic_path, write_text_atomic


class WeightFormatError(ValueError):
    """A weight file that does not fit the model its options describe."""


def _lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def expected_datasets(config: BiLMConfig) -> dict[str, tuple[int, ...]]:
    """Every dataset name the weight file must hold for ``config``, with its shape."""
    cnn, lstm = config.char_cnn, config.lstm
    shapes: dict[str, tuple[int, ...]] = {"char_embed": (CHARACTER_IDS, cnn.embedding_dim)}
    for i, (width, n_filters) in enumerate(cnn.filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, cnn.embedding_dim, n_filters)
        shapes[f"CNN/b_cnn_{i}"] = (n_filters,)
    for k in range(cnn.n_highway):
        for kind in ("transform", "carry"):
            shapes[f"CNN_high_{k}/W_{kind}"] = (cnn.n_filters, cnn.n_filters)
            shapes[f"CNN_high_{k}/b_{kind}"] = (cnn.n_filters,)
    if config.has_token_projection:
        shapes["CNN_proj/W_proj"] = (cnn.n_filters, lstm.projection_dim)
        shapes["CNN_proj/b_proj"] = (lstm.projection_dim,)
    for direction in (0, 1):
        for layer in range(lstm.n_layers):
            prefix = _lstm_prefix(direction, layer)
            shapes[f"{prefix}/W_0"] = (lstm.projection_dim * 2, 4 * lstm.dim)
            shapes[f"{prefix}/B"] = (4 * lstm.dim,)
            if lstm.has_projection:
                shapes[f"{prefix}/W_P_0"] = (lstm.dim, lstm.projection_dim)
    return shapes


def _file_to_state_dict(datasets: dict[str, np.ndarray], config: BiLMConfig) -> dict[str, torch.Tensor]:
    """Published names and orientations -> ``BiLM.state_dict()`` names and orientations."""
    cnn, lstm = config.char_cnn, config.lstm
    state: dict[str, np.ndarray] = {"token_encoder.char_embeddings": datasets["char_embed"]}
    for i in range(len(cnn.filters)):
        # TF conv2d kernel (1, width, in, out) -> Conv1d weight (out, in, width).
        state[f"token_encoder.convolutions.{i}.weight"] = datasets[f"CNN/W_cnn_{i}"][0].transpose(2, 1, 0)
        state[f"token_encoder.convolutions.{i}.bias"] = datasets[f"CNN/b_cnn_{i}"]
    for k in range(cnn.n_highway):
        for kind in ("transform", "carry"):
            state[f"token_encoder.highways.{k}.{kind}.weight"] = datasets[f"CNN_high_{k}/W_{kind}"].T
            state[f"token_encoder.highways.{k}.{kind}.bias"] = datasets[f"CNN_high_{k}/b_{kind}"]
    if config.has_token_projection:
        state["token_encoder.projection.weight"] = datasets["CNN_proj/W_proj"].T
        state["token_encoder.projection.bias"] = datasets["CNN_proj/b_proj"]
    for direction, stack in enumerate(("forward_lstm", "backward_lstm")):
        for layer in range(lstm.n_layers):
            prefix, name = _lstm_prefix(direction, layer), f"{stack}.layers.{layer}"
            # W_0 stacks the input rows on top of the recurrent rows: [x, h] @ W_0.
            kernel = datasets[f"{prefix}/W_0"]
            state[f"{name}.input_weight"] = kernel[: lstm.projection_dim].T
            state[f"{name}.recurrent_weight"] = kernel[lstm.projection_dim :].T
            state[f"{name}.bias"] = datasets[f"{prefix}/B"]
            if lstm.has_projection:
                state[f"{name}.projection"] = datasets[f"{prefix}/W_P_0"].T
    return {name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in state.items()}


def _state_dict_to_file(state: dict[str, torch.Tensor], config: BiLMConfig) -> dict[str, np.ndarray]:
    """The inverse of ``_file_to_state_dict``."""
    cnn, lstm = config.char_cnn, config.lstm
    arrays = {name: tensor.detach().cpu().float().numpy() for name, tensor in state.items()}
    datasets: dict[str, np.ndarray] = {"char_embed": arrays["token_encoder.char_embeddings"]}
    for i in range(len(cnn.filters)):
        datasets[f"CNN/W_cnn_{i}"] = arrays[f"token_encoder.convolutions.{i}.weight"].transpose(2, 1, 0)[None]
        datasets[f"CNN/b_cnn_{i}"] = arrays[f"token_encoder.convolutions.{i}.bias"]
    for k in range(cnn.n_highway):
        for kind in ("transform", "carry"):
            datasets[f"CNN_high_{k}/W_{kind}"] = arrays[f"token_encoder.highways.{k}.{kind}.weight"].T
            datasets[f"CNN_high_{k}/b_{kind}"] = arrays[f"token_encoder.highways.{k}.{kind}.bias"]
    if config.has_token_projection:
        datasets["CNN_proj/W_proj"] = arrays["token_encoder.projection.weight"].T
        datasets["CNN_proj/b_proj"] = arrays["token_encoder.projection.bias"]
    for direction, stack in enumerate(("forward_lstm", "backward_lstm")):
        for layer in range(lstm.n_layers):
            prefix, name = _lstm_prefix(direction, layer), f"{stack}.layers.{layer}"
            datasets[f"{prefix}/W_0"] = np.concatenate(
                [arrays[f"{name}.input_weight"].T, arrays[f"{name}.recurrent_weight"].T]
            )
            datasets[f"{prefix}/B"] = arrays[f"{name}.bias"]
            if lstm.has_projection:
                datasets[f"{prefix}/W_P_0"] = arrays[f"{name}.projection"].T
    return {name: np.ascontiguousarray(array) for name, array in datasets.items()}


def read_datasets(weight_file: str | Path, config: BiLMConfig, options_name: str = "options.json"
                  ) -> dict[str, np.ndarray]:
    """Every dataset ``config`` needs, checked by name and shape.

    All of them are checked before any is read, so a file that does not fit costs no memory; each one
    read must hold finite numbers (a NaN weight would make every vector NaN). A dataset that ``config`` does
    not use is refused too: it means the options describe another model (one highway or layer fewer, a
    misspelled key left at its default), which would load and give wrong vectors.
    """
    weight_file = Path(weight_file)
    if not weight_file.is_file():
        raise WeightFormatError(f"{weight_file}: no such weight file")
    try:
        handle = h5py.File(weight_file, "r")
    except OSError as error:
        raise WeightFormatError(f"{weight_file}: not a readable HDF5 file ({error})") from None
    datasets = {}
    with handle:
        expected = expected_datasets(config)
        try:  # a damaged header fails inside h5py as a KeyError, RuntimeError or ValueError naming nothing
            for name, shape in expected.items():
                _check_dataset(handle, name, shape, weight_file, options_name)
            names = _dataset_names(handle)
        except (KeyError, RuntimeError, ValueError, OSError) as error:
            if isinstance(error, WeightFormatError):
                raise
            raise WeightFormatError(f"{weight_file}: its layout could not be read ({error}); the file is damaged"
                                    ) from None
        for name in names:
            if name not in expected:
                raise WeightFormatError(
                    f"{weight_file} holds {name}, which {options_name} does not use ({_unused_because(name, config)});"
                    f" is {options_name} from another model?"
                )
        for name in expected:
            try:
                array = handle[name][...].astype(np.float32, copy=False)
            except OSError as error:  # a damaged compressed chunk, a filter this h5py lacks
                raise WeightFormatError(f"{weight_file}: {name} could not be read ({error})") from None
            n_bad = array.size - int(np.count_nonzero(np.isfinite(array)))
            if n_bad:
                raise WeightFormatError(
                    f"{weight_file}: {name} holds {n_bad} NaN or infinite value{'s' * (n_bad > 1)}; "
                    "expected finite weights"
                )
            datasets[name] = array
    return datasets


def _check_dataset(handle: h5py.File, name: str, shape: tuple[int, ...], weight_file: Path,
                   options_name: str) -> None:
    if name not in handle or not isinstance(handle[name], h5py.Dataset):
        raise WeightFormatError(f"{weight_file} lacks {name}; is {options_name} from another model?")
    parts = name.split("/")
    for linked in ("/".join(parts[: k + 1]) for k in range(len(parts))):  # the dataset or a group above it
        if not isinstance(handle.get(linked, getlink=True), h5py.HardLink):
            raise WeightFormatError(f"{weight_file}: {linked} is a link to data elsewhere; expected the weights "
                                    "stored in this file")
    dataset = handle[name]
    if dataset.id.get_create_plist().get_external_count() or dataset.is_virtual:
        raise WeightFormatError(f"{weight_file}: {name} keeps its data in other files (HDF5 external or virtual "
                                "storage), which load as zeros or as any file's bytes; expected the weights stored "
                                "in this file")
    if dataset.shape != shape:
        raise WeightFormatError(f"{weight_file}: {name} has shape {dataset.shape}; {options_name} expects {shape}")
    if not np.issubdtype(dataset.dtype, np.floating):
        raise WeightFormatError(f"{weight_file}: {name} has dtype {dataset.dtype}; expected floats")
    if dataset.id.get_storage_size() == 0:  # declared, never written: reads as the fill value
        raise WeightFormatError(f"{weight_file}: {name} holds no stored data; expected {shape} written weights")
    if dataset.chunks is not None:  # a chunk never written reads as the fill value too
        n_needed = math.prod(-(-extent // chunk) for extent, chunk in zip(shape, dataset.chunks, strict=True))
        n_written = dataset.id.get_num_chunks()
        if n_written < n_needed:
            raise WeightFormatError(f"{weight_file}: {name} is only partly written ({n_written} of its {n_needed} "
                                    f"chunks stored); expected {shape} written weights")


def _dataset_names(handle: h5py.File) -> list[str]:
    """Every dataset's name and every soft or external link's (whatever it names: ``visititems`` skips links)."""
    names: list[str] = []

    def collect(name: str, item: object) -> None:
        if isinstance(item, h5py.Dataset):
            names.append(name)

    def collect_links(name: str, link: object) -> None:
        if isinstance(link, h5py.SoftLink | h5py.ExternalLink):
            names.append(name)

    handle.visititems(collect)
    handle.visititems_links(collect_links)
    return names


def _unused_because(name: str, config: BiLMConfig) -> str:
    """The option that would have to differ for ``config`` to use dataset ``name`` (one it does not use)."""
    cnn, lstm = config.char_cnn, config.lstm
    if match := re.fullmatch(r"CNN/[Wb]_cnn_(\d+)", name):
        return f"char_cnn.filters has {len(cnn.filters)} entries; it would need more than {match[1]}"
    if match := re.fullmatch(r"CNN_high_(\d+)/[Wb]_(transform|carry)", name):
        return f"char_cnn.n_highway is {cnn.n_highway}; it would need n_highway > {match[1]}"
    if re.fullmatch(r"CNN_proj/[Wb]_proj", name):
        return (f"char_cnn.filters total {cnn.n_filters} filters, equal to lstm.projection_dim; it would need them "
                "to differ")
    if match := re.fullmatch(r"RNN_[01]/RNN/MultiRNNCell/Cell(\d+)/LSTMCell/(W_0|B|W_P_0)", name):
        if int(match[1]) >= lstm.n_layers:
            return f"lstm.n_layers is {lstm.n_layers}; it would need n_layers > {match[1]}"
        return f"lstm.projection_dim equals lstm.dim ({lstm.dim}); it would need projection_dim < dim"
    return "it is not part of bilm-tf's weight layout"


def load_bilm(options_file: str | Path, weight_file: str | Path) -> BiLM:
    """A BiLM (float32, eval mode) from bilm-tf's options.json and weight file."""
    config = BiLMConfig.load(options_file)
    datasets = read_datasets(weight_file, config, options_name=Path(options_file).name)
    # Ordinary tensors even inside the caller's ``torch.inference_mode``: inference tensors keep no version
    # count, so nothing computed from them (oneDNN's reordered weights, cached token vectors) could be kept.
    with torch.inference_mode(False):
        bilm = BiLM(config)
        bilm.load_state_dict(_file_to_state_dict(datasets, config), strict=True)
    return bilm.eval()


def save_bilm(bilm: BiLM, options_file: str | Path, weight_file: str | Path) -> None:
    """Write ``bilm`` in the published layout (float32). Each file appears whole or not at all.

    ``n_characters`` is written as 262 whatever was read: bilm-tf trains with 261 and refuses to embed with a
    count other than 262 ("Set n_characters=262 after training"); both name one model (``char_embed`` keeps 261
    rows; ``TokenEncoder`` puts the zero padding row in front at each forward)."""
    datasets = _state_dict_to_file(bilm.state_dict(), bilm.config)
    with atomic_path(Path(weight_file)) as temporary, h5py.File(temporary, "w") as handle:
        for name, array in datasets.items():
            handle.create_dataset(name, data=array)
    options = bilm.config.to_options()
    options["char_cnn"]["n_characters"] = N_CHARACTERS
    write_text_atomic(Path(options_file), json.dumps(options, indent=2) + "\n")
