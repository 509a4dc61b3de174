"""User-facing errors.

A :class:`ConceptforgeError` carries one line that says what is wrong and how to fix it. The
command lines print exactly that line and exit non-zero; anything else is a bug and keeps its
traceback.
"""

import re


class ConceptforgeError(Exception):
    """An error caused by the user's input or environment, with a one-line fix-it message."""

    exit_code: int = 2

    def __init__(self, message: str) -> None:
        # One line only: the CLI prints it verbatim.
        super().__init__(" ".join(str(message).split()))


_STACKTRACE_HINT = re.compile(r"\s*(Please check out the root cause in the stacktrace above|see the stack ?trace above)[^.]*\.?", re.IGNORECASE)


def one_line(error: BaseException, *, limit: int = 500) -> str:
    """A library exception as one line for a :class:`ConceptforgeError` message.

    The first line of its message, without "check the stacktrace above" (a command line shows no
    stack trace); when the library hid the real reason behind that phrase, its cause is appended.
    """
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else type(error).__name__
    stripped = _STACKTRACE_HINT.sub("", text).strip()
    cause = error.__cause__ or error.__context__
    if stripped != text and cause is not None:
        cause_lines = str(cause).strip().splitlines()
        stripped = f"{stripped.rstrip('.')} ({type(cause).__name__}: {cause_lines[0] if cause_lines else ''})".replace(": )", ")")
    stripped = " ".join(stripped.split())
    return stripped if len(stripped) <= limit else stripped[: limit - 1] + "…"
