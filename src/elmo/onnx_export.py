"""The biLM as an ONNX graph, for serving with onnxruntime.

``export_onnx(model, "elmo.onnx")`` writes a graph from character ids ``char_ids`` int64
``(batch, max_tokens, max_characters)`` (padding tokens all zeros, as ``BiLM.forward`` takes them) to
``layers`` float32 ``(n_layers + 1, batch, max_tokens, 2 * projection_dim)`` and ``mask`` bool
``(batch, max_tokens)``; batch and max_tokens are free. It then runs the file in onnxruntime on a batch
of other shapes and compares it with ``BiLM.forward``. ``OnnxBiLM`` runs such a file and checks its input
first.

The graph computes what ``BiLM.forward`` computes with no state (every sentence from zeros), in a form
an exporter can capture. ``BiLM.forward`` packs sequences by length, which needs the lengths as Python
numbers; here every row runs over all ``max_tokens + 2`` steps (boundaries included) instead:

- the forward direction reads each padded row in order; steps past a row's ``</S>`` only follow it, so
  they change nothing that is kept;
- the backward direction reads each row reversed from its own ``</S>`` by a gather (step t reads
  position ``length + 1 - t``), runs the same padded loop, and the same gather puts the outputs back;
- the time loop is ``torch._higher_order_ops.scan``, which the dynamo exporter (``torch.onnx.export``
  with ``dynamo=True``, built on onnxscript) writes as an ONNX ``Scan``: one loop node per layer and
  direction whatever the length, not a copy per step. ``scan`` is a private PyTorch API: where a PyTorch
  lacks it, ``export_onnx`` says so and which PyTorch it was tested with, and the rest of the package works.

``_ExportableBiLM`` holds the BiLM's own modules, not copies of their weights, and reads the LSTM cell's
constants (forget bias, clips) from them and steps with the shared ``lstm_cell``; what is written again here, in
the form ``scan`` needs, is the step around the cell (the recurrent product, the projection and its clip) and the
layer stack's skip connections. Tokens go through the BiLM's own ``TokenEncoder``, each distinct one once (ONNX
``Unique``), as ``BiLM.encode_tokens`` does.
"""

import copy
import logging
import shutil
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

try:
    from torch._higher_order_ops.scan import scan

    _HAS_SCAN = True
except ImportError:  # export_onnx refuses to run, so nothing calls scan
    _HAS_SCAN = False

from elmo.bilm import BiLM
from elmo.characters import batch_to_char_ids
from elmo.config import CHARACTER_IDS
from elmo.extras import install_command
from elmo.files import check_output_file, new_partial_directory, publish_file
from elmo.model_dir import ModelDir
from elmo.modules.lstm import LstmStack, ProjectedLstm, lstm_cell

# The opset torch 2.13's exporter writes natively; a later one goes through onnx's version converter (21
# tested). An earlier one cannot be had: the converter fails on this graph (tried: 13, 17) and the exporter
# then keeps 18 with only a logged traceback, so export_onnx refuses it up front.
DEFAULT_OPSET = 18
INPUT_NAME = "char_ids"
OUTPUT_NAMES = ("layers", "mask")
# Traced at one shape, exported for all: the axes are declared dynamic, so the graph is not tied to it.
_EXAMPLE_SENTENCES = [["Export", "example", "sentence", "."], ["short"], ["a", "b"]]
# The check after export: another batch size and length, a 1-token and an empty sentence.
_CHECK_SENTENCES = [
    "a check sentence that is longer than the one traced at export".split(),
    ["one"],
    [],
    "the backward LSTM reads each row from its own end".split(),
    ["two", "tokens"],
]
# Largest absolute difference from BiLM.forward that the check accepts (float32; measured: about 1e-6).
CHECK_TOLERANCE = 1e-4
_MISSING_PACKAGES = f"ONNX export needs the packages onnx, onnxscript and onnxruntime: {install_command('onnx')}"
# The PyTorch whose private scan and exporter export_onnx is tested with (docs/performance.md, "PyTorch versions").
TESTED_TORCH = "2.13"


class OnnxExport(NamedTuple):
    """What ``export_onnx`` wrote, and how far onnxruntime's outputs were from ``BiLM.forward``'s."""

    path: Path
    max_difference: float | None  # from BiLM.forward on the check batch; None when not checked


