"""Answered requests removed from their inboxes: the publisher's last stage, on a worker of its own
(an unlink can wait on the disk; the next batch must not wait behind it)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from core.disk.entries import remove
from core.forwarding.inbox import display_name
from core.serving.asks import AskKey
from core.serving.verdicts import BatchItem, Published
from core.text import log_safe

log = logging.getLogger("pi_authorizer.publish")


def remove_answered(answered: Sequence[tuple[BatchItem, Published]]) -> list[tuple[AskKey, Published]]:
    """Delete answered requests (one folder descriptor per session); those gone, a child's removal
    included."""
    folders: dict[str, list[tuple[BatchItem, Published]]] = {}
    for pair in answered:
        folders.setdefault(pair[0].inbox.folder_name, []).append(pair)
    gone: list[tuple[AskKey, Published]] = []
    for group in folders.values():
        inbox = group[0][0].inbox
        try:
            fd = inbox.tree.open(("sessions", inbox.folder_name, "requests"))
        except FileNotFoundError:
            gone += [(item.verdict.key, published) for item, published in group]
            continue
        except OSError:
            continue
        try:
            for item, published in group:
                try:
                    remove(fd, item.verdict.key.name)
                except OSError as exc:
                    log.warning("deleting answered request %s failed: %s",
                                log_safe(display_name(item.verdict.key.name)), exc)
                    continue
                gone.append((item.verdict.key, published))
        finally:
            os.close(fd)
    return gone
