"""The command line's commands, one module each (`serve`, `run`, `app`, `demo`, `history`, `explain`),
and what they share: their options and arguments, the node they build (`node`), the log."""