def export_onnx(
    bilm_or_model_dir: BiLM | str | Path, path: str | Path, opset: int = DEFAULT_OPSET, check: bool = True
) -> OnnxExport:
    """Write the stateless biLM as an ONNX file at ``path``, a name ending in ``.onnx`` (checked, with the opset,
    before the model loads).

    ``bilm_or_model_dir`` is a BiLM, a model directory or a shipped model name (``en``, ``zh``). The
    graph's input is ``char_ids`` int64 ``(batch, max_tokens, max_characters)``; its outputs are
    ``layers`` float32 ``(n_layers + 1, batch, max_tokens, 2 * projection_dim)`` and ``mask`` bool
    ``(batch, max_tokens)``, as ``BiLM.forward(char_ids)`` returns them. ``batch`` and ``max_tokens``
    are dynamic. A BiLM that is not float32 on the CPU (float16, bfloat16, on a GPU) is exported from a float32
    CPU copy: the graph is float32 whatever the model, which stays as it was. Weights are stored inside the file,
    or past torch's threshold for large models (1.5 GiB) in ``NAME.data`` beside it, which the graph names.

    With ``check``, onnxruntime runs the file on a batch of another size and length than the one traced,
    and a difference from ``BiLM.forward`` above ``CHECK_TOLERANCE`` raises RuntimeError. The files appear
    beside ``path`` only once written (and checked): a failed export leaves whatever was there before. A
    ``.data`` file is renamed into place just before the graph, so a kill between those two renames can leave
    it beside the graph it replaced.
    """
    if opset < DEFAULT_OPSET:
        raise ValueError(f"opset {opset}: the exporter writes opset {DEFAULT_OPSET} or later only")
    if not _HAS_SCAN:
        raise RuntimeError(f"ONNX export needs torch._higher_order_ops.scan, which torch {torch.__version__} lacks; "
                           f"it is tested with torch {TESTED_TORCH}")
    try:
        import onnx  # (the exporter needs both; fail here with the fix, not deep inside)
        import onnxscript  # noqa: F401
    except ImportError as error:
        raise ImportError(f"{_MISSING_PACKAGES} ({error})") from None
    latest = onnx.defs.onnx_opset_version()
    if opset > latest:
        raise ValueError(f"opset {opset}: the installed onnx {onnx.__version__} knows opsets up to {latest}")
    path = Path(path)
    check_output_file(path, "the ONNX file")
    if path.suffix.lower() != ".onnx":  # also keeps it off the model's own files, none of which is named so
        raise ValueError(f"the ONNX file {path} does not end in .onnx; give a file name ending in .onnx (a name of "
                         "another kind of file, such as the model's weights, would be replaced by the graph)")
    bilm = bilm_or_model_dir if isinstance(bilm_or_model_dir, BiLM) else ModelDir.find(bilm_or_model_dir).load_bilm()
    bilm = _float32_on_cpu(bilm)
    example = batch_to_char_ids(_EXAMPLE_SENTENCES, bilm.config.char_cnn.max_characters_per_token)
    dynamic_shapes = ({0: torch.export.Dim("batch"), 1: torch.export.Dim("max_tokens")},)
    was_training = bilm.training
    module = _ExportableBiLM(bilm).eval()
    exporter_logger = logging.getLogger("torch.onnx")
    level = exporter_logger.level
    exporter_logger.setLevel(logging.ERROR)  # "torchvision is not installed" and the like
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # torch 2.13's exporter trips over its own pytree deprecation; nothing the caller can act on.
            warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
            program = torch.onnx.export(
                module,
                (example,),
                input_names=[INPUT_NAME],
                output_names=list(OUTPUT_NAMES),
                opset_version=opset,
                dynamo=True,
                dynamic_shapes=dynamic_shapes,
                verbose=False,
            )
    finally:
        exporter_logger.setLevel(level)
        bilm.train(was_training)
    if program is None:  # torch.onnx.export returns None only without dynamo=True
        raise RuntimeError("torch.onnx.export returned no ONNXProgram")
    written_opset = program.model.opset_imports.get("")
    if written_opset != opset:
        raise RuntimeError(f"asked for opset {opset}, the exporter produced opset {written_opset}")
    # Saved and checked under the final name in a partial directory beside ``path`` (the graph names its weights
    # file, if any, by that name), renamed beside it only once it passes: a failed check or a killed save leaves
    # the files that were there before (or none), never a graph that is wrong or cut short.
    partial = new_partial_directory(path)
    try:
        saved = partial / path.name
        program.save(saved)  # past torch's threshold, its weights go to saved.name + ".data"
        difference = max_difference(bilm, saved) if check else None
        if difference is not None and not difference <= CHECK_TOLERANCE:  # NaN fails too
            raise RuntimeError(f"{path}: onnxruntime's outputs differ from BiLM.forward's by up to {difference:.2g} "
                               f"(tolerance {CHECK_TOLERANCE:g}) on the check batch; nothing written")
        for weights in sorted(partial.iterdir()):
            if weights != saved:
                publish_file(weights, path.parent / weights.name)
        publish_file(saved, path)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return OnnxExport(path, difference)


