"""Reading one config or agent file with bounds: a regular file of at most `MAX_CONFIG_BYTES`.

The size is checked with `fstat` on the opened descriptor before anything is read (a 300 MB file
used to hang loading), the read itself stops one byte past the limit (a file that grows after the
check), and a FIFO or device is refused instead of blocking the server. Links are followed: a
config symlinked from a dotfiles repository is ordinary.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: The largest config or agent file read (a 5,000-rule config is about 200 KiB).
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: The deepest nesting of objects and arrays accepted in a config file.
MAX_CONFIG_NESTING = 64
_CHUNK = 1 << 16


class ConfigFileRefused(OSError):
    """The file is not something a config may be: too large, or not a regular file."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


def read_config_text(path: Path, *, lenient: bool = False) -> str:
    """The file's text (UTF-8); raises `ConfigFileRefused`, `OSError` or `UnicodeDecodeError`.

    `lenient` decodes as node's `readFileSync(path, "utf-8")` does (pi's reading): each invalid
    sequence becomes U+FFFD instead of an error, so pi's rules in such a file still count.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigFileRefused("not a regular file")
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigFileRefused(too_large(info.st_size))
        chunks: list[bytes] = []
        total = 0
        while total <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > MAX_CONFIG_BYTES:
            raise ConfigFileRefused(too_large(total))
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace" if lenient else "strict")


def too_large(size: int) -> str:
    return f"file too large ({size:,} bytes; the limit is {MAX_CONFIG_BYTES:,})"
