"""Peak memory of streaming a file through the embedder does not grow with the number of sentences.

Usage: python benchmarks/streaming_memory.py [--sizes 500 2000 8000]

Each size runs in a fresh process: ``embed_file`` (what ``elmo embed`` runs) writes the top layer of N
synthetic Zipf sentences (benchmarks/inference_speed.py's workload) to HDF5 with the `small` preset, random
weights (memory does not depend on the values). It prints each run's peak RSS (its process's own,
benchmarks/_peak_memory.py) next to the size of the vectors written, which grows with N while the RSS should not.

The N sentences are the same 500 over and over. Peak memory follows the longest batch, and among more fresh
sentences from a long-tailed length law the longest one is longer. Repeating the same ones keeps the longest
batch the same for every N, so any growth that is left comes from N itself.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from _peak_memory import peak_rss_mib


def run_case(n_sentences: int) -> None:
    """In the child: embed ``n_sentences`` into a temporary HDF5 file; print peak RSS MiB and output MiB."""
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from inference_speed import zipf_sentences

    from elmo import BiLM, BiLMConfig
    from elmo.embed_job import EmbedOptions, embed_file
    from elmo.embedder import Embedder

    torch.manual_seed(0)
    embedder = Embedder(BiLM(BiLMConfig.preset("small")))
    with tempfile.TemporaryDirectory() as directory:
        text = Path(directory) / "sentences.txt"
        sentences = zipf_sentences(500)
        lines = [" ".join(sentences[k % len(sentences)]) + "\n" for k in range(n_sentences)]
        text.write_text("".join(lines), encoding="utf-8")
        output = Path(directory) / "vectors.hdf5"
        embed_file(text, output, embedder, EmbedOptions(layers="top"), progress=False)
        written = output.stat().st_size / 2**20
    print(peak_rss_mib(), written)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 8000])
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case is not None:
        run_case(args.case)
        return
    print("streaming embed_file, small preset, top layer: peak RSS by number of sentences")
    print(f"{'sentences':>10} {'peak RSS MiB':>13} {'written MiB':>12}")
    for n in args.sizes:
        result = subprocess.run([sys.executable, __file__, "--case", str(n)], capture_output=True, text=True,
                                check=True)
        rss, written = map(float, result.stdout.split())
        print(f"{n:>10} {rss:>13.0f} {written:>12.1f}")


if __name__ == "__main__":
    main()
