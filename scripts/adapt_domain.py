"""Measure a model before and after domain adaptation (docs/domain.md): held-out perplexity on the domain's text
and on general text, the same words in domain and general sentences (triplet rate, nearest-neighbour agreement),
the polysemy set, and the nearest words of a few words used in domain sentences.

    python scripts/adapt_domain.py measure --model en --text licenses=DIR/test.txt --text general=EN/test.txt \
        --senses-domain DIR/test.txt --senses-general EN/test.txt --out before.json
    python scripts/adapt_domain.py measure --model ADAPTED --reference-vocab en ... --out after.json
    python scripts/adapt_domain.py table before.json after.json

Perplexity over two vocabularies. An adapted model's vocabulary holds the words the domain added, so its own
perplexity counts each of them as a word to predict where the general model had ``<UNK>``: not the same task.
``--reference-vocab`` also computes it over the reference model's vocabulary (the general model's, all of whose
words the adapted one holds): a target outside it counts as ``<UNK>``, and the model's probability of ``<UNK>`` is
that of ``<UNK>`` plus every added word. For the general model itself both figures are the same.

Same word, two kinds of text: for each word, its first occurrences in the domain's held-out sentences and in
general held-out sentences (at most ``--per-side`` of each; the word in lower case, as a whole token). The
"sense" of an occurrence is which text it came from, so the triplet rate says how well a layer separates a
word's domain uses from its general ones: a proxy for the sense shift, not sense labels.
"""

# ruff: noqa: RUF001  (Chinese sentences use full-width commas)
import argparse
import hashlib
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from elmo.bilm import BiLMState
from elmo.command_line import positive_int
from elmo.embedder import Embedder
from elmo.files import sha256_of
from elmo.fingerprint import model_fingerprint
from elmo.modules.bidirectional import run_directions
from elmo.polysemy import SenseSentence, evaluate_model, nn_agreement, triplet_rate, vectors_by_sense, word_vectors
from elmo.training.batches import NO_TARGET, Batcher
from elmo.training.corpus import Corpus
from elmo.training.export import load_language_model, resolve_model
from elmo.training.language_model import LanguageModel
from elmo.training.vocab import Vocabulary

# Words whose everyday sense and domain sense differ, each to occur in both held-out texts (en: a political party /
# a party to the agreement, a piece of work / the copyrighted Work, ...; zh: 承诺 a promise / the acceptance of an
# offer, 单位 a unit / an entity that can commit a crime, 行为 behaviour / a legal act, ...).
SENSE_WORDS = {
    "en": ("party", "work", "source", "notice", "grant", "terms", "distribution", "title", "consideration", "form",
           "object", "interest", "express", "copy", "program", "free", "license", "agreement"),
    "zh": ("行为", "责任", "承诺", "执行", "权利", "义务", "申请", "决定", "规定", "条件", "期间", "当事人", "单位",
           "机关", "程序", "组织", "意见", "履行"),
}
# A word with fewer uses than this in either held-out text is left out of the same-word measures.
MIN_PER_SIDE = 5
# Queries for the nearest-words table: (word, a sentence of domain text that uses it, tokenized as the corpus).
NEIGHBOUR_QUERIES = {
    "en": (
        ("party", "Each party shall bear its own costs in connection with this Agreement ."),
        ("work", "You may reproduce and distribute copies of the Work in any medium ."),
        ("source", "You must make the source code of your modifications available to the recipients ."),
        ("notice", "You must retain this notice in all copies of the Software ."),
        ("consideration", "In consideration of the mutual promises herein , the parties agree as follows ."),
        ("title", "Title to the Software remains with the Licensor at all times ."),
    ),
    "zh": (
        ("处分", "当事人 有权 依法 处分 自己 的 财产 。"),
        ("承诺", "承诺 应当 在 要约 确定 的 期限内 到达 要约 人 。"),
        ("单位", "单位 犯罪 的 ， 对 单位 判处 罚金 。"),
        ("行为", "代理人 在 代理 权限 内 ， 以 被代理人 的 名义 实施 民事法律 行为 。"),
        ("履行", "债务人 不 履行 到期 债务 时 ， 债权人 有权 就 该 财产 优先 受偿 。"),
        ("决定", "当事人 对 行政处罚 决定 不服 的 ， 可以 依法 申请 行政复议 。"),
    ),
}


