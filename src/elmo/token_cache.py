"""An LRU cache of context-free token vectors, shared across batches.

Exact up to float32 rounding, because the token encoder sees one token at a time: a token's vector is the same in
every sentence, but the products that compute it are blocked by how many tokens come with it, so a cached vector
and one computed afresh in another batch can differ in the last bit (about 6e-8 measured; 3e-7 at the top layer).
When the encoder's weights change (``elmo.modules.weight_changes`` tells), the cache starts empty again. Under
``torch.autocast`` the vectors come out in autocast's type: they are neither read from nor stored in the cache.
Word frequencies are Zipfian, so after a few batches most tokens of real text are hits and the character
CNN, which is most of the FLOPs of a small biLM, runs only for new words.

Memory is bounded in bytes: the vectors are copied into one table of at most ``capacity`` rows, so the
cache holds at most ``max_nbytes`` = capacity x dim x 4 bytes (float32) of vectors, e.g. 9.8 MiB for the
small model's 128-dim token vectors at 20,000 tokens. (Keeping views of each batch's output instead would
pin whole batches for one surviving row.) The table grows by doubling, so it holds less than twice what
its entries need until it is full. A token is keyed by at most the ``max_characters - 2`` bytes the encoder
sees of it, so a long token costs no more than a short one.

Safe to share between threads (one ``Embedder`` serving several): a lock holds each call from its lookup to its
store, so that one call's eviction cannot reuse the rows another call has just looked up or is filling. Misses
are encoded under the lock too, so a token missing from two calls at once is encoded once and stored once.
"""

import threading
from collections import OrderedDict
from collections.abc import Sequence

import torch

from elmo.characters import batch_to_char_ids
from elmo.modules.char_cnn import TokenEncoder
from elmo.modules.weight_changes import WeightsKey, weights_key


class TokenVectorCache:
    """At most ``capacity`` token vectors, least recently used evicted first."""

    def __init__(self, encoder: TokenEncoder, max_characters: int, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity is {capacity}; expected at least 1 token")
        self.encoder = encoder
        self.max_characters = max_characters
        self.capacity = capacity
        self._rows: OrderedDict[str | bytes, int] = OrderedDict()  # key -> row of _table, least recent first
        self._table: torch.Tensor | None = None  # (rows, dim); rows 0 .. len(self) - 1 are in use
        self._weights: WeightsKey | None = None  # the encoder's weights the vectors were computed with
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()  # held by token_vectors for the whole of its lookup, encoding and store

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def nbytes(self) -> int:
        """Bytes of vectors held now."""
        return 0 if self._table is None else self._table.untyped_storage().nbytes()

    @property
    def max_nbytes(self) -> int:
        """Bytes of vectors held when full: the bound."""
        like = self._table if self._table is not None else self.encoder.char_embeddings
        return self.capacity * self.encoder.output_dim * like.element_size()

    def _key(self, token: str) -> str | bytes:
        """Equal keys <=> equal character ids: a token longer than the encoder sees is keyed by what it sees."""
        seen = self.max_characters - 2
        return token if len(token) <= seen else token.encode("utf-8", "ignore")[:seen]

    def token_vectors(self, token_lists: Sequence[Sequence[str]], device: torch.device) -> torch.Tensor:
        """``(n_tokens, dim)``: the vectors of the lists' tokens, end to end."""
        with self._lock:
            return self._vectors_under_lock(token_lists, device)

    def _vectors_under_lock(self, token_lists: Sequence[Sequence[str]], device: torch.device) -> torch.Tensor:
        """``token_vectors``' work, which reads and changes the rows: call it holding ``_lock``."""
        self._forget_if_weights_changed()
        keys = [[self._key(token) for token in tokens] for tokens in token_lists]
        token_of: dict[str | bytes, str] = {}  # one token per distinct key, in order of appearance
        for tokens, token_keys in zip(token_lists, keys, strict=True):
            for token, key in zip(tokens, token_keys, strict=True):
                token_of.setdefault(key, token)
        if not token_of:
            return torch.zeros((0, self.encoder.output_dim), dtype=self.encoder.char_embeddings.dtype, device=device)
        # Under autocast a stored vector would be rounded for every later call, and a float32 one read as it is
        cached = not torch.is_autocast_enabled(device.type)
        found = [key for key in token_of if cached and key in self._rows]
        missing = [key for key in token_of if not (cached and key in self._rows)]
        self.hits += len(found)
        self.misses += len(missing)

        parts = []
        if found:
            assert self._table is not None
            rows = torch.tensor([self._rows[key] for key in found], device=self._table.device)
            parts.append(self._table[rows].to(device))  # a copy: the table can change below
            for key in found:
                self._rows.move_to_end(key)
        if missing:
            char_ids = batch_to_char_ids([[token_of[key] for key in missing]], self.max_characters)[0]
            new_vectors = self.encoder(char_ids.to(device))
            parts.append(new_vectors)
            if cached:
                self._store(missing, new_vectors)
        table = torch.cat(parts) if len(parts) > 1 else parts[0]
        row_of = {key: row for row, key in enumerate(found + missing)}
        index = torch.tensor([row_of[key] for token_keys in keys for key in token_keys], dtype=torch.long)
        return table[index.to(table.device)]

    def _forget_if_weights_changed(self) -> None:
        weights = weights_key(self.encoder.parameters())
        if weights != self._weights or weights is None:
            self._rows.clear()
            self._weights = weights
            if self._table is not None and self._table.dtype != self.encoder.char_embeddings.dtype:
                self._table = None  # the weights' dtype changed: the old table would round the new vectors

    def _store(self, keys: list[str | bytes], vectors: torch.Tensor) -> None:
        """Copy the newest ``capacity`` of ``vectors`` into the table, evicting the least recently used. Interrupted
        (Ctrl-C, no memory for a larger table), it forgets every row: the rows it had taken from evicted keys would
        otherwise be held by no key, and the next store would write over a row a key still reads."""
        try:
            self._store_rows(keys, vectors)
        except BaseException:
            self._rows.clear()
            raise

    def _store_rows(self, keys: list[str | bytes], vectors: torch.Tensor) -> None:
        keys, vectors = keys[-self.capacity :], vectors[-self.capacity :]
        start = len(self._rows)
        fresh = min(len(keys), self.capacity - start)
        rows = list(range(start, start + fresh))
        rows += [self._rows.popitem(last=False)[1] for _ in range(len(keys) - fresh)]
        # Inference mode whatever the caller's: a table made there may only be written there.
        with torch.inference_mode():
            self._reserve(start + fresh, vectors)
            assert self._table is not None
            self._table[torch.tensor(rows, device=self._table.device)] = vectors.detach().to(self._table)
        self._rows.update(zip(keys, rows, strict=True))

    def _reserve(self, n_rows: int, like: torch.Tensor) -> None:
        have = 0 if self._table is None else len(self._table)
        if n_rows <= have:
            return
        table = like.new_empty((min(self.capacity, max(n_rows, 2 * have)), like.shape[1]),
                               dtype=self.encoder.char_embeddings.dtype)
        if self._table is not None:
            table[:have] = self._table
        self._table = table
