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


class ConfigError(DynragError):
    """An unknown or invalid option, model spec or method name."""


class FileError(DynragError):
    """A file or directory could not be read or written (read-only or full disk, no permission,
    an I/O error); the message names the path and the operating system's reason."""


def unencodable(value: object) -> str | None:
    """What in ``value`` cannot be written as UTF-8, in words fit for an error message; None when
    all of it can.

    ``value`` is a string or a JSON-like structure of them (lists, and dicts whose keys are checked
    too). The only characters UTF-8 cannot encode are lone surrogates (U+D800 to U+DFFF). Text read
    as strict UTF-8 never holds one, but a ``\\uDXXX`` escape without its pair in JSON or YAML
    does, and so does a command-line argument holding bytes that are not UTF-8 (Python turns each
    such byte into a surrogate). The message names the place inside ``value`` (``contexts[0].text``)
    and shows the character escaped, so that the message itself can be printed and sent.
    """
    return _unencodable(value, "")


def _unencodable(value: object, where: str) -> str | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            at = f"{where} " if where else ""
            char = value[exc.start]
            shown = char.encode("utf-8", "backslashreplace").decode("ascii")
            return (f"{at}cannot be encoded as UTF-8: character {exc.start + 1} is a lone surrogate ({shown}), "
                    "left by a byte that is not UTF-8 or by a \\uDXXX escape without its pair")
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            name = str(key)
            problem = _unencodable(name, f"a key in {where}" if where else "a key")
            if problem is None:
                problem = _unencodable(item, f"{where}.{name}" if where else name)
            if problem is not None:
                return problem
        return None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            problem = _unencodable(item, f"{where}[{i}]")
            if problem is not None:
                return problem
    return None


def check_encodable(text: object, where: str) -> None:
    """Raise a ``DynragError`` naming ``where`` (e.g. "the question") when ``text`` holds a
    character UTF-8 cannot encode (see ``unencodable``)."""
    problem = _unencodable(text, where)
    if problem is not None:
        raise DynragError(problem)