def perplexities(model: LanguageModel, vocab: Vocabulary, reference: Vocabulary, corpus: Corpus,
                 batch_size: int = 32, unroll_steps: int = 20) -> dict[str, Any]:
    """Full-softmax perplexity of ``corpus`` over the model's own vocabulary and over ``reference``'s words
    (module docstring). The evaluation path of ``LanguageModel.forward`` (and ``perplexity.evaluate``'s
    batching), with both figures taken from the same logits."""
    batcher = Batcher(corpus, vocab, range(batch_size), batch_size, unroll_steps, seed=0, max_epochs=1,
                      max_characters=model.config.char_cnn.max_characters_per_token, pad=True)
    model.eval()
    state = model.bilm.zero_state(batch_size)
    unk = vocab.unk_id
    # <UNK> of the reference: <UNK> itself and every word the reference lacks.
    as_unk = torch.tensor([token not in reference.ids or index == unk for index, token in enumerate(vocab.tokens)])
    nll = torch.zeros(2, 2, dtype=torch.float64)  # (own, reference) x (forward, backward)
    n_targets = n_beyond = 0
    with torch.no_grad():
        while (inputs := batcher.next_batch()) is not None:
            n_rows, n_steps = inputs.forward_tokens.shape
            token_vectors = model.bilm.token_encoder(inputs.char_ids)
            positions = torch.stack([inputs.forward_tokens.T.reshape(-1), inputs.backward_tokens.T.reshape(-1)])
            targets = torch.stack([inputs.forward_targets.T.reshape(-1), inputs.backward_targets.T.reshape(-1)])
            run = run_directions(model.bilm.forward_lstm, model.bilm.backward_lstm, token_vectors[positions],
                                 [n_rows] * n_steps, state.h, state.c)
            state = BiLMState(run.h, run.c)
            for direction in (0, 1):
                real = targets[direction] != NO_TARGET
                target = targets[direction][real]
                logits = F.linear(run.layers[-1][direction][real], model.softmax_weight, model.softmax_bias)
                normalizer = torch.logsumexp(logits, dim=-1)
                target_logit = logits.gather(1, target[:, None]).squeeze(1)
                beyond = as_unk[target] & (target != unk)
                unk_class = torch.logsumexp(logits[:, as_unk], dim=1)
                reference_logit = torch.where(as_unk[target], unk_class, target_logit)
                nll[0, direction] += (normalizer - target_logit).double().sum()
                nll[1, direction] += (normalizer - reference_logit).double().sum()
                if direction == 0:
                    n_targets += int(real.sum())
                    n_beyond += int(beyond.sum())
    batcher.close()
    mean = (nll / n_targets).tolist()

    def figures(row: list[float]) -> dict[str, float]:
        return {"forward": math.exp(row[0]), "backward": math.exp(row[1]), "average": math.exp(sum(row) / 2)}

    return {"tokens": n_targets, "targets_beyond_reference": n_beyond, "own": figures(mean[0]),
            "reference": figures(mean[1])}


def sense_sentences(domain_file: Path, general_file: Path, words: Sequence[str], per_side: int,
                    min_per_side: int = MIN_PER_SIDE) -> list[SenseSentence]:
    """Each word's first ``per_side`` uses in each file (one sentence a line, already tokenized), as sense
    ``domain`` / ``general``; a word with fewer than ``min_per_side`` uses on either side is left out."""
    sides = {"domain": domain_file.read_text(encoding="utf-8").splitlines(),
             "general": general_file.read_text(encoding="utf-8").splitlines()}
    sentences: list[SenseSentence] = []
    for word in words:
        found: dict[str, list[SenseSentence]] = {}
        for sense, lines in sides.items():
            found[sense] = []
            for line in lines:
                tokens = line.split()
                if word in tokens and len(tokens) <= 60:  # lowercase uses only (docs/domain.md says why it matters)
                    found[sense].append(SenseSentence(word, sense, line, tuple(tokens), tokens.index(word)))
                    if len(found[sense]) == per_side:
                        break
        if all(len(uses) >= min_per_side for uses in found.values()):
            sentences += found["domain"] + found["general"]
    return sentences


