"""The dynamic batcher on its own, in one event loop with the real fixture embedder: merging, the token
budget, the pending bound and skipping jobs whose requester gave up."""

import asyncio

import numpy as np
import pytest

from elmo.embedder import Embedder
from elmo.serve.batching import BatchRecord, DynamicBatcher, QueueFull


def make_batcher(embedder: Embedder, records: list[BatchRecord], **options) -> DynamicBatcher:
    settings = {"max_batch_tokens": 1000, "max_wait_s": 0.05, "max_pending": 100, "batch_size": 8, **options}
    return DynamicBatcher(embedder, "fixture", on_batch=records.append, **settings)


def test_concurrent_submits_share_batches_within_the_token_budget(embedder: Embedder) -> None:
    token_lists = [[f"w{i}", "and", f"v{i}", "x"][: 1 + i % 4] for i in range(20)]  # 1..4 tokens
    records: list[BatchRecord] = []

    async def run() -> list[list[np.ndarray]]:
        batcher = make_batcher(embedder, records, max_batch_tokens=10)
        batcher.start()
        results = await asyncio.gather(*(batcher.submit([tokens], 10) for tokens in token_lists))
        await batcher.stop()
        return results

    results = asyncio.run(run())
    for (got,), expected in zip(results, embedder.embed(token_lists, "all"), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert sum(r.requests for r in records) == 20 and len(records) < 20
    assert all(r.tokens <= 10 for r in records)


def test_a_request_over_the_budget_runs_alone(embedder: Embedder) -> None:
    records: list[BatchRecord] = []

    async def run() -> None:
        batcher = make_batcher(embedder, records, max_batch_tokens=4)
        batcher.start()
        await asyncio.gather(batcher.submit([["a"] * 9], 10), batcher.submit([["b", "c"]], 10))
        await batcher.stop()

    asyncio.run(run())
    assert sorted((r.requests, r.tokens) for r in records) == [(1, 2), (1, 9)]


def test_pending_bound_refuses_at_once_and_given_up_jobs_are_skipped(embedder: Embedder) -> None:
    records: list[BatchRecord] = []

    async def run() -> None:
        batcher = make_batcher(embedder, records, max_pending=2, max_wait_s=0.3)
        batcher.start()
        quitter = asyncio.ensure_future(batcher.submit([["gives", "up"]], 0.05))
        stayer = asyncio.ensure_future(batcher.submit([["stays"]], 10))
        await asyncio.sleep(0.01)
        with pytest.raises(QueueFull):
            await batcher.submit([["third"]], 10)
        with pytest.raises(TimeoutError):
            await quitter
        (vectors,) = await stayer
        np.testing.assert_allclose(vectors, embedder.embed([["stays"]], "all")[0], rtol=1e-6, atol=1e-6)
        assert batcher.pending == 0
        await batcher.stop()

    asyncio.run(run())
    assert [(r.requests, r.tokens) for r in records] == [(1, 1)]  # the quitter cost no model time
