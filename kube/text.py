"""Text from the input as it may be shown: on a terminal, in a chart or in a report."""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on (ESC and the other control
    characters, bidi overrides, line breaks) written as its escape: a pod named
    ``"p\\x1b[2J"`` is shown as ``p\\x1b[2J`` instead of clearing the screen."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
