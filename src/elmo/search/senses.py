"""A word's occurrences in an indexed corpus, clustered into senses and drawn as a 2-D map.

Clustering is scikit-learn's k-means on the unit vectors (so it groups by cosine); without a given number of
clusters, the one of 2..``max_clusters`` with the best silhouette is taken. The map is a PCA projection.
"""

import functools
import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from elmo.files import atomic_path, check_output_file
from elmo.layer_choice import LayerChoice
from elmo.search.errors import SearchError
from elmo.search.index import ContextIndex, Occurrence

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

MIN_OCCURRENCES = 3  # fewer uses than this are not clustered into senses
# The fonts the map is drawn in, those installed tried in turn for each character (matplotlib falls back glyph by
# glyph): DejaVu Sans, which matplotlib ships, has no CJK characters, so a Chinese map would be all boxes.
FONT_FALLBACK = ("DejaVu Sans", "Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC", "WenQuanYi Zen Hei",
                 "WenQuanYi Micro Hei", "Droid Sans Fallback", "Microsoft YaHei", "PingFang SC", "Arial Unicode MS")


@dataclass(frozen=True)
class Senses:
    """``labels[i]`` is the cluster of occurrence ``rows[i]``; ``points`` ``(n, 2)`` their PCA projection;
    ``examples[c]`` the occurrence nearest cluster ``c``'s centre, ``sizes[c]`` how many it holds.
    ``total_occurrences``: how many indexed uses the word has; ``rows`` are a random sample of them when that is
    more than ``max_occurrences`` (``sampled``), else all of them."""

    word: str
    layer: str
    rows: np.ndarray
    labels: np.ndarray
    points: np.ndarray
    examples: list[Occurrence]
    sizes: list[int]
    silhouette: float | None  # None where it is undefined: one cluster, or every use a cluster of its own
    total_occurrences: int

    @property
    def sampled(self) -> bool:
        """Whether ``rows`` are a random sample of the word's uses rather than all of them."""
        return len(self.rows) < self.total_occurrences


MAX_OCCURRENCES = 2000  # occurrences clustered at most (a random sample of them beyond): the CLI's and the service's


def senses(index: ContextIndex, word: str, clusters: int | None = None, layer: LayerChoice | str | None = None,
           max_occurrences: int = MAX_OCCURRENCES, max_clusters: int = 6, seed: int = 0) -> Senses:
    """Cluster the indexed occurrences of ``word`` (ignoring case; a random ``max_occurrences`` of them if more).

    SearchError ``too_few_occurrences`` (field ``word``) if the word has fewer than 3 uses; naming
    ``max_occurrences`` if that is under 3 (a sample of fewer uses would pass the rule); naming ``clusters``
    if that is more than its uses (after sampling) or than their distinct vectors (uses in identical contexts
    have identical vectors: k-means cannot split them)."""
    if max_occurrences < MIN_OCCURRENCES:
        raise SearchError(f"max_occurrences {max_occurrences}: expected at least {MIN_OCCURRENCES} (senses are found "
                          f"among at least {MIN_OCCURRENCES} uses)", "max_occurrences")
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA
    from sklearn.metrics import silhouette_score

    name = index.layer(layer)
    rows = index.rows_of(word)
    if len(rows) < MIN_OCCURRENCES:
        raise SearchError(f"{word!r} occurs {len(rows)} time(s) among the indexed tokens; at least "
                          f"{MIN_OCCURRENCES} are needed "
                          "to find senses", "word", SearchError.TOO_FEW_OCCURRENCES)
    total_occurrences = len(rows)
    if len(rows) > max_occurrences:
        rows = np.sort(np.random.default_rng(seed).choice(rows, max_occurrences, replace=False))
    if clusters is not None and not 1 <= clusters <= len(rows):
        raise SearchError(f"clusters {clusters}: expected 1..{len(rows)} (the occurrences of {word!r})", "clusters")
    vectors = np.asarray(index.vectors(name)[rows], dtype=np.float64)
    distinct = len(np.unique(vectors, axis=0))  # k-means cannot make more clusters than distinct points
    if clusters is not None and clusters > distinct:
        raise SearchError(f"clusters {clusters}: the {len(rows)} uses of {word!r} have {distinct} distinct "
                          f"vector(s) in {name} (uses in identical contexts are identical), so at most {distinct} "
                          "cluster(s)", "clusters")
    most = min(max_clusters, distinct, len(rows) - 1)
    candidates = [clusters] if clusters is not None else range(2, most + 1) if most >= 2 else [1]
    fits = []
    for n_clusters in candidates:
        fitted = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit(vectors)
        found = len(set(fitted.labels_))
        fits.append((silhouette_score(vectors, fitted.labels_, metric="cosine") if 1 < found < len(rows) else None,
                     fitted))
    score, model = max(fits, key=lambda fit: -1.0 if fit[0] is None else fit[0])  # the first of equal scores
    labels = model.labels_
    # identical uses have no direction to project onto: they sit at the origin
    flat = np.zeros((len(rows), 2))
    points = PCA(n_components=2, random_state=seed).fit_transform(vectors) if distinct > 1 else flat
    examples, sizes = [], []
    for cluster in range(model.n_clusters):
        members = np.flatnonzero(labels == cluster)
        distances = np.linalg.norm(vectors[members] - model.cluster_centers_[cluster], axis=1)
        examples.append(index.occurrence(int(rows[members[np.argmin(distances)]])))
        sizes.append(len(members))
    return Senses(word, name, rows, labels, points, examples, sizes, None if score is None else float(score),
                  total_occurrences)


