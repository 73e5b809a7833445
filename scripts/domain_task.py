"""The labelled domain tasks of docs/domain.md, a general model against the one adapted to the domain:

- ``zh-law-branches``: an article of a PRC law in force -> its law's branch of law (部门法, 8 classes;
  ``elmo.tasks.packaged.law_branches``), ``zh`` against ``zh`` adapted on ``zh-law``;
- ``en-license-categories``: a license notice -> its license's category (Permissive, Copyleft, ...;
  ``elmo.tasks.packaged.license_categories``), ``en`` against ``en`` adapted on ``en-licenses``.

Each run is ``elmo task train classifier`` itself (elmo-mix, the flags of docs/results.md's classifiers), seeds
0-2 unless ``--seeds`` says otherwise; the table gives test accuracy, mean and standard deviation over the seeds,
and the majority-class baseline.

    python scripts/domain_task.py --task zh-law-branches --model general=zh --model adapted=domain/zh-adapted \
        --work domain/task

Resumable: a finished run (its metrics.json) is kept on a rerun when its ``inputs.sha256`` (``run_tasks``'
digest: the command, MAX_WORDS and TRAIN_FLAGS included, and the data files' content) is that of the run asked
for, and trained again otherwise; the data files are written afresh from the task each time, so a changed split
reaches them and, through the digest, the runs. A folder made for another task, sizes or model (by fingerprint)
is refused rather than reused. Test is whole; train and dev are subsampled (``--train-size``, ``--dev-size``,
``random.Random(0)``) to fit CPU time.
"""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from run_tasks import INPUTS_DIGEST, TRAIN_FLAGS, inputs_digest, mean_std, percent  # a script beside this one

from elmo.command_line import positive_int
from elmo.embedder import Embedder
from elmo.tasks.data import read_labelled, split, write_labelled
from elmo.tasks.packaged import law_branches, license_categories

MAX_WORDS = 64  # an example's first 64 words (median article: 90 characters; median notice: 30 words)
TASKS = {"zh-law-branches": law_branches, "en-license-categories": license_categories}


def check_made_with(record: Path, made_with: dict) -> None:
    """Write ``made_with`` to ``record``, or refuse when ``record`` says its folder was made with something else:
    a rerun reuses what the folder holds, which must be of this task and model."""
    if record.is_file():
        before = json.loads(record.read_text(encoding="utf-8"))
        if before != made_with:
            sys.exit(f"{record.parent} was made with {before}, not {made_with}: give another --work (or model label)")
        return
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(made_with) + "\n", encoding="utf-8")


def write_data(task: str, work: Path, train_size: int, dev_size: int) -> dict[str, Path]:
    """The task's train, dev and test files, written from the task as it is now: files of an older split are not
    kept, and a run on them is trained again (``run``'s digest covers their content)."""
    paths = {name: work / "data" / f"{name}.tsv" for name in ("train", "dev", "test")}
    check_made_with(work / "data" / "made-with.json", {"task": task, "train_size": train_size, "dev_size": dev_size})
    splits = TASKS[task]()
    sizes = {"train": train_size, "dev": dev_size, "test": len(splits["test"])}
    paths["train"].parent.mkdir(parents=True, exist_ok=True)
    for name, path in paths.items():
        rows = split(splits[name], [min(sizes[name], len(splits[name]))], seed=0)[0]
        write_labelled(path, rows)
        print(f"{name}: {len(rows)} of {len(splits[name])} examples, {dict(Counter(label for label, _ in rows))}")
    return paths


def run(label: str, model: str, seed: int, paths: dict[str, Path], work: Path) -> dict:
    """One seed's ``elmo task train classifier`` and its metrics; a finished run is reused only when it was run on
    the same command and data files (``INPUTS_DIGEST``), so neither changed flags nor a new split leave old figures
    in the table."""
    from elmo.cli import main

    out = work / "runs" / label / f"seed-{seed}"
    argv = ["task", "train", "classifier", *(item for name, path in paths.items() for item in (f"--{name}", str(path))),
            "--model", model, "--elmo", "mix", "--static", "none", "--max-words", str(MAX_WORDS),
            *TRAIN_FLAGS["classifier"], "--cache", str(work / "features" / label), "--seed", str(seed),
            "--out", str(out), "--quiet"]
    inputs = inputs_digest(argv)
    digest = out / INPUTS_DIGEST
    if (out / "metrics.json").is_file() and digest.is_file() and digest.read_text(encoding="utf-8") == inputs:
        return json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    # Neither record of an earlier run may outlive this one's start: a run that fails or is killed after writing
    # its metrics.json would otherwise pass, beside the old digest, for a finished run of the old inputs.
    for record in (out / "metrics.json", digest):
        record.unlink(missing_ok=True)
    print("elmo " + " ".join(argv), flush=True)
    if main(argv) != 0:
        sys.exit(f"{label} seed {seed} failed")
    digest.write_text(inputs, encoding="utf-8")
    return json.loads((out / "metrics.json").read_text(encoding="utf-8"))


def majority_accuracy(paths: dict[str, Path]) -> tuple[str, float]:
    label = Counter(label for label, _ in read_labelled(paths["train"])).most_common(1)[0][0]
    test = [gold for gold, _ in read_labelled(paths["test"])]
    return label, sum(gold == label for gold in test) / len(test)


def labelled_model(text: str) -> tuple[str, str]:
    """``LABEL=MODEL`` as (label, model); argparse names the argument at fault when it is not that."""
    label, equals, model = text.partition("=")
    if not (label and equals and model):
        raise argparse.ArgumentTypeError(f"{text!r} is not LABEL=MODEL (for example general=en)")
    return label, model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), required=True)
    parser.add_argument("--model", action="append", required=True, type=labelled_model, metavar="LABEL=MODEL",
                        help="a model to compare (shipped name or model directory), repeatable, each label once")
    parser.add_argument("--work", type=Path, required=True, help="data, features, runs and results.json")
    parser.add_argument("--train-size", type=positive_int, default=3000, help="training examples drawn")
    parser.add_argument("--dev-size", type=positive_int, default=500, help="development examples drawn")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="each once")
    args = parser.parse_args(argv)
    # A label given twice would keep only its last model; a seed given twice would count one run twice (and
    # shrink the standard deviation).
    for flag, values in (("--model label", [label for label, _ in args.model]), ("--seeds", args.seeds)):
        repeated = sorted({value for value in values if values.count(value) > 1})
        if repeated:
            parser.error(f"{flag} {', '.join(map(str, repeated))} given more than once")
    models = dict(args.model)
    paths = write_data(args.task, args.work, args.train_size, args.dev_size)
    for label, model in models.items():
        check_made_with(args.work / "runs" / label / "made-with.json",
                        {"model": model, "fingerprint": Embedder.load(model).fingerprint})
    results = {label: [run(label, model, seed, paths, args.work)["test"] for seed in args.seeds]
               for label, model in models.items()}
    majority, baseline = majority_accuracy(paths)
    (args.work / "results.json").write_text(json.dumps({"task": args.task, "models": models, "seeds": args.seeds,
                                                        "test_accuracy": results, "majority": [majority, baseline]},
                                                       indent=1) + "\n")
    print(f"| model | test accuracy, mean ± std ({len(args.seeds)} seeds) | runs |\n|---|---|---|")
    for label, accuracies in results.items():
        print(f"| {label} (`{models[label]}`) | {percent(mean_std(accuracies))} | "
              f"{', '.join(f'{100 * a:.2f}' for a in accuracies)} |")
    print(f"| majority class ({majority}) | {100 * baseline:.2f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