def nearest_words(embedder: Embedder, pool: list[list[str]], queries: Sequence[tuple[str, str]], layer: int,
                  k: int) -> dict[str, list[str]]:
    """For each (word, sentence), the ``k`` distinct words (other than the word itself, any case) of ``pool``
    whose vectors at ``layer`` are nearest (cosine) to the word's vector in the sentence."""
    pool_vectors = np.concatenate([vectors[layer] for vectors in embedder.embed(pool, "all")])
    pool_tokens = [token for sentence in pool for token in sentence]
    pool_unit = pool_vectors / np.linalg.norm(pool_vectors, axis=1, keepdims=True)
    result = {}
    for word, sentence in queries:
        tokens = sentence.split()
        position = [token.lower() for token in tokens].index(word)
        vector = embedder.embed([tokens], "all")[0][layer][position]
        order = np.argsort(-(pool_unit @ (vector / np.linalg.norm(vector))))
        neighbours: list[str] = []
        for index in order:
            token = pool_tokens[index]
            if token.lower() != word and token not in neighbours:
                neighbours.append(token)
                if len(neighbours) == k:
                    break
        result[word] = neighbours
    return result


def weights_identity(model: LanguageModel, vocab: Vocabulary) -> dict[str, str]:
    """What the figures read of the model besides its name, as it is now: the biLM's fingerprint
    (``elmo.fingerprint``, as ``Embedder.fingerprint`` gives it) and a sha256 of its vocabulary and softmax. A name
    (a shipped model, a directory) may hold other weights by the next run."""
    softmax = hashlib.sha256(vocabulary_sha256(vocab).encode("ascii"))
    for tensor in (model.softmax_weight, model.softmax_bias):
        softmax.update(tensor.detach().to(torch.float32).contiguous().numpy().tobytes())
    return {"model_fingerprint": model_fingerprint(model.bilm), "softmax_sha256": softmax.hexdigest()}


def vocabulary_sha256(vocab: Vocabulary) -> str:
    return hashlib.sha256("\n".join(vocab.tokens).encode("utf-8")).hexdigest()


def text_files(args: argparse.Namespace) -> dict[str, str]:
    """Each text file the figures read, by the flag that names it."""
    return {**{f"--text {label}": path for label, path in args.text}, "--senses-domain": args.senses_domain,
            "--senses-general": args.senses_general}


def measured_with(args: argparse.Namespace, identity: dict[str, str], reference: Vocabulary) -> dict[str, Any]:
    """What shapes the figures: the arguments, the model's weights as they are now (``identity``: see
    ``weights_identity``), the reference vocabulary and the content of each text. A rerun keeps the parts already
    measured only when all of them match."""
    return {"model": args.model, **identity, "reference_vocab": args.reference_vocab,
            "reference_vocab_sha256": vocabulary_sha256(reference) if args.reference_vocab else None,
            "text": [f"{label}={path}" for label, path in args.text], "language": args.language,
            "senses_domain": args.senses_domain, "senses_general": args.senses_general, "per_side": args.per_side,
            "pool_lines": args.pool_lines, "k": args.k,
            "files_sha256": {path: sha256_of(Path(path)) for path in text_files(args).values()}}


