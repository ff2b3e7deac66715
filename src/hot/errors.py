"""How the ``hot`` commands report an error: one line naming the problem, exit 2 for bad input, 1 for a failed run.

Bad input is what the command was given and cannot use (a config value, a file or dataset that is missing or
unreadable, a device that is not there): ``ValueError`` (``json.JSONDecodeError`` included), the ``OSError`` s of a
path that is not there or not readable, and :class:`InputError`. Anything else that ends a command is a failed run.
"""

from __future__ import annotations

BAD_INPUT_EXIT, FAILED_EXIT = 2, 1
_PATH_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)


class InputError(Exception):
    """Marks an error class as bad input (exit 2) whose base class is not ``ValueError`` (e.g. a ``RuntimeError``)."""


def is_bad_input(err: BaseException) -> bool:
    return isinstance(err, (ValueError, InputError, *_PATH_ERRORS))


def exit_code(err: BaseException) -> int:
    return BAD_INPUT_EXIT if is_bad_input(err) else FAILED_EXIT


def one_line(err: BaseException) -> str:
    """The error's message on one line; a failed run's also names the error's type (its message may not)."""
    text = " ".join(str(err).split())
    if is_bad_input(err) and text:
        return text
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
