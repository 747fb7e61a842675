"""Sweeps: a list of run settings, each run once, resumable, on processes or on Ray.

:func:`run_sweep` runs every point of a grid (:mod:`ahasd.sim.grid_files` reads grid files)
whose identity (:mod:`ahasd.sim.run_identity`) is not yet in the results directory
(:mod:`ahasd.sim.results`), simulating points of one identity once. Backends: ``local`` (a
process pool, or in-process for one job) and ``ray`` (Ray tasks on a local instance, or on a
cluster given its address). An interrupted sweep (Ctrl-C, SIGTERM) ends its workers and
keeps every run that finished.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ahasd.errors import UserError
from ahasd.sim.library.loading import load_library
from ahasd.sim.modes import simulate
from ahasd.sim.results import ResultsDir, result_row
from ahasd.sim.run_identity import run_identity, settings_key
from ahasd.sim.settings import RunSettings

__all__ = ["BACKENDS", "Progress", "run_sweep"]

BACKENDS = ("local", "ray")


def _run_one(settings: RunSettings) -> dict:
    """The summary of one run (module level: it is pickled to worker processes).

    A run the model refuses while running (a :class:`UserError`, e.g. a controller width
    that would saturate under a perturbed number) gives a row with its ``error`` instead of
    stopping the sweep; such rows are kept (resume does not retry them) and left out of
    every table.
    """
    try:
        return simulate(settings).summary
    except UserError as error:
        return {
            "mode": settings.mode,
            "pair": settings.pair,
            "policy": settings.policy,
            "seed": settings.seed,
            "error": str(error),
        }


class Progress:
    """A plain progress line on stderr per finished run (the command line passes its own
    bar, :class:`ahasd.cli.progress.Progress`, which has the same two methods)."""

    def __init__(self, label: str, total: int, stream=None) -> None:
        self.label, self.total = label, total
        self.stream = stream or sys.stderr
        self.started = time.perf_counter()

    def update(self, done: int, note: str = "") -> None:
        elapsed = time.perf_counter() - self.started
        self.stream.write(f"{self.label}: {done}/{self.total} runs, {elapsed:.1f} s {note}\n")
        self.stream.flush()

    def close(self) -> None:
        """Nothing to finish: every line is complete."""


def run_sweep(
    grid: list[RunSettings],
    out: Path,
    *,
    jobs: int = 1,
    backend: str = "local",
    address: str | None = None,
    label: str = "sweep",
    progress: Callable[[str, int], object] = Progress,
) -> tuple[list[dict], int]:
    """Run every point of ``grid`` not yet in ``out/results.jsonl``; return the rows of
    the grid in grid order and how many runs were simulated.

    Every point is checked (platform, devices, overrides, controller parameters) before
    anything runs. Points with equal identity are simulated once; a point whose identity
    is in the file under other labels gets a row copied from it. ``progress(label, total)``
    makes the progress display (``update(done, note)``, ``close()``), shown while runs are
    simulated.
    """
    if backend not in BACKENDS:
        raise UserError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if jobs < 1:
        raise UserError(f"--jobs must be at least 1, not {jobs}")
    libraries = {}
    identities = []
    for settings in grid:
        library = libraries.get(settings.spec_dirs) or load_library(settings.spec_dirs)
        libraries[settings.spec_dirs] = library
        identities.append(run_identity(settings, library))
    with ResultsDir(out) as results:
        by_request = {(r.get("key"), r.get("run_id")): r for r in results.rows}
        by_run = {r.get("run_id"): r for r in results.rows}
        # The report keeps each request's last row: after an edit and its revert the current
        # identity's row is an older one, so it is appended again to come last.
        last_of = {r.get("key"): r.get("run_id") for r in results.rows}
        requests: dict[str, list[RunSettings]] = {}  # run id -> the points asking for it
        for settings, identity in zip(grid, identities, strict=True):
            requests.setdefault(identity["run_id"], []).append(settings)
        to_run = {run_id: points[0] for run_id, points in requests.items() if run_id not in by_run}
        identity_of = {i["run_id"]: i for i in identities}

        def record(run_id: str) -> None:
            """Append a row for every request of ``run_id`` that has none yet."""
            for settings in requests[run_id]:
                key = (settings_key(settings), run_id)
                if key not in by_request:
                    by_request[key] = result_row(settings, identity_of[run_id], by_run[run_id])
                elif last_of.get(key[0]) == run_id:
                    continue
                results.append(by_request[key])
                last_of[key[0]] = run_id

        bar = progress(label, len(to_run)) if to_run else None
        done = []

        def finished(run_id: str, summary: dict) -> None:
            by_run[run_id] = summary
            record(run_id)  # at once: an interrupted sweep keeps what finished
            done.append(run_id)
            bar.update(len(done), f"{summary['mode']} {summary['pair']} {summary['policy']}")

        try:
            with _terminate_as_interrupt():
                _execute(
                    to_run,
                    finished,
                    jobs=jobs,
                    backend=backend,
                    address=address,
                    inherited=results.lock_fd(),
                )
        finally:
            if bar is not None:
                bar.close()
        for run_id in requests:
            record(run_id)
        rows = [
            by_request[(settings_key(settings), identity["run_id"])]
            for settings, identity in zip(grid, identities, strict=True)
        ]
    return rows, len(to_run)


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM raises KeyboardInterrupt while the block runs, as Ctrl-C does, so that the
    workers are ended and the lock released on the way out (the default action would kill
    this process alone and leave its pool's workers holding the lock)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _worker_start(parent: int, inherited: int) -> None:
    """A pool worker's first act: close its copy of the sweep's lock (a forked child shares
    the lock and would hold it after the parent's death) and ask the kernel to end it when
    the parent dies, however the parent dies."""
    with contextlib.suppress(OSError):
        os.close(inherited)
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _execute(
    to_run: dict[str, RunSettings],
    finished: Callable[[str, dict], None],
    *,
    jobs: int,
    backend: str,
    address: str | None,
    inherited: int = -1,
) -> None:
    if not to_run:
        return
    if backend == "ray":
        _execute_ray(to_run, finished, jobs=jobs, address=address)
    elif jobs == 1 or len(to_run) == 1:
        for run_id, settings in to_run.items():
            finished(run_id, _run_one(settings))
    else:
        before = set(multiprocessing.active_children())
        pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=jobs, initializer=_worker_start, initargs=(os.getpid(), inherited)
        )
        try:
            futures = {pool.submit(_run_one, s): run_id for run_id, s in to_run.items()}
            for future in concurrent.futures.as_completed(futures):
                finished(futures[future], future.result())
        except BaseException:
            # Interrupted or failed: end the workers now rather than wait for their runs.
            pool.shutdown(wait=False, cancel_futures=True)
            for worker in set(multiprocessing.active_children()) - before:
                worker.terminate()
            raise
        pool.shutdown()


def _execute_ray(
    to_run: dict[str, RunSettings],
    finished: Callable[[str, dict], None],
    *,
    jobs: int,
    address: str | None,
) -> None:
    """Ray tasks, one per run; a local instance of ``jobs`` CPUs unless ``address`` names
    a cluster (whose workers must have this package installed)."""
    try:
        import ray
    except ImportError:
        raise UserError("--backend ray needs Ray: pip install 'ahasd[ray]'") from None
    import logging

    started_here = not ray.is_initialized()
    if started_here:
        options = {
            "include_dashboard": False,
            "logging_level": logging.WARNING,
            "log_to_driver": False,
        }
        if address is None:
            # A small local instance: the sweep's CPUs, a minimal object store (the results
            # are small dicts).
            options.update(num_cpus=jobs, object_store_memory=96 * 1024 * 1024)
        ray.init(address=address, **options)
    try:
        remote = ray.remote(num_cpus=1)(_run_one)
        pending = {remote.remote(s): run_id for run_id, s in to_run.items()}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                finished(pending.pop(ref), ray.get(ref))
    finally:
        if started_here:
            ray.shutdown()
