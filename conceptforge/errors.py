"""User-facing errors.

A :class:`ConceptforgeError` carries one line that says what is wrong and how to fix it. The
command lines print exactly that line and exit non-zero; anything else is a bug and keeps its
traceback.
"""


class ConceptforgeError(Exception):
    """An error caused by the user's input or environment, with a one-line fix-it message."""

    exit_code: int = 2

    def __init__(self, message: str) -> None:
        # One line only: the CLI prints it verbatim.
        super().__init__(" ".join(str(message).split()))
