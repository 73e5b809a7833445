"""What the embedding benchmarks share: a sample of a real text as the input file they all embed."""

from pathlib import Path


def first_lines(source: str | Path, n_lines: int, out: Path) -> list[str]:
    """The first ``n_lines`` lines of ``source``, written to ``out`` one a line; returns them."""
    with open(source, encoding="utf-8") as text:
        lines = [line.rstrip("\n") for _, line in zip(range(n_lines), text, strict=False)]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines
