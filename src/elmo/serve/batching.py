"""Dynamic batching: concurrent requests for one model are merged into one ``Embedder.embed`` call.

A request waits at most ``max_wait_s`` after it arrives for others to join it (and not at all once
``max_batch_tokens`` tokens are waiting), so under load a replica runs full batches, as the offline
embedder does, and a lone request pays only a few milliseconds. The biLM runs on one worker thread;
while it runs, the next batch gathers. Every sentence starts from a zero LSTM state, so merging
requests never changes anyone's vectors.

``max_pending`` bounds the requests admitted and not yet answered: past it ``submit`` refuses at once
(the app answers 503 with Retry-After) instead of letting a queue pile up; ``TokenBudget`` bounds the
tokens the app holds for them. A request that gives up (timeout or disconnect) leaves the queue at once,
so it no longer counts and is never run; a job already in a running batch is run and its rows dropped,
and the other requests of that batch get their vectors as usual.
"""

import asyncio
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from elmo.embedder import Embedder


class QueueFull(Exception):
    """The model already holds ``max_pending`` requests; come back later."""


class ShuttingDown(Exception):
    """The service is stopping and takes no new work."""


class TokenBudget:
    """The tokens a model holds for requests admitted and not yet answered to their last byte: their vectors
    and the bytes of their answers grow with these tokens, so bounding them bounds that memory. ``hold``
    refuses (QueueFull) past ``limit``; the ``Hold`` it returns gives the tokens back once."""

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.held = 0

    def hold(self, n_tokens: int) -> "Hold":
        if self.held + n_tokens > self.limit:
            raise QueueFull(f"model {self.name!r} already holds {self.held} of {self.limit} tokens "
                            f"(--max-queue-tokens); this request has {n_tokens}")
        self.held += n_tokens
        return Hold(self, n_tokens)


class Hold:
    """Tokens held in a budget until ``release``, or the end of a ``with`` block."""

    def __init__(self, budget: TokenBudget, n_tokens: int) -> None:
        self._budget = budget
        self._n_tokens = n_tokens

    def release(self) -> None:
        """Give the tokens back; later calls do nothing."""
        self._budget.held -= self._n_tokens
        self._n_tokens = 0

    def __enter__(self) -> "Hold":
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


@dataclass(eq=False)  # jobs are compared by identity: two requests may hold equal sentences
class _Job:
    token_lists: list[list[str]]
    n_tokens: int
    arrived: float  # event-loop clock
    future: asyncio.Future = field(repr=False)


@dataclass(frozen=True)
class BatchRecord:
    """What one model batch held and how long it ran (for metrics)."""

    requests: int
    sentences: int
    tokens: int
    seconds: float


