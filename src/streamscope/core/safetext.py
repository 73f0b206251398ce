"""Text from a program or a run file, made safe for a terminal.

In: any text that streamscope did not write itself (a thread's, a function's or a queue's name,
an error, a note, a SQL value). Out: the same text with each control character written as its
escape (``\\x1b``, ``\\x07``, ``\\x9b``, ``\\u202e``), so that nothing in it can move the cursor,
clear the screen, retitle the window or turn the line around; printable text of any script is
kept as it is, and so are newlines and tabs.
"""

from __future__ import annotations

import re

__all__ = ["UNSAFE", "safe_text"]

#: What a terminal would act on rather than show: C0 controls but tab and newline, DEL, the
#: C1 controls (U+009B is a one-character CSI), and the bidirectional overrides and isolates
#: (which reorder what follows them on the line).
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str) -> str:
    """``text`` with each control character (``UNSAFE``) written as its escape: ``'a\\x1b[2J'``
    (ESC, ``[2J``) → ``'a\\\\x1b[2J'`` (a backslash, ``x1b[2J``). Idempotent; ``text`` itself
    where it holds none."""
    return UNSAFE.sub(_escaped, text) if UNSAFE.search(text) else text
