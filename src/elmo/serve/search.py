"""Contextual search in the service: which served model answers an index's queries, the index opened with that
model's batcher as its embedder, and the threads that run index work off the event loop.

The endpoints themselves (``/v1/neighbors``, ``/v1/senses``, ``/v1/indexes``) are in ``search_routes.py``; the
search is ``elmo.search``'s own (``neighbors``, ``senses``, ``plot_senses``), unchanged.
"""

import asyncio
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from elmo.embedder import Embedder
from elmo.model_dir import ModelDir
from elmo.search.index import ContextIndex
from elmo.search.senses import Senses, plot_senses
from elmo.serve.batching import DynamicBatcher, QueueFull
from elmo.serve.config import IndexSpec, ModelSpec

SEARCH_THREADS = 2
_T = TypeVar("_T")
_PLOT_LOCK = threading.Lock()  # pyplot's figure registry is global: draw one map at a time


def model_for_index(spec: IndexSpec, models: Sequence[ModelSpec], window: dict[str, int]) -> str:
    """The name of the served model that answers ``spec``'s sentence queries: the one loaded from the directory
    (or shipped model) the index was built with, which must read queries as the index's corpus was read, with
    the service's ``window`` (``ContextIndex.check_reads_as``). Checked before any model loads, so a bad
    ``--index`` costs nothing; ValueError or FileNotFoundError say what is wrong."""
    index = ContextIndex.load(spec.directory)
    built_with = index.meta["model"]
    if built_with is None:
        raise ValueError(f"--index {spec.directory} was built from an Embedder object with no model name, so the "
                         "model that embeds its queries is unknown; rebuild it with `elmo index --model ...`")
    wanted = _model_path(index.model_source or built_with)  # a shipped name: the shipped model, not ./NAME
    if wanted is None:
        raise ValueError(f"--index {spec.directory} was built with the model {built_with}, which is not found here")
    for model in models:
        if _model_path(model.source) == wanted:
            index.check_reads_as(ModelDir.find(model.source).tokenizer, window, f"model {model.name!r}")
            return model.name
    raise ValueError(f"--index {spec.directory} was built with the model {built_with}; serve that model too "
                     f"(--model {built_with})")


def _model_path(reference: str) -> Path | None:
    """A model directory or shipped name as one resolved directory, so ``en`` and its path compare equal."""
    try:
        return ModelDir.find(reference).path.resolve()
    except (FileNotFoundError, ValueError):
        return None


class BatchedEmbedder:
    """What a served ``ContextIndex`` sees as its embedder (an ``elmo.search.LayerEmbedder``): the served model,
    except that ``embed`` goes through the model's batcher, so a query sentence joins the batches of
    ``/v1/embed`` requests and meets the same queue limit and timeout. Used from a search thread, never from the
    event loop (``embed`` blocks)."""

    def __init__(self, embedder: Embedder, batcher: DynamicBatcher, timeout_s: float, fingerprint: str) -> None:
        self.fingerprint = fingerprint
        self.tokenizer_name = embedder.tokenizer_name
        self.max_window_tokens = embedder.max_window_tokens
        self.window_context = embedder.window_context
        self.carries_state = embedder.carries_state  # the batcher's batches mix requests: refused where True
        self.n_layers = embedder.n_layers
        self.dim = embedder.dim
        self.tokenize = embedder.tokenize
        self._batcher = batcher
        self._timeout_s = timeout_s

    def embed(self, sentences: Sequence[str | Sequence[str]], layers: Literal["all"] = "all",
              batch_size: int = 32) -> list[np.ndarray]:
        """Every layer of each sentence, ``(n_layers, T, 2P)`` float32, as ``Embedder.embed(..., "all")``; the
        batcher's own batch size applies."""
        if layers != "all":
            raise ValueError(f"layers {layers!r}: the batcher answers every layer ('all') only")
        return self._batcher.submit_from_thread([self.tokenize(s) for s in sentences], self._timeout_s)


@dataclass
class ServedIndex:
    name: str
    model: str  # the served model whose batcher embeds this index's query sentences
    index: ContextIndex

    def describe(self) -> dict[str, Any]:
        meta = self.index.meta
        return {"name": self.name, "model": self.model, "fingerprint": meta["fingerprint"],
                "layers": self.index.layers, "dim": self.index.dim,
                "tokenizer": meta["tokenizer"], "n_sentences": meta["n_sentences"], "n_tokens": meta["n_tokens"],
                "n_indexed": meta["n_indexed"], "n_words": meta["n_words"], "ann": meta["ann"]["factories"]}


def open_index(name: str, directory: str | Path, model_name: str, embedder: Embedder, batcher: DynamicBatcher,
               timeout_s: float, fingerprint: str) -> ServedIndex:
    """Load an index with the served model as its embedder, and read in what every query needs (the ANN indexes,
    the memory maps, the layer-0 vocabulary), so the first request is not the slow one and a broken index
    stops the start-up. ValueError if the served model (``fingerprint``: its options and weights) is not the one
    the index was built with."""
    index = ContextIndex.load(directory, embedder=BatchedEmbedder(embedder, batcher, timeout_s, fingerprint))
    index.embedder  # noqa: B018 -- ValueError if the model's fingerprint, tokenizer or windows differ from the index's
    for layer in index.layers:
        index.vectors(layer)
        index.ann(layer)
    index.static_vectors.unit_matrix  # noqa: B018 -- computed once here rather than by the first request
    return ServedIndex(name, model_name, index)


class SearchRunner:
    """Runs index work (ANN search and re-ranking reads, clustering, drawing) on its own threads, so neither the
    event loop nor a model's batch thread waits for it. At most ``max_pending`` jobs are admitted at once
    (QueueFull past that); a job not answered within ``timeout_s`` raises TimeoutError (it still runs out)."""

    def __init__(self, max_pending: int, timeout_s: float, threads: int = SEARCH_THREADS) -> None:
        self.max_pending = max_pending
        self.timeout_s = timeout_s
        self.pending = 0
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="elmo-search")

    async def run(self, work: Callable[[], _T]) -> _T:
        if self.pending >= self.max_pending:
            raise QueueFull(f"the search threads already hold {self.pending} requests")
        loop = asyncio.get_running_loop()
        self.pending += 1
        job = self._executor.submit(work)
        job.add_done_callback(lambda _: loop.call_soon_threadsafe(self._release))
        return await asyncio.wait_for(asyncio.wrap_future(job), self.timeout_s)

    def _release(self) -> None:
        self.pending -= 1

    async def stop(self) -> None:
        """Wait for jobs still running (ones whose requests timed out) without blocking the loop they may need."""
        await asyncio.to_thread(self._executor.shutdown, wait=True, cancel_futures=True)


def senses_png(result: Senses) -> bytes:
    """``plot_senses``'s map as PNG bytes."""
    with _PLOT_LOCK, tempfile.TemporaryDirectory(prefix="elmo-senses-") as directory:
        return plot_senses(result, Path(directory) / "senses.png").read_bytes()
