"""An LRU cache of context-free token vectors, shared across batches.

Exact, because the token encoder sees one token at a time: a token's vector is the same in every sentence.
Word frequencies are Zipfian, so after a few batches most tokens of real text are hits and the character
CNN, which is most of the FLOPs of a small biLM, runs only for new words.
"""

from collections import OrderedDict
from collections.abc import Sequence

import torch

from elmo.characters import batch_to_char_ids
from elmo.modules.char_cnn import TokenEncoder


class TokenVectorCache:
    def __init__(self, encoder: TokenEncoder, max_characters: int, capacity: int) -> None:
        self.encoder = encoder
        self.max_characters = max_characters
        self.capacity = capacity
        self._vectors: OrderedDict[str, torch.Tensor] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._vectors)

    def token_vectors(self, token_lists: Sequence[Sequence[str]], device: torch.device) -> torch.Tensor:
        """``(n_tokens, dim)``: the vectors of the lists' tokens, end to end."""
        distinct = list(dict.fromkeys(token for tokens in token_lists for token in tokens))
        missing = [token for token in distinct if token not in self._vectors]
        self.misses += len(missing)
        self.hits += len(distinct) - len(missing)
        batch_vectors = {token: self._vectors[token] for token in distinct if token in self._vectors}
        if missing:
            char_ids = batch_to_char_ids([missing], self.max_characters)[0].to(device)
            batch_vectors.update(zip(missing, self.encoder(char_ids), strict=True))
        for token in distinct:  # most recently used last; evict from the front
            self._vectors[token] = batch_vectors[token]
            self._vectors.move_to_end(token)
        while len(self._vectors) > self.capacity:
            self._vectors.popitem(last=False)

        if not distinct:
            return torch.zeros((0, self.encoder.output_dim), device=device)
        table = torch.stack([batch_vectors[token] for token in distinct])
        row_of = {token: row for row, token in enumerate(distinct)}
        index = torch.tensor([row_of[token] for tokens in token_lists for token in tokens], dtype=torch.long)
        return table[index.to(device)]
