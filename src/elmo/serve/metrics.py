"""Prometheus metrics for one service process, in its own registry (so apps made in one process,
as tests make them, never share counters). Each replica exposes its own; Prometheus sums them."""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from elmo.serve.batching import BatchRecord, DynamicBatcher, TokenBudget

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("elmo_requests", "HTTP requests answered, by endpoint and status code",
                                ["endpoint", "status"], registry=self.registry)
        self.latency = Histogram("elmo_request_duration_seconds", "Time from request to response, by endpoint",
                                 ["endpoint"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.batch_requests = Histogram("elmo_batch_requests", "Requests merged into one model batch", ["model"],
                                        buckets=SIZE_BUCKETS, registry=self.registry)
        self.batch_sentences = Histogram("elmo_batch_sentences", "Sentences in one model batch", ["model"],
                                         buckets=SIZE_BUCKETS, registry=self.registry)
        self.batch_tokens = Histogram("elmo_batch_tokens", "Tokens in one model batch", ["model"],
                                      buckets=SIZE_BUCKETS, registry=self.registry)
        self.batch_seconds = Histogram("elmo_batch_duration_seconds", "Time the biLM spent on one batch", ["model"],
                                       buckets=LATENCY_BUCKETS, registry=self.registry)
        self.queue_depth = Gauge("elmo_queue_depth", "Requests waiting for a model batch", ["model"],
                                 registry=self.registry)
        self.pending = Gauge("elmo_pending_requests", "Requests admitted and not yet answered (queued or running)",
                             ["model"], registry=self.registry)
        self.held_tokens = Gauge("elmo_held_tokens", "Tokens of requests admitted and not yet answered to their last "
                                 "byte (bounded by --max-queue-tokens)", ["model"], registry=self.registry)
        self.tokens = Counter("elmo_tokens", "Tokens embedded", ["model"], registry=self.registry)

    def watch(self, batcher: DynamicBatcher, budget: TokenBudget) -> None:
        """Read the batcher's queue and the tokens held at scrape time rather than tracking every change."""
        self.queue_depth.labels(batcher.name).set_function(lambda: batcher.queued)
        self.pending.labels(batcher.name).set_function(lambda: batcher.pending)
        self.held_tokens.labels(batcher.name).set_function(lambda: budget.held)

    def record_batch(self, model: str, record: BatchRecord) -> None:
        self.batch_requests.labels(model).observe(record.requests)
        self.batch_sentences.labels(model).observe(record.sentences)
        self.batch_tokens.labels(model).observe(record.tokens)
        self.batch_seconds.labels(model).observe(record.seconds)
        self.tokens.labels(model).inc(record.tokens)

    def render(self) -> bytes:
        return generate_latest(self.registry)
