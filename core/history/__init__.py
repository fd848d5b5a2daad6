"""A durable, reviewable history of every ask served (SQLite, WAL), and what it can suggest."""

from core.history.schema import VERSION, HistoryTooNew, migrate
from core.history.store import (
    HISTORY_FILE,
    HistoryFilter,
    HistoryReader,
    HistoryRow,
    HistoryStore,
    Retention,
    Summary,
)

__all__ = [
    "HISTORY_FILE",
    "VERSION",
    "HistoryFilter",
    "HistoryReader",
    "HistoryRow",
    "HistoryStore",
    "HistoryTooNew",
    "Retention",
    "Summary",
    "migrate",
]
