"""The stages of one batch of the publisher, in order, on a worker thread: recorded (one durable
transaction), then placed (`staged` to `marked`, the file stages of `core.serving.response_files`).
`core.serving.publisher.Publisher` drains its queue into them a batch at a time."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from core.forwarding.inbox import display_name
from core.seams import FaultHook
from core.serving.response_files import SYNCFS_FROM, ResponseFiles, what
from core.serving.verdicts import BatchItem, Ledger, WrittenMark, gate_denial
from core.text import log_safe
from core.wire.response import encode_response

log = logging.getLogger("pi_authorizer.publish")


class BatchStages(ResponseFiles):
    """`_commit`: every stage of one batch."""

    ledger: Ledger | None
    fault: FaultHook

    def _commit(self, batch: Sequence[BatchItem]) -> None:
        """The stages, in order. A few answers' bodies were handed to the stager as they were queued
        (written, not visible), so their files are created while the ledger records; a burst's are
        written into their own requests once recorded (`_reuse_or_stage`)."""
        self.fault("arrived")
        together = len(batch) >= SYNCFS_FROM
        opened = self._open_folders(batch)
        try:
            try:
                self._record(batch)
            finally:
                for job in {id(item.staging): item.staging for item in batch if item.staging}.values():
                    job.result()
            self.fault("recorded")
            for fd, items in opened:
                for item in items:
                    if item.history_failed is not None and item.written is None:
                        # Staged with the verdict the ledger refused: never placed; the denial is.
                        self.drop_temp(fd, item)
                        item.write_failed = None
                        self._stage(fd, item, sync=not together)
            self._reuse_or_stage(opened, together)
            self._place_all(opened, together, self.fault)
        finally:
            self._close_folders(opened)
        for item in batch:
            if item.write_failed is not None and item.written is None:
                self._write_alone(item)
        marks = [
            WrittenMark(i.verdict.key, i.verdict.request_id, bool(i.written))
            for i in batch
            if i.written is not None and i.history_failed is None
        ]
        ledger = self.ledger
        if ledger is not None and marks:
            # Retried like the record: an unnoted row says a visible response was never written.
            error = self._attempts("noting the written responses", lambda: ledger.mark_written(marks))
            if error is not None:
                # The responses are visible; a restart notes them from the files themselves.
                log.error("noting %d written responses in the history failed: %s", len(marks), error)
        self.fault("marked")

    def _record(self, batch: Sequence[BatchItem]) -> None:
        """One durable transaction for the batch; a refused batch is retried, then each verdict alone,
        and a verdict still refused is replaced by a fail-safe denial (published unrecorded)."""
        ledger = self.ledger
        if ledger is None:
            return
        verdicts = [item.verdict for item in batch]
        error = self._attempts("recording the verdicts", lambda: ledger.record_verdicts(verdicts))
        if error is None:
            return
        for item in batch:
            if len(batch) > 1:
                try:
                    ledger.record_verdicts([item.verdict])
                    continue
                except Exception as exc:
                    error = exc
            key = item.verdict.key
            log.error("session=%s request=%s: recording the verdict failed: %s", log_safe(key.session_id),
                      log_safe(display_name(key.name)), error)
            item.history_failed = f"the history could not record the verdict ({what(error)})"
            reason = f"{item.history_failed}; denied for safety"
            response = gate_denial(item.inbox.session_id, self.clock, reason)
            item.verdict = replace(item.verdict, response=response, body=encode_response(response),
                                   outcome="fail-safe")
