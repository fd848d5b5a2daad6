"""A durable, reviewable history of every ask served (SQLite, WAL), and what it can suggest."""

from core.history.queries import HistoryFilter, HistoryReader, Summary
from core.history.rows import HistoryRow
from core.history.schema import VERSION, HistoryTooNew, migrate
from core.history.store import HISTORY_FILE, HistoryStore
from core.history.transactions import Retention

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
