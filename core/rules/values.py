"""How a surface's match values are read before matching, as the reference reads them.

Path values are matched exactly as the child sent them: the child already produced every alias
(`docs/design/contract.md` § Facts and judgment), and the reference does not home-expand values. A bash
command is matched as the reference's input normaliser reads it: comment lines (first non-blank
character `#`) dropped and the rest trimmed of JavaScript whitespace; a command with nothing left is
matched as written.
"""

from __future__ import annotations

import re

# JavaScript's `\s` and `String.prototype.trim` set: whitespace plus line terminators.
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
_COMMENT_LINE = re.compile(f"^[{_JS_SPACE}]*#")


def js_trim(text: str) -> str:
    """`String.prototype.trim`: not `str.strip`, whose whitespace set differs (e.g. U+FEFF, U+001C)."""
    return text.strip(_JS_SPACE)


def bash_match_value(command: str) -> str:
    """The text bash rules are matched against: comment lines stripped, then trimmed."""
    if "#" not in command:  # no comment line: the command, trimmed (`js_trim`, in place: every bash ask)
        return command.strip(_JS_SPACE) or command
    kept = [line for line in command.split("\n") if not _COMMENT_LINE.match(line)]
    return js_trim("\n".join(kept)) or command