def measure(args: argparse.Namespace) -> None:
    """Every figure into ``args.out``, written after each part; parts already there (a rerun) are kept when they
    were measured with the same arguments, weights and texts (``measured_with``), and a file measured with another
    model, weights or texts is refused."""
    torch.set_num_threads(1)
    for flag, path in text_files(args).items():
        if not Path(path).is_file():
            sys.exit(f"{flag}: {path} is not a file")
    sentences = [] if args.perplexity_only else sense_sentences(
        Path(args.senses_domain), Path(args.senses_general), SENSE_WORDS[args.language], args.per_side)
    if not (args.perplexity_only or sentences):
        sys.exit(f"none of the {args.language} sense words (SENSE_WORDS) has {MIN_PER_SIDE} uses (lower case, in a "
                 f"line of at most 60 tokens) in both {args.senses_domain} and {args.senses_general}: the same-word "
                 "measures need some (give other texts, or --perplexity-only)")
    model, vocab = load_language_model(resolve_model(args.model))
    reference = load_language_model(resolve_model(args.reference_vocab))[1] if args.reference_vocab else vocab
    report: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    asked = measured_with(args, weights_identity(model, vocab), reference)
    if report and report.get("measured_with") != asked:
        stored = report.get("measured_with", {"model": report.get("model"), "reference_vocab": "not recorded"})
        differing = sorted(key for key in {*stored, *asked} if stored.get(key) != asked.get(key))
        sys.exit(f"{args.out} holds figures measured with {stored}, not {asked} (they differ in "
                 f"{', '.join(differing)}): give another --out (or delete it to measure again)")
    report["measured_with"] = asked

    def save() -> None:
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")

    if "perplexity" not in report:
        report.update(model=args.model, vocabulary=len(vocab), reference_vocabulary=len(reference), perplexity={})
        for label, path in args.text:
            report["perplexity"][label] = perplexities(model, vocab, reference, Corpus([path], "whitespace"))
            print(label, json.dumps(report["perplexity"][label]), file=sys.stderr)
        save()
    del model
    if args.perplexity_only:
        return
    embedder = Embedder.load(args.model, tokenizer="whitespace")
    if "domain_vs_general" not in report:
        vectors = word_vectors(embedder, sentences)
        by_layer = [vectors_by_sense(sentences, layer) for layer in vectors]
        report["domain_vs_general"] = {
            "words": sorted({sentence.word for sentence in sentences}), "sentences": len(sentences),
            "triplet_rate": [triplet_rate(layer) for layer in by_layer],
            "nn_agreement": [nn_agreement(layer) for layer in by_layer],
            "per_word_triplet_rate_top": {word: triplet_rate({word: by_layer[-1][word]}) for word in by_layer[-1]},
        }
        save()
    if "polysemy" not in report:
        polysemy = evaluate_model(embedder, args.language)
        report["polysemy"] = {"language": args.language, "triplet_rate": polysemy.triplet_rate,
                              "nn_agreement": polysemy.nn_agreement}
        save()
    if "nearest_words" not in report:
        pool = [line.split() for path in (args.senses_domain, args.senses_general)
                for line in Path(path).read_text(encoding="utf-8").splitlines()[: args.pool_lines] if line.split()]
        report["nearest_words"] = nearest_words(embedder, pool, NEIGHBOUR_QUERIES[args.language], layer=-1, k=args.k)
        save()


# What a measurement holds that the table reads: ``measure`` saves after each stage, so a killed run's report, or
# a --perplexity-only one, lacks some.
TABLE_PARTS = ("perplexity", "domain_vs_general", "polysemy", "nearest_words")