def _float32_on_cpu(bilm: BiLM) -> BiLM:
    """``bilm``, or a float32 CPU copy of it. The graph promises float32 ``layers``, the example and check batches
    are on the CPU, and onnxruntime's CPU kernels lack float16 and bfloat16 for some of the graph's operators (a
    float16 graph crashed it)."""
    tensors = [*bilm.parameters(), *bilm.buffers()]
    if all(tensor.device.type == "cpu" and (tensor.dtype == torch.float32 or not tensor.is_floating_point())
           for tensor in tensors):
        return bilm
    return copy.deepcopy(bilm).cpu().float()


def max_difference(bilm: BiLM, path: str | Path, char_ids: torch.Tensor | None = None) -> float:
    """Largest absolute difference between the ONNX file run by onnxruntime and ``BiLM.forward``, over
    ``layers``, on ``char_ids`` (default: the check batch); a mask that differs anywhere gives ``inf``."""
    if char_ids is None:
        char_ids = batch_to_char_ids(_CHECK_SENTENCES, bilm.config.char_cnn.max_characters_per_token)
    layers, mask = OnnxBiLM(path)(char_ids)
    was_training = bilm.training
    bilm.eval()
    try:
        with torch.no_grad():
            expected = bilm(char_ids)[0]
    finally:
        bilm.train(was_training)
    if not np.array_equal(mask, expected.mask.numpy(force=True)):
        return float("inf")
    return float(np.abs(layers - expected.layers.numpy(force=True)).max(initial=0.0))


