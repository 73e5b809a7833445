"""A real ``elmo train`` run, steps and validations apart: the steps' tokens/s, each validation's wall time, page
faults and kernel time, the rest's, and the peak RSS, for one or more checkouts' ``src`` side by side.

    python benchmarks/train_validation.py --src /tmp/before/src src --repeats 2 -- \\
        --init-from en --tokenizer whitespace --corpus en-large/train.txt --valid valid-1500.txt \\
        --vocab src/elmo/models/en/vocab.txt --batch-size 512 --unroll-steps 20 --precision bfloat16 \\
        --negatives 1024 --seed 11 --max-steps 30 --valid-every 15 --valid-batch-size 256

Everything after ``--`` goes to ``elmo train`` as given (``--out``, ``--quiet``, ``--log-every 1`` and a checkpoint
interval past the run's end are added). Each run is a process of its own (so its peak RSS is its own), with
``PYTHONPATH`` set to the checkout's ``src``; the runs alternate between checkouts in each repeat. Made for the
page-fault costs of large tensors (docs/training.md, "Large blocks from the heap"): page faults and kernel time are
what moved there. Pin the whole run to a core (``taskset``) and leave it alone: the figures are wall times.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _peak_memory import peak_rss_mib


def usage() -> tuple[float, int, float]:
    """(wall seconds, minor page faults, kernel seconds) of this process so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), own.ru_minflt, own.ru_stime


def run_child(train_arguments: list[str], out: Path) -> dict:
    """``elmo train`` in this process with each validation timed; the figures of the run."""
    import elmo.training.trainer as trainer
    from elmo.cli import main

    validate = trainer._validate
    validations = [0.0, 0, 0.0]

    def timed_validate(*arguments, **keywords) -> None:
        before = usage()
        validate(*arguments, **keywords)
        for k, (now, then) in enumerate(zip(usage(), before, strict=True)):
            validations[k] += now - then

    trainer._validate = timed_validate
    start = usage()
    status = main(["train", *train_arguments, "--out", str(out), "--quiet", "--log-every", "1",
                   "--checkpoint-every", "1000000"])
    if status != 0:
        raise SystemExit(f"elmo train exited with {status}")
    whole = [now - then for now, then in zip(usage(), start, strict=True)]
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    steps = [record["tokens_per_s"] for record in records if "tokens_per_s" in record and record["step"] > 2]
    return {"tokens_per_s": statistics.median(steps),
            "valid_perplexity": [record["valid_perplexity"] for record in records if "valid_perplexity" in record],
            "validation": validations, "rest": [w - v for w, v in zip(whole, validations, strict=True)],
            "wall": whole[0], "peak_rss_gib": peak_rss_mib() / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", nargs="+", type=Path, required=True, help="checkouts' src directories to compare")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("train", nargs=argparse.REMAINDER, help="-- then elmo train's arguments")
    args = parser.parse_args()
    train_arguments = args.train[1:] if args.train[:1] == ["--"] else args.train
    if args.child:
        with tempfile.TemporaryDirectory() as directory:
            print(json.dumps(run_child(train_arguments, Path(directory) / "run")))
        return
    results: dict[Path, list[dict]] = {src: [] for src in args.src}
    for _ in range(args.repeats):
        for src in args.src:
            done = subprocess.run([sys.executable, __file__, "--src", str(src), "--child", "--", *train_arguments],
                                  env={**os.environ, "PYTHONPATH": str(src.resolve())}, capture_output=True,
                                  text=True)
            if done.returncode != 0:
                raise SystemExit(f"{src}: {done.stderr[-3000:]}")
            results[src].append(json.loads(done.stdout.splitlines()[-1]))
    first = args.src[0]
    print("| src | tokens/s of the steps | validations: wall s, page faults M, kernel s | the rest: page faults M, "
          "kernel s | whole run, s | peak RSS GiB | validation perplexities |")
    print("|---|---|---|---|---|---|---|")
    for src, runs in results.items():
        for k, run in enumerate(runs):
            ratio = run["tokens_per_s"] / results[first][k]["tokens_per_s"]
            wall, faults, kernel = run["validation"]
            print(f"| {src} | {run['tokens_per_s']:,.0f} ({ratio:.2f}x) | {wall:.1f}, {faults / 1e6:.2f}, {kernel:.1f} "
                  f"| {run['rest'][1] / 1e6:.2f}, {run['rest'][2]:.1f} | {run['wall']:.1f} | {run['peak_rss_gib']:.2f} "
                  f"| {', '.join(f'{p:.4f}' for p in run['valid_perplexity'])} |")


if __name__ == "__main__":
    main()
