"""Sentences -> per-layer vectors: the everyday API.

``Embedder.embed`` takes raw strings (split by the model's tokenizer) or token lists and returns one
array per sentence, in input order. Inside, it

- runs the sentences of a window of batches (``bucket_batches``) one after another on ``batch_size``
  LSTM rows: when a sentence ends, its row takes the next one, from a zero state (continuous batching,
  ``elmo/lanes.py``). No padding is run, and the rows stay busy to the end;
- cuts a sentence longer than ``max_window_tokens`` into overlapping windows and stitches them: the
  sentence is split into consecutive cores of ``max_window_tokens - 2 * window_context`` tokens, each
  core is embedded inside a window that adds up to ``window_context`` tokens of the neighbouring text on
  either side, and each token keeps the vectors of the window in which it is in the core. So every
  token sees at least ``window_context`` tokens of real context on both sides (or the sentence edge),
  and the memory used is that of a batch of windows, whatever the sentence length;
- streams: ``iter_embed`` works through the input a chunk at a time: a window of batches, closed early, at the
  end of a batch, once its sentences hold as many tokens as a window of batches of full windows (every layer of
  a chunk's sentences is held until the chunk is done, so long documents are held a batch at a time);
- keeps an LRU cache of context-free token vectors (``token_cache_size`` tokens, copies in one table of at most
  that many rows, so its memory is bounded in bytes; 0 turns it off), so the character CNN runs once per
  distinct token, not once per occurrence.

``Embedder.encode`` is the everyday call on top (sentence-transformers' shape): one sentence or many, one
layer or a mix, pooled to one vector per sentence or not, normalized, float16, NumPy or torch.

Every sentence starts from a zero LSTM state, so its vectors do not depend on what else is embedded.
``elmo.stateful_embedder.StatefulEmbedder`` carries each batch row's state into the next batch instead, as
bilm-tf's inference did.

Past 350 lines on purpose: about 60 of them are ``encode``'s ``@overload`` signatures (so that editors know a
pooled call returns one matrix and an unpooled one a list), and the rest is one class whose parts (the window
cutting, the lane groups, the token cache, the device) share its state; the lane packing lives in
``elmo.lanes``, the stateful variant in ``elmo.stateful_embedder``.
"""

import operator
import os
import sys
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import ClassVar, Literal, Self, TypedDict, Unpack, overload

import numpy as np
import torch
from tqdm import tqdm

from elmo.bilm import BiLM
from elmo.characters import batch_to_char_ids
from elmo.fingerprint import model_fingerprint
from elmo.layer_choice import LayerChoice, layer_weights, mix_layers
from elmo.memory import FreedMemoryTrimmer
from elmo.model_dir import ModelDir
from elmo.modules.weight_changes import weights_changed
from elmo.pooling import Pooling, check_pooling, pool
from elmo.token_cache import TokenVectorCache
from elmo.tokenizers import RefusedToken, clean_text, clean_token, get_tokenizer, token_problem
from elmo.windows import MAX_WINDOW_TOKENS, WINDOW_CONTEXT, check_windows

Sentence = str | Sequence[str]
Output = Literal["numpy", "torch"]


@dataclass(frozen=True)
class Piece:
    """A run of one sentence's tokens that is embedded as a unit; ``core`` is the part it supplies."""

    sentence: int
    tokens: Sequence[str]
    offset: int  # where tokens[0] stands in the sentence
    core_start: int  # sentence positions [core_start, core_end) come from this piece
    core_end: int


class EncodeOptions(TypedDict, total=False):
    """``encode``'s options that do not change the type of what it returns."""

    layers: LayerChoice
    normalize: bool
    batch_size: int
    dtype: type[np.floating] | np.dtype | torch.dtype | str
    show_progress_bar: bool | None


Sentences = Iterable[Sentence]
Tokens = list[str]