def occurrences_text(result: Senses) -> str:
    """How many uses were clustered, as the map and the command print it."""
    if result.sampled:
        return f"{len(result.rows)} of {result.total_occurrences} occurrences (a random sample)"
    return f"{len(result.rows)} occurrences"


def silhouette_text(result: Senses) -> str:
    """The silhouette as the map and the command print it."""
    return "silhouette undefined" if result.silhouette is None else f"silhouette {result.silhouette:.2f}"


def png_path(path: str | Path) -> Path:
    """``path`` if its name ends in ``.png`` and a file can be written there (its missing folders are made);
    SearchError (field ``out``) or ValueError otherwise, before any work: matplotlib would add ``.png`` to a name
    without a suffix, or write another format for another suffix, and the file reported would not be the one
    written. The one check of ``elmo senses`` and ``elmo demo``."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise SearchError(f"{path}: the map is a PNG; give a file name ending in .png", "out")
    check_output_file(path, "--out")
    return path


def save_png(figure: "Figure", path: Path, dpi: int) -> None:
    """``figure`` as a PNG at ``path``, written beside it and renamed onto it once whole (``atomic_path``): a run
    stopped mid-write (Ctrl-C, a full disk) leaves the PNG that was there, not a stub no image reader opens. The
    write of ``elmo senses`` and ``elmo demo``; ``format`` is given as the partial file's name ends in .partial."""
    with atomic_path(path) as partial:
        figure.savefig(partial, dpi=dpi, format="png")


def plot_senses(result: Senses, path: str | Path, width: int = 90) -> Path:
    """A PNG: the occurrences' 2-D projection coloured by cluster, and each cluster's example sentence.

    Characters no installed font of ``FONT_FALLBACK`` has are drawn as boxes and named in one logged warning
    (instead of matplotlib's warning per glyph)."""
    path = png_path(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_clusters = len(result.sizes)
    title = (f"{result.word!r}: {occurrences_text(result)}, {result.layer}, "
             f"{n_clusters} clusters ({silhouette_text(result)})")
    notes_text = [f"sense {cluster + 1}: {_window(example, width)}" for cluster, example in enumerate(result.examples)]
    fonts = _installed_fonts()
    missing = _characters_without_font(title + "".join(notes_text), fonts)
    if missing:
        log.warning("the sense map of %r draws %d character(s) as boxes (%s%s): no installed font has them; "
                    "install one that does (for Chinese or Japanese, e.g. Debian's fonts-noto-cjk)", result.word,
                    len(missing), "".join(missing[:20]), "..." if len(missing) > 20 else "")
    with matplotlib.rc_context({"font.family": fonts}), warnings.catch_warnings():
        if missing:
            warnings.filterwarnings("ignore", r"Glyph \d+ .* missing from font", UserWarning)
        figure, (scatter, notes) = plt.subplots(2, 1, figsize=(10, 7 + 0.45 * n_clusters),
                                                gridspec_kw={"height_ratios": [4, 0.4 + 0.35 * n_clusters]})
        colours = plt.get_cmap("tab10")
        for cluster in range(n_clusters):
            members = result.labels == cluster
            scatter.scatter(result.points[members, 0], result.points[members, 1], s=14, alpha=0.7,
                            color=colours(cluster % 10), label=f"sense {cluster + 1} ({result.sizes[cluster]})")
        scatter.set_title(title)
        scatter.set_xlabel("PCA 1")
        scatter.set_ylabel("PCA 2")
        scatter.legend(loc="best", fontsize=8)
        notes.axis("off")
        for cluster, text in enumerate(notes_text):
            notes.text(0.0, 1.0 - cluster / max(n_clusters, 1), text, va="top", fontsize=8,
                       color=colours(cluster % 10), transform=notes.transAxes)
        figure.tight_layout()
        try:
            save_png(figure, path, dpi=110)
        finally:
            plt.close(figure)
    return path


def _installed_fonts() -> list[str]:
    """The families of ``FONT_FALLBACK`` that matplotlib finds (naming one it lacks logs a warning per lookup)."""
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    return [name for name in FONT_FALLBACK if name in installed]


def _characters_without_font(text: str, fonts: Sequence[str]) -> list[str]:
    """The distinct characters of ``text`` (spaces aside) that none of ``fonts`` has a glyph for, sorted."""
    return sorted({character for character in text if not character.isspace()
                   and not any(ord(character) in _code_points(name) for name in fonts)})


@functools.cache
def _code_points(font_name: str) -> frozenset[int]:
    """The characters ``font_name`` has glyphs for, read once a process: a CJK font file runs to tens of MB, and
    the service draws a map per request."""
    from matplotlib import font_manager, ft2font

    font_file = font_manager.findfont(font_manager.FontProperties(family=font_name), fallback_to_default=False)
    return frozenset(ft2font.FT2Font(font_file).get_charmap())


def _window(occurrence: Occurrence, width: int) -> str:
    """The example's tokens around the matched one (marked), cut to about ``width`` characters."""
    tokens = list(occurrence.tokens)
    tokens[occurrence.token_index] = f"[{tokens[occurrence.token_index]}]"
    left, right = occurrence.token_index, occurrence.token_index + 1
    while (left > 0 or right < len(tokens)) and len(" ".join(tokens[left:right])) < width:
        if left > 0:
            left -= 1
        if right < len(tokens):
            right += 1
    return ("... " if left else "") + " ".join(tokens[left:right]) + (" ..." if right < len(tokens) else "")
