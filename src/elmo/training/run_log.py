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


class RunLogError(ValueError):
    """A ``log.jsonl`` that is not a run's log (another program's file of that name), which a run would rewrite."""


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of the run log at ``path`` (none where it is missing). A last line cut short by a kill, with no
    line break after it, is dropped; any other line that is not a run's record (a JSON object with a whole-number
    ``step``) is a RunLogError naming the file and the line, as a run that took the file for its own would drop it."""
    if not path.is_file():
        return []
    text = path.read_bytes().decode("utf-8", errors="replace")
    lines = text.splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines) and not text.endswith("\n"):
                break
            raise RunLogError(f"{path}: line {number} is not JSON; a run's {LOG_FILE} holds one JSON record a line "
                              "(is it another program's file? move it, or give the run another directory)") from None
        step = record.get("step") if isinstance(record, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            raise RunLogError(f"{path}: line {number} is not a run's record (a JSON object with a whole-number "
                              "\"step\"); is it another program's file? move it, or give the run another directory")
        records.append(record)
    return records


class RunLog:
    """``log.jsonl`` and its plot. On resume, lines past the checkpoint (from the killed run) are dropped."""

    def __init__(self, out_dir: Path, step: int) -> None:
        self.path = out_dir / LOG_FILE
        self.plot_path = out_dir / PLOT_FILE
        out_dir.mkdir(parents=True, exist_ok=True)
        kept = [record for record in self.records() if record["step"] <= step]
        write_text_atomic(self.path, "".join(json.dumps(record) + "\n" for record in kept))

    def records(self) -> list[dict[str, Any]]:
        return read_records(self.path)

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
