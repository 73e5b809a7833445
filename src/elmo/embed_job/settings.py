"""The settings ``elmo embed`` records with what it writes, and the one check of them.

A run's settings name its input (path and sha256), its options, its shard, the model that embeds it by its
fingerprint (``elmo.fingerprint``: options and weights, so two models of one shape differ) and how the embedder
reads sentences (``Embedder.reading``: its windows for long sentences, its class). A partial
output records them when it begins, and a whole part of a sharded run beside itself. A resumed run, or
another shard writing into the same directory, goes on only with the same settings, so no output mixes the
vectors of two inputs, two sets of options, two models or two ways of reading long sentences.
"""

import json
import re
from pathlib import Path

MODEL = "model"  # the key of the model's fingerprint
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
_SHOWN = 12  # hex digits of a fingerprint shown in a message, as the search index shows them


def parse_recorded(text: str | bytes) -> dict:
    """Settings as an output or its record holds them (JSON). ValueError for text that is not JSON, TypeError for
    JSON that is not an object: each reader decides what such a file means (damaged, or not one of ours)."""
    recorded = json.loads(text)
    if not isinstance(recorded, dict):
        raise TypeError(f"settings {recorded!r} are not a JSON object")
    return recorded


def with_model(settings: dict, fingerprint: str, reading: dict[str, str | int]) -> dict:
    """``settings`` for a run by the model of ``fingerprint``, read by an embedder as ``reading``
    (``Embedder.reading``)."""
    return {**settings, MODEL: fingerprint, **reading}


def check_same(recorded: dict, settings: dict, made: Path, remedy: str, ignoring: tuple[str, ...] = ()) -> None:
    """ValueError unless ``recorded`` (the settings ``made`` was made with) equal this run's ``settings``, but for
    the keys ``ignoring``. It names the input when only its sha256 differs, else every key that differs, with
    both fingerprints when the model differs, and ends with ``remedy`` (what to do instead)."""
    differing = sorted(key for key in settings.keys() | recorded.keys()
                       if key not in ignoring and recorded.get(key) != settings.get(key))
    if differing == ["sha256"]:
        raise ValueError(f"{settings['input']} has changed since {made} was begun (its sha256 differs); {remedy}")
    if differing:
        models = ""
        if MODEL in differing:
            models = f" ({_named(recorded.get(MODEL))}; this model has {_named(settings.get(MODEL))})"
        raise ValueError(f"{made} was made with another {', '.join(differing)}{models}; {remedy}")


def _named(fingerprint: object) -> str:
    if isinstance(fingerprint, str) and _FINGERPRINT.fullmatch(fingerprint):
        return f"fingerprint {fingerprint[:_SHOWN]}"
    return "no fingerprint, as an older version wrote it"
