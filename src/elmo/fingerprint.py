"""A model's identity: one sha256 over its options and its weights, so that two models of one shape differ.

Whatever keeps vectors for later records it, and refuses or remakes them for another model: a search index
(``meta.json``; opening it with another model is refused), a task feature cache (remade), and the service
lists it for each served model and index (``GET /v1/models``, ``GET /v1/indexes``).

The digest reads the canonical options JSON (``BiLMConfig.to_options``, keys sorted; ``n_characters`` as 262
whether the file says 261 or 262: bilm-tf writes either for the same character scheme, and nothing here reads it,
so the two name one model) and every tensor of the biLM's state dict in name order: its name, dtype, shape and
bytes. So it is the same on any device and for the same weights however they were stored (HDF5 or a
checkpoint), and changes with any weight. It is computed from the tensors each time it is asked for, a pass over
the weights' bytes (docs/performance.md gives the time on the shipped models); a caller that asks often keeps the
answer.
"""

import hashlib
import json
from typing import TYPE_CHECKING

import torch

from elmo.config import N_CHARACTERS

if TYPE_CHECKING:
    from elmo.bilm import BiLM

VERSION = b"elmo model fingerprint 1\n"  # changes if what is hashed changes, so old and new never compare equal


def model_fingerprint(bilm: "BiLM") -> str:
    """The sha256 (64 hex digits) of ``bilm``'s options and weights."""
    digest = hashlib.sha256(VERSION)
    options = bilm.config.to_options()
    options["char_cnn"]["n_characters"] = N_CHARACTERS
    digest.update(json.dumps(options, sort_keys=True, separators=(",", ":")).encode("utf-8"))
    state = bilm.state_dict()
    for name in sorted(state):
        tensor = state[name].detach()
        header = {"name": name, "dtype": str(tensor.dtype), "shape": list(tensor.shape)}
        digest.update(json.dumps(header, sort_keys=True).encode("utf-8"))
        digest.update(_bytes_of(tensor))
    return digest.hexdigest()


def _bytes_of(tensor: torch.Tensor) -> memoryview:
    """The tensor's elements in row-major order as raw bytes (any dtype, even those NumPy lacks)."""
    flat = tensor.cpu().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().data