class OnnxBiLM:
    """An exported biLM run by onnxruntime: ``OnnxBiLM(path)(char_ids) -> (layers, mask)`` as NumPy arrays.

    ``char_ids`` (NumPy or torch, any integer type) is checked as ``BiLM.forward`` checks it, so a bad
    batch gets an error naming the fault instead of onnxruntime's. ``threads``: onnxruntime's intra-op
    threads (default: its own choice, one per physical core).
    """

    def __init__(self, path: str | Path, threads: int | None = None) -> None:
        try:
            import onnxruntime
        except ImportError as error:
            message = f"running an exported biLM needs onnxruntime: {install_command('onnx')}"
            raise ImportError(f"{message} ({error})") from None
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: no such ONNX file")
        options = onnxruntime.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        char_input = self.session.get_inputs()[0]
        if char_input.name != INPUT_NAME or len(char_input.shape) != 3 or not isinstance(char_input.shape[2], int):
            raise ValueError(f"{path}: input {char_input.name!r} {char_input.shape} is not an exported biLM's "
                             f"{INPUT_NAME!r} (batch, max_tokens, max_characters)")
        self.max_characters = char_input.shape[2]

    def __call__(self, char_ids: np.ndarray | torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """``char_ids (batch, max_tokens, max_characters)`` -> ``layers (n_layers + 1, batch, max_tokens,
        2 * projection_dim)`` float32, zeros at padding, and ``mask (batch, max_tokens)`` bool."""
        char_ids = char_ids.numpy(force=True) if isinstance(char_ids, torch.Tensor) else np.asarray(char_ids)
        if char_ids.ndim != 3 or char_ids.shape[2] != self.max_characters:
            raise ValueError(f"char_ids has shape {char_ids.shape}; expected (batch, tokens, {self.max_characters})")
        if not np.issubdtype(char_ids.dtype, np.integer):
            raise TypeError(f"char_ids has dtype {char_ids.dtype}; expected an integer array")
        if char_ids.size and (char_ids.min() < 0 or char_ids.max() > CHARACTER_IDS):
            raise ValueError(f"char_ids holds ids outside 0..{CHARACTER_IDS}; were they made by elmo.characters?")
        real = (char_ids > 0).any(axis=-1)
        if not np.array_equal(real, np.arange(real.shape[1]) < real.sum(axis=1, keepdims=True)):
            raise ValueError("a padding token comes before a real token in some row")
        layers, mask = self.session.run(list(OUTPUT_NAMES), {INPUT_NAME: char_ids.astype(np.int64, copy=False)})
        return layers, mask


class _ExportableBiLM(nn.Module):
    """``char_ids (batch, max_tokens, max_characters)`` -> ``layers (n_layers + 1, batch, max_tokens,
    2 * projection_dim)``, ``mask (batch, max_tokens)``; stateless ``BiLM.forward`` without packing.

    A row that ``BiLM.forward`` would refuse (an id from -262 to -1, a padding token before a real one) comes back
    NaN: the graph cannot raise, and read as given such a row gave vectors that looked right and were not
    (``</S>`` overwrote a token; ONNX's Gather reads id -1 as 261). An id beyond -262..261 makes onnxruntime's
    Gather raise."""

    def __init__(self, bilm: BiLM) -> None:
        super().__init__()
        self.bilm = bilm

    def forward(self, char_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bilm = self.bilm
        mask = (char_ids > 0).any(dim=-1)
        lengths = mask.sum(dim=1)
        batch_size, max_tokens, max_characters = char_ids.shape
        # Each distinct token of the batch (padding included, as one more) is encoded once, as in BiLM.
        unique_ids, inverse = torch.unique(char_ids.reshape(-1, max_characters), dim=0, return_inverse=True)
        token_vectors = bilm.token_encoder(unique_ids)[inverse]
        token_vectors = token_vectors.reshape(batch_size, max_tokens, bilm.token_encoder.output_dim) * mask[:, :, None]

        # (batch, max_tokens + 2, P): <S>, the tokens, </S> at each row's length + 1, zeros after it.
        boundaries = bilm.token_encoder(torch.stack([bilm.bos_char_ids, bilm.eos_char_ids]))
        bos_vector, eos_vector = boundaries[0], boundaries[1]
        steps = torch.arange(max_tokens + 2, device=char_ids.device)
        padded = torch.cat(
            [
                bos_vector.expand(batch_size, 1, -1),
                token_vectors,
                token_vectors.new_zeros((batch_size, 1, token_vectors.shape[2])),
            ],
            dim=1,
        )
        is_eos = (steps[None, :] == (lengths + 1)[:, None])[:, :, None]
        padded = torch.where(is_eos, eos_vector, padded)

        # Step t of a reversed row reads position length + 1 - t. Steps past the row's <S> read <S> again;
        # they come after every real step, so nothing that is kept depends on them.
        reversed_positions = ((lengths + 1)[:, None] - steps[None, :]).clamp(min=0)
        reverse_index = reversed_positions[:, :, None].expand_as(padded)

        forward_outputs = _run_stack(bilm.forward_lstm, padded)
        backward_outputs = [
            output.gather(1, reverse_index)
            for output in _run_stack(bilm.backward_lstm, padded.gather(1, reverse_index))
        ]
        layers = [torch.cat([padded, padded], dim=2)]
        layers += [torch.cat(pair, dim=2) for pair in zip(forward_outputs, backward_outputs, strict=True)]
        stacked = torch.stack(layers)[:, :, 1 : max_tokens + 1] * mask[None, :, :, None]
        ids_in_range = ((char_ids >= 0) & (char_ids <= CHARACTER_IDS)).flatten(1).all(dim=1)
        padding_last = (mask == (steps[None, 1 : max_tokens + 1] <= lengths[:, None])).all(dim=1)
        accepted = (ids_in_range & padding_last)[None, :, None, None]
        return torch.where(accepted, stacked, torch.full_like(stacked, float("nan"))), mask


def _run_stack(stack: LstmStack, inputs: torch.Tensor) -> list[torch.Tensor]:
    """Each layer's outputs ``(batch, n_steps, projection_dim)`` over padded ``inputs``, from zero state."""
    outputs = []
    layer_input = inputs
    for index, layer in enumerate(stack.projected_lstms()):
        output = _run_layer(layer, layer_input)
        if index > 0 and stack.use_skip_connections:
            output = output + layer_input
        outputs.append(output)
        layer_input = output
    return outputs


def _run_layer(layer: ProjectedLstm, inputs: torch.Tensor) -> torch.Tensor:
    """``ProjectedLstm.forward``'s cell over ``inputs (batch, n_steps, input_dim)`` from zero state."""
    dim = layer.dim
    input_gates = nn.functional.linear(inputs, layer.input_weight, layer.gate_bias()).transpose(0, 1)
    recurrent_weight = layer.recurrent_weight.t()
    projection = layer.projection.t() if layer.projection is not None else None
    cell_clip, proj_clip = layer.cell_clip, layer.proj_clip

    def step(state: tuple[torch.Tensor, torch.Tensor], step_gates: torch.Tensor):
        h, c = state
        cell_step = lstm_cell(step_gates + h @ recurrent_weight, c, cell_clip, tanh=torch.tanh)
        c, h = cell_step.cell, cell_step.hidden
        if projection is not None:
            h = h @ projection
            if proj_clip:
                h = h.clamp(-proj_clip, proj_clip)
        return (h, c), h.clone()

    batch_size = inputs.shape[0]
    zero_state = (inputs.new_zeros((batch_size, layer.output_dim)), inputs.new_zeros((batch_size, dim)))
    _, outputs = scan(step, zero_state, input_gates)
    return outputs.transpose(0, 1)