def table(before: dict[str, Any], after: dict[str, Any]) -> str:
    rows = ["| figure | before | after |", "|---|---|---|",
            f"| vocabulary | {before['vocabulary']:,} | {after['vocabulary']:,} "
            f"(+{after['vocabulary'] - before['vocabulary']:,}) |"]
    for label, figures in before["perplexity"].items():
        later = after["perplexity"][label]
        rows.append(f"| {label}: perplexity over the general vocabulary ({figures['tokens']:,} tokens) | "
                    f"{figures['reference']['average']:.1f} | {later['reference']['average']:.1f} |")
        rows.append(f"| {label}: perplexity over the model's own vocabulary | {figures['own']['average']:.1f} | "
                    f"{later['own']['average']:.1f} ({later['targets_beyond_reference']:,} targets are added words) |")
    for name, key in (("domain-vs-general triplet rate", "triplet_rate"), ("domain-vs-general NN agreement",
                                                                           "nn_agreement")):
        rows.append(f"| {name}, layers 1 / 2 | " + " | ".join(
            " / ".join(f"{value:.3f}" for value in report["domain_vs_general"][key][1:]) for report in (before, after))
            + " |")
    language = before["polysemy"]["language"]
    for name, key in (("triplet rate", "triplet_rate"), ("NN agreement", "nn_agreement")):
        rows.append(f"| polysemy set ({language}) {name}, layers 1 / 2 | " + " | ".join(
            " / ".join(f"{value:.3f}" for value in report["polysemy"][key][1:]) for report in (before, after))
            + " |")
    rows += ["", "| word (in a domain sentence) | nearest words before | nearest words after |", "|---|---|---|"]
    for word, neighbours in before["nearest_words"].items():
        rows.append(f"| {word} | {', '.join(neighbours)} | {', '.join(after['nearest_words'][word])} |")
    rows += ["", "| word | triplet rate, top layer, before | after |", "|---|---|---|"]
    for word, rate in before["domain_vs_general"]["per_word_triplet_rate_top"].items():
        rows.append(f"| {word} | {rate:.3f} | {after['domain_vs_general']['per_word_triplet_rate_top'][word]:.3f} |")
    return "\n".join(rows)


def labelled_text(text: str) -> tuple[str, str]:
    """``LABEL=PATH`` as (label, path); argparse names the argument at fault when it is not that."""
    label, equals, path = text.partition("=")
    if not (label and equals and path):
        raise argparse.ArgumentTypeError(f"{text!r} is not LABEL=PATH (for example licenses=DIR/test.txt)")
    return label, path


def uses_per_side(text: str) -> int:
    """``--per-side``: at least MIN_PER_SIDE, else every word would be left out of the same-word measures."""
    value = int(text)
    if value < MIN_PER_SIDE:
        raise argparse.ArgumentTypeError(f"{value} is below {MIN_PER_SIDE}: a word with fewer than {MIN_PER_SIDE} "
                                         "uses on either side is left out, so no word would be measured")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("measure", help="every figure of one model, as JSON")
    run.add_argument("--model", required=True, help="shipped name, model directory, run or checkpoint")
    run.add_argument("--language", choices=sorted(SENSE_WORDS), default="en",
                     help="the words, queries and polysemy set of this language")
    run.add_argument("--reference-vocab", help="also perplexity over this model's vocabulary (the general model)")
    run.add_argument("--text", action="append", required=True, type=labelled_text, metavar="LABEL=PATH",
                     help="held-out text, one tokenized sentence a line (repeatable, each label once)")
    run.add_argument("--perplexity-only", action="store_true", help="only the perplexities (a run's checkpoints)")
    run.add_argument("--senses-domain", required=True, help="domain held-out text for the same-word measures")
    run.add_argument("--senses-general", required=True, help="general held-out text for the same-word measures")
    run.add_argument("--per-side", type=uses_per_side, default=20,
                     help=f"uses of each word taken from each text (at least {MIN_PER_SIDE})")
    run.add_argument("--pool-lines", type=positive_int, default=1000,
                     help="lines of each text searched for nearest words")
    run.add_argument("--k", type=positive_int, default=5, help="nearest words shown")
    run.add_argument("--out", type=Path, required=True)
    show = commands.add_parser("table", help="Markdown before -> after")
    show.add_argument("before", type=Path)
    show.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "measure":
        labels = [label for label, _ in args.text]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:  # the figures of a label given twice would be the last text's alone
            run.error(f"--text label {', '.join(repeated)} given more than once")
        measure(args)
    else:
        reports = [json.loads(path.read_text()) for path in (args.before, args.after)]
        for path, report in zip((args.before, args.after), reports, strict=True):
            missing = [key for key in TABLE_PARTS if key not in report]  # a KeyError deep in the table otherwise
            if missing:
                show.error(f"{path} lacks {', '.join(missing)} (a --perplexity-only or unfinished measurement); the "
                           "table needs two full ones")
        print(table(*reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
