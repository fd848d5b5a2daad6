"""Response files for a batch of answers, on descriptors: staged (an anonymous file, else a named
temp), made durable, placed without replacing, and retried alone when a write fails (the
publisher's file stages).

Each stage is a named fault point of `core.serving.publisher` (`FaultHook`). Every file operation goes
through the `DiskWriter` seam, relative to a `responses/` descriptor opened from the root down
(no link is ever followed).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence

from core.clock import Clock
from core.disk.entries import remove, temp_name
from core.disk.writer import DiskWriter
from core.forwarding.inbox import SessionInbox, display_name
from core.seams import FaultHook, no_fault
from core.serving.verdicts import BatchItem
from core.text import log_safe

log = logging.getLogger("pi_authorizer.publish")

TRANSIENT = (OSError, sqlite3.OperationalError)

SYNCFS_FROM = 4
"""From this many response files in a batch, one `syncfs` beats an `fsync` per file."""


class ResponseFiles:
    """The file stages of the publisher (`core.serving.publisher.Publisher` is one)."""

    writer: DiskWriter
    clock: Clock
    retry_delays: tuple[float, ...]

    def _write(self, batch: Sequence[BatchItem]) -> None:
        """Stage, make durable and place responses one after the other (a retry)."""
        opened = self._open_folders(batch)
        try:
            self._stage_all(opened, together=False)
            self._place_all(opened, together=False, fault=no_fault)
        finally:
            self._close_folders(opened)

    def _open_folders(self, batch: Sequence[BatchItem]) -> list[tuple[int, list[BatchItem]]]:
        """Each session's `responses/` once (created from the root down, never through a link)."""
        folders: dict[str, list[BatchItem]] = {}
        for item in batch:
            folders.setdefault(item.inbox.folder_name, []).append(item)
        opened: list[tuple[int, list[BatchItem]]] = []
        for items in folders.values():
            try:
                opened.append((open_folder(items[0].inbox, "responses", create=True), items))
            except Exception as exc:
                fail(items, exc)
        return opened

    def _stage_all(self, opened: Sequence[tuple[int, list[BatchItem]]], together: bool) -> None:
        for fd, items in opened:
            for item in items:
                self._stage(fd, item, sync=not together)

    def _stage_items(self, items: Sequence[BatchItem]) -> None:
        """The stager's job: a temp per answer (fsynced each when fewer than `SYNCFS_FROM`, as
        their batch will be: a single ask pays its fsync beside the ledger's, not after it)."""
        opened = self._open_folders(items)
        try:
            self._stage_all(opened, together=len(items) >= SYNCFS_FROM)
        finally:
            for fd, _ in opened:
                os.close(fd)  # a staged file outlives it: by its name, or by its own descriptor

    def _reuse_or_stage(self, opened: Sequence[tuple[int, list[BatchItem]]], together: bool) -> None:
        """Once the batch is recorded: each answer not staged ahead is written into its own request
        file (`DiskWriter.reuse`), or else into a new file."""
        for fd, items in opened:
            waiting = [item for item in items if item.temp is None and item.write_failed is None]
            requests: int | None = None
            with contextlib.suppress(OSError):
                requests = open_folder(items[0].inbox, "requests") if waiting else None
            if requests is not None:
                try:
                    self._reuse(requests, fd, os.fstat(fd).st_dev, waiting)
                finally:
                    os.close(requests)
            for item in waiting:
                if item.temp is None:
                    self._stage(fd, item, sync=not together)

    def _reuse(self, requests: int, fd: int, device: int, items: Sequence[BatchItem]) -> None:
        for item in items:
            verdict = item.verdict
            if item.history_failed is not None:
                continue
            try:
                item.temp = self.writer.reuse(requests, verdict.key.name, verdict.parsed.raw, verdict.body,
                                              fd, f"{verdict.request_id}.json", device)
            except (OSError, ValueError) as exc:
                log.warning("answering in request %s failed (%s); a new file is made",
                            log_safe(display_name(verdict.key.name)), exc)

    def _place_all(
        self, opened: Sequence[tuple[int, list[BatchItem]]], together: bool, fault: FaultHook
    ) -> None:
        fault("staged")
        for fd, items in opened:
            if together:
                self._sync(fd, items)
            else:
                self._sync_each(fd, [item for item in items if not item.synced])
        fault("durable")
        staged = [(fd, item) for fd, items in opened for item in items if item.temp is not None]
        half = len(staged) // 2
        placed: set[int] = set()
        for index, (fd, item) in enumerate(staged):
            if index == half and index > 0:
                fault("half-linked")
            if self._place(fd, item):
                placed.add(fd)
        for fd in placed:
            try:
                self.writer.fsync_dir(fd)
            except OSError as exc:
                log.error("fsync of a responses folder failed after publishing: %s", exc)
        fault("linked")

    def _stage(self, fd: int, item: BatchItem, sync: bool) -> None:
        temp = temp_name(f"{item.verdict.request_id}.json")
        try:
            staged = self.writer.stage(fd, temp, item.verdict.body, sync)
        except Exception as exc:
            with contextlib.suppress(OSError, ValueError):
                remove(fd, temp)
            fail([item], exc)
            return
        item.temp, item.synced = staged, sync

    def _sync(self, fd: int, items: list[BatchItem]) -> None:
        try:
            if self.writer.sync_all(fd):
                return
        except OSError as exc:
            log.warning("syncfs failed (%s); fsyncing each response instead", exc)
        self._sync_each(fd, items)

    def _sync_each(self, fd: int, items: list[BatchItem]) -> None:
        for item in items:
            if item.temp is None:
                continue
            try:
                self.writer.sync_file(fd, item.temp)
            except OSError as exc:
                fail([item], exc)
                self.drop_temp(fd, item)

    def _place(self, fd: int, item: BatchItem) -> bool:
        assert item.temp is not None
        try:
            item.written = self.writer.place(fd, item.temp, f"{item.verdict.request_id}.json")
        except Exception as exc:
            fail([item], exc)
            return False
        item.write_failed = None
        if item.written:
            item.temp = None  # placed: nothing staged is left (the writer removed or closed it)
        return bool(item.written)

    def _write_alone(self, item: BatchItem) -> None:
        """A response whose batch write failed: retried alone with backoff (disk full, EIO), waited on
        the clock (this worker thread blocks, the loop goes on)."""
        attempts = len(self.retry_delays) + 1
        for attempt, delay in enumerate(self.retry_delays, start=1):
            log.warning("writing the response failed (attempt %d of %d): %s; retrying",
                        attempt, attempts, item.write_failed)
            self.clock.sleep(delay)
            item.write_failed = None
            self._write([item])
            if item.write_failed is None:
                return

    def _attempts(self, step: str, action: Callable[[], object]) -> Exception | None:
        """Run `action`, retrying transient failures with backoff on the clock; the last failure, or None."""
        delays = (0.0, *self.retry_delays)
        for attempt, delay in enumerate(delays, start=1):
            if delay:
                self.clock.sleep(delay)
            try:
                action()
                return None
            except TRANSIENT as exc:
                if attempt == len(delays):
                    return exc
                log.warning("%s failed (attempt %d of %d): %s; retrying", step, attempt, len(delays), exc)
            except Exception as exc:
                return exc
        raise AssertionError("unreachable")

    def _close_folders(self, opened: Sequence[tuple[int, list[BatchItem]]]) -> None:
        """Drop what was staged and not placed, and let go of the folders."""
        for fd, items in opened:
            for item in items:
                self.drop_temp(fd, item)
            os.close(fd)

    def drop_temp(self, fd: int, item: BatchItem) -> None:
        if item.temp is not None:
            self.writer.discard(fd, item.temp)
            item.temp = None


def fail(items: Sequence[BatchItem], exc: BaseException) -> None:
    for item in items:
        item.write_failed = str(exc) if isinstance(exc, OSError) else what(exc)
        item.written = None


def what(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def open_folder(inbox: SessionInbox, sub: str, create: bool = False) -> int:
    """A descriptor for a folder of the session, opened from the root down, never through a link."""
    return inbox.tree.open(("sessions", inbox.folder_name, sub), create)