class Embedder:
    # Whether a sentence's vectors depend on what this embedder embedded before it (``StatefulEmbedder``: each
    # batch row carries its LSTM state on). Work that resumes, shards or reuses vectors needs them to depend on the
    # sentence alone, so it refuses such an embedder (search, ``elmo embed``) or embeds afresh (the tasks' cache).
    carries_state: ClassVar[bool] = False

    def __init__(
        self,
        bilm: BiLM,
        tokenizer: str = "whitespace",
        device: str | torch.device | None = None,
        max_window_tokens: int = MAX_WINDOW_TOKENS,
        window_context: int = WINDOW_CONTEXT,
        bucket_batches: int = 16,
        token_cache_size: int = 20_000,
    ) -> None:
        """``device`` defaults to where ``bilm`` is. A ``bilm`` passed in is never moved or changed: on another
        device the embedder works on a copy of it. A bare ``BiLM`` does not know its tokenizer: raw text is split
        at white space unless ``tokenizer`` names the one its model was trained with (``Embedder.load`` reads it
        from the model's ``tokenizer.json``: ``english`` for ``en``, ``jieba`` for ``zh``)."""
        if isinstance(bilm, str | os.PathLike):
            raise TypeError(f"Embedder takes a BiLM; for a model directory or a shipped model's name use "
                            f"Embedder.load({os.fspath(bilm)!r})")
        if not isinstance(bilm, BiLM):
            raise TypeError(f"Embedder takes a BiLM; got a {type(bilm).__name__}")
        max_window_tokens, window_context, bucket_batches, token_cache_size = (
            _whole_number(name, value) for name, value in (
                ("max_window_tokens", max_window_tokens), ("window_context", window_context),
                ("bucket_batches", bucket_batches), ("token_cache_size", token_cache_size)))
        if token_cache_size < 0:
            raise ValueError(f"token_cache_size is {token_cache_size}; expected 0 (no cache) or more")
        check_windows(max_window_tokens, window_context)
        if bucket_batches < 1:
            raise ValueError(f"bucket_batches is {bucket_batches}; expected at least 1 (batches read ahead)")
        weights_changed()  # weights written where nothing counts it (.data) are read afresh by a new embedder
        self.bilm = bilm
        self._owns_bilm = False
        self.device = _device_of(bilm)
        self.tokenizer_name = tokenizer
        self.tokenize_text = get_tokenizer(tokenizer)
        self.max_window_tokens = max_window_tokens
        self.window_context = window_context
        self.bucket_batches = bucket_batches
        self.token_cache_size = token_cache_size
        self._memory = FreedMemoryTrimmer()
        self._memory_lock = threading.Lock()  # the trimmer is shared by threads embedding at once, and keeps state
        self.token_cache = self._new_token_cache()
        if device is not None:
            self.to(device)

    @classmethod
    def load(cls, model: str = "en", tokenizer: str | None = None, device: str | torch.device | None = None,
             **options) -> Self:
        """From a model directory, or the name of a shipped model; the tokenizer defaults to the model's. The
        biLM loaded here is the embedder's own, so ``to`` moves it rather than copying it."""
        model_dir = ModelDir.find(model)
        bilm = model_dir.load_bilm().eval()
        if device is not None:
            bilm.to(_available(device))
        embedder = cls(bilm, tokenizer=tokenizer or model_dir.tokenizer, **options)
        embedder._owns_bilm = True
        return embedder

    def to(self, device: str | torch.device) -> Self:
        """Run on ``device`` from now on; returns the embedder. Its own biLM (from ``load``, or a copy it made)
        moves; a biLM passed in stays where it is, and the embedder copies it to ``device``."""
        target = _available(device)
        if target != _device_of(self.bilm):
            if self._owns_bilm:
                self.bilm.to(target)
            else:
                self.bilm = _copy_to(self.bilm, target)
                self._owns_bilm = True
            self.token_cache = self._new_token_cache()  # its table and encoder were on the old device
        self.device = target
        return self

    @property
    def n_layers(self) -> int:
        return self.bilm.config.n_output_layers

    @property
    def dim(self) -> int:
        return self.bilm.config.output_dim

    @property
    def fingerprint(self) -> str:
        """The model's identity (``elmo.fingerprint``: options and weights), computed from the weights as they are
        now; what a search index or a feature cache records of the model that made it."""
        return model_fingerprint(self.bilm)

    @property
    def reading(self) -> dict[str, str | int]:
        """How this embedder reads sentences, besides its model: the windows it cuts long sentences into, and its
        class (a ``StatefulEmbedder`` carries state from batch to batch). Each changes a sentence's vectors, so an
        output made to be resumed or reused records them with the model's fingerprint (``elmo embed``, the tasks'
        feature cache) and only an embedder that reads the same way goes on with it."""
        return {"embedder": type(self).__name__, "max_window_tokens": self.max_window_tokens,
                "window_context": self.window_context}

    def tokenize(self, sentence: Sentence) -> list[str]:
        """Raw text cleaned as every reader cleans it (``clean_text``) and split by the model's tokenizer; a
        tokenized sentence as it is, each token cleaned the same way (``clean_token``: still one token each)."""
        if isinstance(sentence, str):
            tokens = self.tokenize_text(clean_text(sentence))
            if not sentence.isascii():  # a lone surrogate survives the tokenizers (which make no blank token)
                _refuse_tokens_without_text(tokens)
            return tokens
        _refuse_non_sentences(sentence, "a sentence", "a str or a list of tokens")
        tokens = list(sentence)  # once: an iterator is used up by reading it
        if not all(isinstance(token, str) for token in tokens):
            raise TypeError(f"a tokenized sentence must hold strings; got {tokens[:5]!r}")
        _refuse_tokens_without_text(tokens)
        return [clean_token(token) for token in tokens]

    # With a bare str: one sentence's result; with many: pooled, one array, else a list. return_tokens=True adds
    # the tokens the vectors belong to. A str is also an iterable of one-character strings, so the str overloads
    # overlap the iterable ones (mypy's overload-overlap): intended, as typing cannot say "an iterable, not a str",
    # and the str overloads come first, as encode itself tests for a str first.
    @overload
    def encode(  # type: ignore[overload-overlap]  # str before Iterable[str], see above
            self, sentences: str, *, pooling: Pooling | None = ..., output: Literal["numpy"] = ...,
            return_tokens: Literal[False] = ..., **options: Unpack[EncodeOptions]) -> np.ndarray: ...
    @overload
    def encode(  # type: ignore[overload-overlap]  # str before Iterable[str], see above
            self, sentences: str, *, pooling: Pooling | None = ..., output: Literal["torch"],
            return_tokens: Literal[False] = ..., **options: Unpack[EncodeOptions]) -> torch.Tensor: ...
    @overload
    def encode(self, sentences: Sentences, *, pooling: Pooling, output: Literal["numpy"] = ...,
               return_tokens: Literal[False] = ..., **options: Unpack[EncodeOptions]) -> np.ndarray: ...
    @overload
    def encode(self, sentences: Sentences, *, pooling: Pooling, output: Literal["torch"],
               return_tokens: Literal[False] = ..., **options: Unpack[EncodeOptions]) -> torch.Tensor: ...
    @overload
    def encode(self, sentences: Sentences, *, pooling: None = ..., output: Literal["numpy"] = ...,
               return_tokens: Literal[False] = ..., **options: Unpack[EncodeOptions]) -> list[np.ndarray]: ...
    @overload
    def encode(self, sentences: Sentences, *, pooling: None = ..., output: Literal["torch"],
               return_tokens: Literal[False] = ..., **options: Unpack[EncodeOptions]) -> list[torch.Tensor]: ...
    @overload
    def encode(  # type: ignore[overload-overlap]  # str before Iterable[str], see above
            self, sentences: str, *, pooling: Pooling | None = ..., output: Literal["numpy"] = ...,
            return_tokens: Literal[True], **options: Unpack[EncodeOptions]) -> tuple[np.ndarray, Tokens]: ...
    @overload
    def encode(  # type: ignore[overload-overlap]  # str before Iterable[str], see above
            self, sentences: str, *, pooling: Pooling | None = ..., output: Literal["torch"],
            return_tokens: Literal[True], **options: Unpack[EncodeOptions]) -> tuple[torch.Tensor, Tokens]: ...
    @overload
    def encode(self, sentences: Sentences, *, pooling: Pooling, output: Literal["numpy"] = ...,
               return_tokens: Literal[True], **options: Unpack[EncodeOptions]) -> tuple[np.ndarray, list[Tokens]]: ...
    @overload
    def encode(self, sentences: Sentences, *, pooling: Pooling, output: Literal["torch"],
               return_tokens: Literal[True], **options: Unpack[EncodeOptions]) -> tuple[torch.Tensor, list[Tokens]]: ...
    @overload
    def encode(self, sentences: Sentences, *, pooling: None = ..., output: Literal["numpy"] = ...,
               return_tokens: Literal[True], **options: Unpack[EncodeOptions]
               ) -> tuple[list[np.ndarray], list[Tokens]]: ...
    @overload
    def encode(self, sentences: Sentences, *, pooling: None = ..., output: Literal["torch"],
               return_tokens: Literal[True], **options: Unpack[EncodeOptions]
               ) -> tuple[list[torch.Tensor], list[Tokens]]: ...

    def encode(
        self,
        sentences: Sentence | Sentences,
        *,
        layers: LayerChoice = "average",
        pooling: Pooling | None = None,
        normalize: bool = False,
        batch_size: int = 32,
        output: Output = "numpy",
        dtype: type[np.floating] | np.dtype | torch.dtype | str = np.float32,
        show_progress_bar: bool | None = None,
        return_tokens: bool = False,
    ) -> np.ndarray | torch.Tensor | list | tuple:
        """Vectors for one sentence (a bare str) or many (an iterable of raw strings or token lists).

        Per sentence: ``(T, D)`` unpooled, ``(D,)`` pooled (mean over its real tokens, max, first or last; an
        empty sentence pools to zeros); ``layers="all"`` puts the layer axis first, ``(L+1, T, D)`` or
        ``(L+1, D)``. Many sentences pooled are stacked into one ``(N, D)`` or ``(N, L+1, D)`` array; unpooled,
        a list. ``layers`` is a ``LayerChoice`` (``elmo.layer_choice``: ``"all"``, ``"top"``, ``"average"``, a
        layer index, ``-1`` the top, or mixing weights); the default is the even mix of all layers, TF Hub's
        ``elmo`` output. ``normalize`` scales each output vector to unit length (a
        zero vector stays zero). ``dtype`` float32 or float16 (rounded last, after pooling and normalizing);
        ``output="torch"`` gives CPU tensors. The progress bar is on by default when stderr is a terminal and
        the input has a length of more than four batches. ``return_tokens=True`` returns ``(vectors, tokens)``:
        each sentence's tokens, as the model read them, row for row.
        """
        check_pooling(pooling)
        if output not in ("numpy", "torch"):
            raise ValueError(f"output is {output!r}; expected 'numpy' or 'torch'")
        flags = {"normalize": normalize, "return_tokens": return_tokens}
        if show_progress_bar is not None:  # None: decided by the input's length
            flags["show_progress_bar"] = show_progress_bar
        check_flags(flags)
        target_dtype = _float_dtype(dtype)
        weights = layer_weights(layers, self.n_layers)
        batch_size = checked_batch_size(batch_size)
        _refuse_non_sentences(sentences, "sentences", "a str (one sentence) or an iterable of sentences")
        single = isinstance(sentences, str)
        many: Sentences = [sentences] if isinstance(sentences, str) else sentences
        if show_progress_bar is None:
            show_progress_bar = sys.stderr.isatty() and isinstance(many, Sized) and len(many) > 4 * batch_size
        tokens: list[Tokens] = []

        def tokenized() -> Iterator[Tokens]:
            for sentence in many:
                tokens.append(self.tokenize(sentence))
                yield tokens[-1]

        vectors: list[np.ndarray] = []
        with _progress_bar(many, show_progress_bar) as bar:
            for array in self._mixed(tokenized(), weights, batch_size, bar):
                vector = pool(array, pooling) if pooling is not None else array
                vectors.append(_unit_length(vector) if normalize else vector)
        cast = [cast_vectors(vector, target_dtype) for vector in vectors]
        vectors = [vector for vector, _ in cast]
        _warn_of_overflow([problem for _, problem in cast])
        output_vectors: np.ndarray | list[np.ndarray] = vectors
        if pooling is not None and not single:
            pooled_shape = (self.dim,) if weights is not None else (self.n_layers, self.dim)
            output_vectors = np.stack(vectors) if vectors else np.zeros((0, *pooled_shape), target_dtype)
        result = _convert(vectors[0] if single else output_vectors, target_dtype, output)
        if return_tokens:
            return result, (tokens[0] if single else tokens)
        return result

    def embed(
        self, sentences: Sentences, layers: LayerChoice = "all", batch_size: int = 32, progress: bool = False
    ) -> list[np.ndarray]:
        """One float32 array per sentence: ``(n_layers, T, 2P)`` for ``all``, else ``(T, 2P)``.

        ``layers`` is a ``LayerChoice`` (``elmo.layer_choice``): ``top`` is the last layer, ``average`` the mean
        of all layers, an int the layer of that index (``-1`` the top), and a
        sequence of ``n_layers`` numbers weights the layers as given (``sum_j w_j h_j``; normalize them yourself
        if you want). ``sentences`` is a list (any iterable) of sentences; a bare str is refused, as it would be
        read as a sequence of one-character sentences (``encode`` takes one sentence).
        """
        return list(self.iter_embed(sentences, layers, batch_size, progress))

    def iter_embed(
        self, sentences: Sentences, layers: LayerChoice = "all", batch_size: int = 32, progress: bool = False
    ) -> Iterator[np.ndarray]:
        """``embed`` as a stream: holds only a window of ``batch_size * bucket_batches`` sentences. The arguments
        are checked at the call, not at the first ``next`` (which may come long after)."""
        if isinstance(sentences, str):
            raise TypeError(f"sentences is a str ({sentences[:40]!r}); embed takes a list of sentences: "
                            "embed([text]), or encode(text) for one sentence")
        _refuse_non_sentences(sentences, "sentences", "a list (any iterable) of sentences")
        weights = layer_weights(layers, self.n_layers)
        batch_size = checked_batch_size(batch_size)
        check_flags({"progress": progress})

        def stream() -> Iterator[np.ndarray]:
            with _progress_bar(sentences, progress) as bar:
                yield from self._mixed((self.tokenize(sentence) for sentence in sentences), weights, batch_size, bar)

        return stream()

    def embed_tfhub(self, sentences: Sentences, batch_size: int = 32) -> list[dict[str, np.ndarray]]:
        """The outputs TF Hub's ELMo module names: ``word_emb`` (T, P), ``lstm_outputs1``, ``lstm_outputs2``
        (T, 2P), ``elmo`` (T, 2P; the even mix of all layers, which is the module's untrained mix) and
        ``default`` (2P,: ``elmo`` averaged over the sentence's tokens; zeros for an empty sentence)."""
        results = []
        for all_layers in self.iter_embed(sentences, "all", batch_size):
            projection_dim = self.dim // 2
            mixed = all_layers.mean(axis=0)
            outputs = {"word_emb": all_layers[0, :, :projection_dim]}
            for k in range(1, self.n_layers):
                outputs[f"lstm_outputs{k}"] = all_layers[k]
            outputs["elmo"] = mixed
            outputs["default"] = pool(mixed, "mean")
            results.append(outputs)
        return results

    def _mixed(self, token_lists: Iterable[Tokens], weights: np.ndarray | None, batch_size: int,
               bar: tqdm) -> Iterator[np.ndarray]:
        """Each token list's layers, mixed by ``weights``, in input order, a chunk of sentences at a time.

        Every layer of a chunk's sentences is held until the chunk is done, so a chunk also closes, at the end of a
        batch, once it holds ``chunk_tokens`` tokens: otherwise ``_chunk_size`` long documents were held whole. At
        the end of a batch only, as a subclass may run a chunk's batches in order from its start
        (``StatefulEmbedder``)."""
        chunk_size, chunk_tokens = self._chunk_size(batch_size), self.chunk_tokens(batch_size)
        chunk: list[Tokens] = []
        tokens_in_chunk = 0
        for tokens in token_lists:
            chunk.append(tokens)
            tokens_in_chunk += len(tokens)
            if len(chunk) == chunk_size or (len(chunk) % batch_size == 0 and tokens_in_chunk >= chunk_tokens):
                yield from self._finish(self._embed_chunk(chunk, batch_size), weights, bar)
                chunk, tokens_in_chunk = [], 0
        if chunk:
            yield from self._finish(self._embed_chunk(chunk, batch_size), weights, bar)

    @staticmethod
    def _finish(arrays: list[np.ndarray], weights: np.ndarray | None, bar: tqdm) -> Iterator[np.ndarray]:
        for array in arrays:
            bar.update(1)
            yield mix_layers(array, weights)

    def _chunk_size(self, batch_size: int) -> int:
        """Sentences read before any is embedded: a window of batches to sort by length."""
        return batch_size * self.bucket_batches

    def chunk_tokens(self, batch_size: int) -> int:
        """Tokens after which a chunk closes at the end of a batch: those of a window of batches of full windows, the
        most a chunk of sentences no longer than a window holds."""
        return batch_size * self.bucket_batches * self.max_window_tokens

    def _embed_chunk(self, sentences: list[Tokens], batch_size: int) -> list[np.ndarray]:
        """Every layer of each sentence, ``(n_layers, T, 2P)`` float32, in the order given."""
        results = [np.zeros((self.n_layers, len(tokens), self.dim), np.float32) for tokens in sentences]
        for group in self._groups(sentences, batch_size):
            self._store(group, self._layers_of([piece.tokens for piece in group], batch_size), results)
            with self._memory_lock:
                self._memory.after_batch()  # the group's tensors are all freed by now
        return results

    def _groups(self, sentences: list[Tokens], batch_size: int) -> list[list[Piece]]:
        """The pieces (windows of long sentences) longest first, in runs for the lanes."""
        pieces = [piece for i, tokens in enumerate(sentences) for piece in self._cut(i, tokens)]
        pieces.sort(key=lambda piece: len(piece.tokens), reverse=True)
        return self._lane_groups(pieces, batch_size)

    @staticmethod
    def _store(group: list[Piece], layers: list[np.ndarray], results: list[np.ndarray]) -> None:
        """Copy each piece's core from its layers into its sentence's result."""
        for piece, piece_layers in zip(group, layers, strict=True):
            core = slice(piece.core_start - piece.offset, piece.core_end - piece.offset)
            results[piece.sentence][:, piece.core_start : piece.core_end] = piece_layers[:, core]

    def _cut(self, sentence: int, tokens: list[str]) -> list[Piece]:
        if len(tokens) <= self.max_window_tokens:
            return [Piece(sentence, tokens, 0, 0, len(tokens))]
        core = self.max_window_tokens - 2 * self.window_context
        pieces = []
        for core_start in range(0, len(tokens), core):
            core_end = min(core_start + core, len(tokens))
            start = max(0, core_start - self.window_context)
            end = min(len(tokens), core_end + self.window_context)
            pieces.append(Piece(sentence, tokens[start:end], start, core_start, core_end))
        return pieces

    def _lane_groups(self, pieces: list[Piece], batch_size: int) -> list[list[Piece]]:
        """Runs of pieces that each hold at most ``batch_size`` full windows' worth of steps, so one run on the
        lanes needs no more memory than a batch of full windows."""
        budget = batch_size * (self.max_window_tokens + 2)
        groups: list[list[Piece]] = []
        steps = budget
        for piece in pieces:
            if steps + len(piece.tokens) + 2 > budget:
                groups.append([])
                steps = 0
            groups[-1].append(piece)
            steps += len(piece.tokens) + 2
        return groups

    @torch.inference_mode()
    def _layers_of(self, token_lists: list[Sequence[str]], batch_size: int) -> list[np.ndarray]:
        """Each token list's layers ``(n_layers, T, 2P)``: the lists run one after another on ``batch_size`` LSTM
        rows (``elmo/lanes.py``), each from a zero state."""
        lengths = [len(tokens) for tokens in token_lists]
        token_vectors = self._token_vectors(token_lists)
        layers = self.bilm.contextualize_lanes(token_vectors, lengths, batch_size).float().cpu().numpy()
        return np.split(layers, np.cumsum(lengths)[:-1], axis=1)

    def _token_vectors(self, token_lists: list[Sequence[str]]) -> torch.Tensor:
        """``(n_tokens, P)``: the lists' context-free token vectors end to end, from the cache if there is one."""
        cache = self.token_cache
        if cache is not None and cache.encoder is not self.bilm.token_encoder:  # ``bilm`` or its encoder replaced
            cache = self.token_cache = self._new_token_cache()  # since: the cache's vectors are the old encoder's
        if cache is not None:
            return cache.token_vectors(token_lists, self.device)
        tokens = [token for token_list in token_lists for token in token_list]
        if not tokens:
            return torch.zeros((0, self.dim // 2), dtype=next(self.bilm.parameters()).dtype, device=self.device)
        char_ids = batch_to_char_ids([tokens], self.bilm.config.char_cnn.max_characters_per_token).to(self.device)
        return self.bilm.encode_tokens(char_ids, torch.ones(char_ids.shape[:2], dtype=torch.bool,
                                                            device=self.device))[0]

    def _new_token_cache(self) -> TokenVectorCache | None:
        if self.token_cache_size <= 0:
            return None
        max_characters = self.bilm.config.char_cnn.max_characters_per_token
        return TokenVectorCache(self.bilm.token_encoder, max_characters, self.token_cache_size)


def _device_of(bilm: BiLM) -> torch.device:
    return next(bilm.parameters()).device


def _copy_to(bilm: BiLM, device: torch.device) -> BiLM:
    """A copy of ``bilm``'s weights on ``device`` in their dtype, made there (no second copy where ``bilm`` is)."""
    with device:
        copied = BiLM(bilm.config).to(next(bilm.parameters()).dtype)
    copied.load_state_dict(bilm.state_dict())
    return copied.eval()


def _available(device: str | torch.device) -> torch.device:
    """``device`` as PyTorch names it once used (``cuda`` -> ``cuda:0``); ValueError if it is not here. None is
    refused (PyTorch reads it as the CPU): ``to`` needs a device named."""
    if device is None:
        raise TypeError("device is None; name one ('cpu', 'cuda', 'cuda:1')")
    try:
        return torch.empty(0, device=device).device
    except (RuntimeError, AssertionError) as error:  # an unknown name, or CUDA missing (torch asserts)
        raise ValueError(f"device {device!r} is not available here: {error}") from None


def _refuse_tokens_without_text(tokens: list[str]) -> None:
    """RefusedToken (a ValueError) naming the first token ``elmo.tokenizers.token_problem`` refuses: no
    tokenizer makes such a token, and most would be embedded as the empty word."""
    for position, token in enumerate(tokens):
        if problem := token_problem(token):
            raise RefusedToken(f"token {position} ({token!r}) of the sentence {tokens[:8]!r} {problem}; a token "
                               "must be printable text", position)


def _whole_number(name: str, value: int) -> int:
    """``value`` as an int (NumPy's whole numbers too, which JSON records could not hold); TypeError for a float, a
    str or a bool (2.5 failed only at the first long sentence; True was read as 1)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} is {value!r}; expected a whole number")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} is {value!r}; expected a whole number") from None


def checked_batch_size(batch_size: int) -> int:
    """``batch_size`` as a whole number (``_whole_number``) of at least 1, refused here rather than deep inside."""
    whole = _whole_number("batch_size", batch_size)
    if whole < 1:
        raise ValueError(f"batch_size is {whole}; expected at least 1")
    return whole


def _refuse_non_sentences(value: object, name: str, expected: str) -> None:
    """TypeError naming ``value`` (called ``name``) if it is None, bytes or not iterable, at the call: bytes iterate
    as numbers, so they were refused late as tokens that are not strings, and None failed inside the loop."""
    if isinstance(value, bytes | bytearray | memoryview):
        raise TypeError(f"{name} is {type(value).__name__} ({bytes(value[:40])!r}); decode it to a str first "
                        "(data.decode('utf-8'))")
    if not isinstance(value, Iterable):
        raise TypeError(f"{name} is {value!r}; expected {expected}")


def _progress_bar(sentences: Iterable, show: bool) -> tqdm:
    """A bar counting sentences, out of their number where the input has a length."""
    total = len(sentences) if isinstance(sentences, Sized) else None
    return tqdm(total=total, disable=not show, unit=" sentences", desc="embedding")


_FLOAT_DTYPES: dict[torch.dtype, np.dtype] = {torch.float32: np.dtype(np.float32), torch.float16: np.dtype(np.float16)}


def _float_dtype(dtype: type[np.floating] | np.dtype | torch.dtype | str) -> np.dtype:
    """float32 or float16 from its NumPy, torch or string name; ValueError otherwise."""
    try:
        resolved = _FLOAT_DTYPES[dtype] if isinstance(dtype, torch.dtype) else np.dtype(dtype)
    except (KeyError, TypeError):
        resolved = None
    if resolved is None or resolved not in _FLOAT_DTYPES.values():
        raise ValueError(f"dtype is {dtype!r}; expected float32 or float16")
    return resolved


def check_flags(flags: Mapping[str, object]) -> None:
    """TypeError naming the first of ``flags`` (name: value) that is not True or False: a string such as "no", or a
    list passed in a flag's place, is true and would switch the option on without a word."""
    for name, flag in flags.items():
        if not isinstance(flag, bool | np.bool_):
            raise TypeError(f"{name} is {flag!r}; expected True or False")


def _unit_length(vectors: np.ndarray) -> np.ndarray:
    """Each vector along the last axis divided by its L2 norm; a zero vector stays zero. The norm is taken in
    float64: float32 squares of very large mixed vectors overflow, and the vector would come out zero."""
    norms = np.linalg.norm(vectors.astype(np.float64), axis=-1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1)).astype(vectors.dtype, copy=False)


@dataclass(frozen=True)
class NonFiniteVectors:
    """What ``cast_vectors`` found wrong with some vectors: beyond ``dtype``'s range (``largest``: the largest
    magnitude), or, with ``dtype`` None, not finite already in float32. ``reason`` is the same for every sentence
    with that problem (a warning groups sentences by it); ``str`` adds the sentence's own magnitude."""

    dtype: str | None
    largest: float | None = None

    @property
    def reason(self) -> str:
        return self._text(with_magnitude=False)

    def __str__(self) -> str:
        return self._text(with_magnitude=True)

    def _text(self, with_magnitude: bool) -> str:
        if self.dtype is None:
            return "not finite (inf or NaN): the mixing weights make them overflow float32; use smaller ones"
        magnitude = f" (largest magnitude {self.largest:.4g})" if with_magnitude else ""
        return f"beyond {self.dtype}'s range{magnitude}, written as inf; float32 holds them"


def cast_vectors(vectors: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, NonFiniteVectors | None]:
    """``vectors`` in ``dtype``, and what is wrong with them where some are not finite (None otherwise): beyond
    float16's range (it holds at most 65504), or inf or NaN already, from mixing weights large enough to overflow
    float32 (``elmo.layer_choice`` admits any finite float32 weight). NumPy's own warning names no sentence and is
    shown once a process, so each caller says which of its sentences it was."""
    with np.errstate(over="ignore"):
        cast = vectors.astype(dtype, copy=False)
    if np.isfinite(cast).all():
        return cast, None
    if np.isfinite(vectors).all():
        return cast, NonFiniteVectors(np.dtype(dtype).name, float(np.abs(vectors).max()))
    return cast, NonFiniteVectors(None)


def _warn_of_overflow(problems: list[NonFiniteVectors | None]) -> None:
    """A warning for each kind of problem ``cast_vectors`` found, naming the sentences (by position) it hit."""
    hit: dict[str, list[int]] = {}
    for index, problem in enumerate(problems):
        if problem is not None:
            hit.setdefault(problem.reason, []).append(index)
    for reason, sentences in hit.items():
        shown = ", ".join(map(str, sentences[:10])) + (", ..." if len(sentences) > 10 else "")
        warnings.warn(f"the vectors of sentence(s) {shown} (counting from 0) are {reason}", RuntimeWarning,
                      stacklevel=3)


def _convert(vectors: np.ndarray | list[np.ndarray], dtype: np.dtype, output: Output):
    """``vectors`` (an array or a list of them) in ``dtype``, as NumPy arrays or CPU tensors."""
    if isinstance(vectors, list):
        return [_convert(array, dtype, output) for array in vectors]
    array = vectors.astype(dtype, copy=False)
    return torch.from_numpy(array) if output == "torch" else array
