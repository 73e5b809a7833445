"""The run directory's log: ``log.jsonl`` (one JSON object per logged step or evaluation; a perplexity too
large for a float is ``null``), its plot ``perplexity.png``, and the losses and time a log line sums up."""

import json
import math
import time
from pathlib import Path
from typing import Any

import torch

from elmo.files import write_bytes_atomic, write_text_atomic
from elmo.training.checkpoints import LogInterval
from elmo.training.perplexity import perplexity_of

LOG_FILE = "log.jsonl"
PLOT_FILE = "perplexity.png"


class IntervalMeter:
    """Losses and time since the last log line; the losses travel in checkpoints (``LogInterval``)."""

    def __init__(self, saved: LogInterval) -> None:
        self._restart(saved)

    def _restart(self, saved: LogInterval) -> None:
        self.nll_sums = torch.tensor(saved.nll_sums, dtype=torch.float64)
        self.n_targets = saved.n_targets
        self.n_steps = saved.n_steps
        self.timed_steps = 0
        self.start = time.perf_counter()

    def add(self, nll_sums: torch.Tensor, n_targets: int) -> None:
        self.nll_sums += nll_sums.double()
        self.n_targets += n_targets
        self.n_steps += 1
        self.timed_steps += 1

    def saved(self) -> LogInterval:
        forward, backward = self.nll_sums.tolist()
        return LogInterval((forward, backward), self.n_targets, self.n_steps)

    def record(self, step: int, tokens_per_step: int) -> dict[str, Any]:
        forward, backward = (self.nll_sums / self.n_targets).tolist()
        seconds = time.perf_counter() - self.start
        loss = (forward + backward) / 2
        record = {"step": step, "loss": loss, "perplexity": perplexity_of(loss),
                  "forward_perplexity": perplexity_of(forward), "backward_perplexity": perplexity_of(backward),
                  "tokens_per_s": self.timed_steps * tokens_per_step / max(seconds, 1e-9)}
        self._restart(LogInterval())
        return record


class RunLog:
    """``log.jsonl`` and its plot. On resume, lines past the checkpoint (from the killed run) are dropped."""

    def __init__(self, out_dir: Path, step: int) -> None:
        self.path = out_dir / LOG_FILE
        self.plot_path = out_dir / PLOT_FILE
        out_dir.mkdir(parents=True, exist_ok=True)
        kept = [line for line in self.records() if line["step"] <= step]
        write_text_atomic(self.path, "".join(json.dumps(record) + "\n" for record in kept))

    def records(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        records = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut short by a kill; everything after it is gone too
        return records

    def write(self, record: dict[str, Any]) -> None:
        """One line of strict JSON: a value that is not a finite number (a perplexity past a float's range)
        is ``null``."""
        strict = {key: None if isinstance(value, float) and not math.isfinite(value) else value
                  for key, value in record.items()}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(strict, allow_nan=False) + "\n")

    def plot(self) -> None:
        import io

        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot

        records = self.records()
        train = [(r["step"], r["perplexity"]) for r in records if r.get("perplexity") is not None]
        valid = [(r["step"], r["valid_perplexity"]) for r in records if r.get("valid_perplexity") is not None]
        figure, axes = pyplot.subplots(figsize=(7, 4.5))
        for points, label, style in ((train, "training (sampled softmax)", "-"), (valid, "validation (full)", "o-")):
            if points:
                axes.plot(*zip(*points, strict=True), style, label=label)
        axes.set_xlabel("step")
        axes.set_ylabel("perplexity")
        axes.set_yscale("log")
        axes.grid(True, which="both", alpha=0.3)
        if train or valid:
            axes.legend()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        pyplot.close(figure)
        write_bytes_atomic(self.plot_path, buffer.getvalue())
