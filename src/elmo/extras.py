"""The optional features and the modules each needs: pyproject.toml's extras, by import name.

The core install embeds (``Embedder``, ``elmo embed`` to HDF5 or npy); everything else is an extra. A feature
checks its extra before it starts work, so a missing package is one line naming the extra to install, not a
traceback an hour into a run. The check only looks the modules up (``importlib.util.find_spec``), so it costs
a few file-system look-ups and imports nothing.
"""

from collections.abc import Sequence
from importlib.util import find_spec

# The distribution's name (pyproject.toml's project.name), which the import package `elmo` does not share: `elmo`
# on PyPI is another project (an alarm system's API adapter), which `pip install 'elmo[serve]'` would install.
DISTRIBUTION = "elmo-bilm"


def install_command(extra: str) -> str:
    """What installs ``extra`` (from a checkout of this repository: ``pip install -e '.[EXTRA]'``)."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"

# extra -> the top-level modules its distributions provide (pyproject.toml lists the distributions;
# tests/test_extras.py checks that the two agree)
EXTRAS: dict[str, tuple[str, ...]] = {
    "train": ("safetensors", "matplotlib"),  # checkpoints and exports; perplexity.png
    "demo": ("matplotlib",),  # demo.png
    "parquet": ("pyarrow",),  # elmo embed --format parquet
    "serve": ("fastapi", "uvicorn", "prometheus_client", "orjson", "swagger_ui_bundle", "scipy"),
    "search": ("faiss", "sklearn", "matplotlib", "pyarrow"),  # faiss; senses: k-means, PNG; --glove's word list
    "tasks": ("torchcrf", "seqeval", "sklearn", "safetensors", "pyarrow", "gensim"),  # CRF, F1, models, baselines
    "onnx": ("onnx", "onnxscript", "onnxruntime"),
    "ray": ("ray",),
}


class MissingExtra(ImportError):
    """A feature was used without its extra installed. The message is one line: what needs which extra, the
    command that installs it, and the modules not found."""

    def __init__(self, feature: str, extra: str, missing: Sequence[str]) -> None:
        super().__init__(f"{feature} needs the '{extra}' extra: {install_command(extra)} "
                         f"(missing: {', '.join(missing)})")
        self.feature = feature
        self.extra = extra
        self.missing = tuple(missing)

    def __reduce__(self) -> tuple[type["MissingExtra"], tuple[str, str, tuple[str, ...]]]:
        """Rebuilt from its three fields: the default rebuilds from the message alone, which ``__init__`` does not
        take, so a MissingExtra raised in a worker process (Ray, multiprocessing) could not be unpickled."""
        return type(self), (self.feature, self.extra, self.missing)


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that this Python cannot find, in ``EXTRAS`` order."""
    if extra not in EXTRAS:
        raise KeyError(f"no extra {extra!r}; the extras are {', '.join(EXTRAS)}")
    return [module for module in EXTRAS[extra] if _find(module) is None]


def require(extra: str, feature: str) -> None:
    """Raise ``MissingExtra`` unless every module of ``extra`` is installed. ``feature`` names what needs it,
    as the message's subject: ``elmo serve``, ``elmo.search.build_index``, ``Parquet output``."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(feature, extra, missing)


def _find(module: str) -> object:
    try:
        return find_spec(module)
    except ValueError:  # a module in sys.modules without a spec: imported, so present
        return True
