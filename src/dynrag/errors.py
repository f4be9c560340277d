"""User-facing errors: one line that names the bad input; the CLI prints it without a traceback."""


class DynragError(Exception):
    """An error caused by the user's input or environment, with a message fit to show as is."""


class DataError(DynragError):
    """A data file could not be read; the message names the file and, where known, the line."""

    def __init__(self, path: str, message: str, line: int | None = None):
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (library errors run to many lines), or its type's
    name when the message is empty: what a one-line error can quote."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class IndexDirError(DynragError):
    """A missing, corrupt or incompatible index directory."""


IndexError_ = IndexDirError  # the old name, for code written against it; use IndexDirError


class ConfigError(DynragError):
    """An unknown or invalid option, model spec or method name."""


class FileError(DynragError):
    """A file or directory could not be read or written (read-only or full disk, no permission,
    an I/O error); the message names the path and the operating system's reason."""
