"""A durable, reviewable history of every ask served (SQLite, WAL), and what it can suggest.

`HistoryStore` (`store`) is the serving core's ledger and observer and the app's queries; it holds a
`HistoryWriter` (`transactions`: the file's transactions, the queue of what is not written yet, its
`spool` between runs, retention) and `HistoryReader`s (`queries`). `table` (the asks table: every
statement), `rows` (the columns) and `schema` are the table; `suggest`, `rule_edit` and `review_log`
are what the review screen and the `history` command build on it (rule suggestions, their edit of a
rules file, pi's own review log imported); `overturn`, the rule that reverses a model judge's verdict.
"""

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