class DynamicBatcher:
    """Merges concurrent ``submit`` calls for one embedder into batches of at most ``max_batch_tokens``."""

    def __init__(self, embedder: Embedder, name: str, max_batch_tokens: int, max_wait_s: float, max_pending: int,
                 batch_size: int, on_batch: Callable[[BatchRecord], None] | None = None) -> None:
        self.embedder = embedder
        self.name = name
        self.max_batch_tokens = max_batch_tokens
        self.max_wait_s = max_wait_s
        self.max_pending = max_pending
        self.batch_size = batch_size
        self.on_batch = on_batch
        self.pending = 0  # admitted and not yet released: queued, gathering or running
        self._jobs: deque[_Job] = deque()
        self._queued_tokens = 0
        self._arrived = asyncio.Event()
        self._stopping = False
        self._worker: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"elmo-{name}")

    @property
    def queued(self) -> int:
        """Requests waiting for a batch (not yet running)."""
        return len(self._jobs)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._worker = self._loop.create_task(self._run(), name=f"batcher-{self.name}")

    async def stop(self) -> None:
        """Refuse new work, run every job already admitted, then stop the worker thread."""
        self._stopping = True
        self._arrived.set()
        if self._worker is not None:
            await self._worker
        self._executor.shutdown(wait=True)

    async def submit(self, token_lists: list[list[str]], timeout_s: float) -> list[np.ndarray]:
        """Every layer of each sentence, ``(n_layers, T, 2P)`` float32, in order.

        Raises QueueFull or ShuttingDown at once, or TimeoutError after ``timeout_s``.
        """
        if self._stopping:
            raise ShuttingDown(f"model {self.name!r} is shutting down")
        if self.pending >= self.max_pending:
            raise QueueFull(f"model {self.name!r} already holds {self.pending} requests")
        loop = asyncio.get_running_loop()
        job = _Job(token_lists, sum(map(len, token_lists)), loop.time(), loop.create_future())
        self.pending += 1
        self._jobs.append(job)
        self._queued_tokens += job.n_tokens
        self._arrived.set()
        try:
            return await asyncio.wait_for(asyncio.shield(job.future), timeout_s)
        finally:
            if not job.future.done():
                job.future.cancel()  # a running batch drops its rows
                self._forget(job)

    def _forget(self, job: _Job) -> None:
        """Take a job whose request gave up out of the queue, if it is still there, so it no longer counts."""
        try:
            self._jobs.remove(job)
        except ValueError:  # already taken into a batch, which releases it when done
            return
        self._queued_tokens -= job.n_tokens
        self.pending -= 1

    def submit_from_thread(self, token_lists: list[list[str]], timeout_s: float) -> list[np.ndarray]:
        """``submit`` for code on another thread (a search worker): blocks that thread, never the event loop.

        The sentences join the same batches, queue limit and timeout as a request's; the wait is bounded even
        if the loop stops before answering.
        """
        if self._loop is None:
            raise ShuttingDown(f"model {self.name!r} is not running")
        submission = self.submit(token_lists, timeout_s)
        try:
            future = asyncio.run_coroutine_threadsafe(submission, self._loop)
        except RuntimeError:  # the loop has closed
            submission.close()
            raise ShuttingDown(f"model {self.name!r} is shutting down") from None
        try:
            return future.result(timeout_s + 1)
        except TimeoutError:
            future.cancel()
            raise

    async def _run(self) -> None:
        while True:
            while not self._jobs:
                if self._stopping:
                    return
                self._arrived.clear()
                await self._arrived.wait()
            await self._gather()
            batch = self._take_batch()
            if batch:
                await self._run_batch(batch)

    async def _gather(self) -> None:
        """Wait until enough tokens are queued, or the oldest job has waited ``max_wait_s``."""
        loop = asyncio.get_running_loop()
        deadline = self._jobs[0].arrived + self.max_wait_s
        while self._queued_tokens < self.max_batch_tokens and not self._stopping:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                return

    def _take_batch(self) -> list[_Job]:
        """Live jobs from the front of the queue up to the token budget (always at least one)."""
        batch: list[_Job] = []
        tokens = 0
        while self._jobs:
            job = self._jobs[0]
            if batch and tokens + job.n_tokens > self.max_batch_tokens:
                break
            self._jobs.popleft()
            self._queued_tokens -= job.n_tokens
            if job.future.done():  # gave up while queued
                self.pending -= 1
                continue
            batch.append(job)
            tokens += job.n_tokens
        return batch

    async def _run_batch(self, batch: list[_Job]) -> None:
        token_lists = [tokens for job in batch for tokens in job.token_lists]
        started = time.perf_counter()
        try:
            arrays = await asyncio.get_running_loop().run_in_executor(self._executor, self._embed, token_lists)
        except Exception as error:  # the model failed: every request of the batch hears why
            for job in batch:
                if not job.future.done():
                    job.future.set_exception(error)
        else:
            start = 0
            for job in batch:
                if not job.future.done():
                    job.future.set_result(arrays[start : start + len(job.token_lists)])
                start += len(job.token_lists)
        finally:
            self.pending -= len(batch)
        if self.on_batch is not None:
            self.on_batch(BatchRecord(len(batch), len(token_lists), sum(job.n_tokens for job in batch),
                                      time.perf_counter() - started))

    def _embed(self, token_lists: list[list[str]]) -> list[np.ndarray]:
        return self.embedder.embed(token_lists, "all", batch_size=self.batch_size)
