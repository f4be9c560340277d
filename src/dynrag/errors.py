"""User-facing errors: one line that names the bad input; the CLI prints it without a traceback.

Every message reads ``WHERE: what is wrong (what would be right)``; ``json_problem`` and
``plain_error`` put the errors of json and pydantic in those words, so their wording never leaks.
"""

from __future__ import annotations

from typing import Any


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


# ---- JSON syntax errors: one wording for every reader ---------------------------------------------

# What would be right, by the start of json's message. json's messages end mid-sentence ("Invalid
# control character at") because str(exc) appends ": line L column C (char P)"; they are quoted
# from ``exc.msg`` with that dangling "at" dropped, never from str(exc).
_JSON_HINTS = (
    ("Invalid control character", "a tab or line break inside a string is written \\t or \\n"),
    ("Expecting ',' delimiter", "items of a list or object are separated by ','"),
    ("Expecting ':' delimiter", "each key is followed by ':' and its value"),
    ("Expecting property name", "keys are in double quotes, and no ',' follows the last item"),
    ("Expecting value", 'a value goes here: a "string", a number, true, false, null, [...] or {...}'),
    ("Extra data", "one JSON value only; a JSONL file holds one object per line"),
    ("Invalid \\uXXXX", "\\u is followed by four hex digits"),
    ("Invalid \\escape", "a backslash inside a string is written \\\\"),
    ("Illegal trailing comma", "no ',' follows the last item"),
)
_CUT_SHORT = "the text ends before the JSON does: is the file cut short?"


def json_problem(exc: ValueError) -> str:
    """What is wrong with text that ``json`` could not parse, in words fit for a message, without
    the file and line (``json_error`` adds them):
    ``not valid JSON: expecting ',' delimiter at column 12 (items of a list ... are separated by ',')``.

    ``exc`` is a ``json.JSONDecodeError`` or the ``UnicodeDecodeError`` that ``json.loads`` raises
    for bytes that are not UTF-8; any other ValueError is quoted by its first line."""
    import json

    if isinstance(exc, json.JSONDecodeError):
        msg = exc.msg.removesuffix(" at")
        if msg.startswith("Unexpected UTF-8 BOM"):  # json's own advice names a Python codec
            return "not valid JSON: it starts with a byte-order mark (save it as UTF-8 without one)"
        cut_short = msg.startswith("Unterminated string") or not exc.doc[exc.pos:].strip()
        hint = _CUT_SHORT if cut_short else next((h for start, h in _JSON_HINTS if msg.startswith(start)), None)
        text = f"not valid JSON: {msg[:1].lower()}{msg[1:]} at column {_json_place(exc)[1]}"
        return f"{text} ({hint})" if hint else text
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: {exc.reason} at byte {exc.start + 1} (save the file as UTF-8)"
    return f"not valid JSON: {first_line(exc)}"


def json_error(path: object, exc: ValueError, first: int | None = None) -> DataError:
    """``FILE:LINE: not valid JSON: ... at column C (...)`` (see ``json_problem``) for text that
    starts on line ``first`` of ``path`` (a JSONL line is parsed alone, so json counts its lines
    from 1); None: the whole file. ``str()`` of it is the message, for a caller that wraps it."""
    line = first
    if hasattr(exc, "doc"):
        line = (first or 1) + _json_place(exc)[0] - 1
    return DataError(str(path), json_problem(exc), line)


def _json_place(exc: Any) -> tuple[int, int]:
    """(line, column) of a JSON error, counted from 1. Text that stops short is blamed where its
    last line ends, not on the empty line after its final newline (json's own lineno and colno):
    a JSONL line parsed with its newline would otherwise be reported one line too far."""
    pos = min(exc.pos, len(exc.doc.rstrip()))
    start = exc.doc.rfind("\n", 0, pos) + 1
    return exc.doc.count("\n", 0, pos) + 1, pos - start + 1


# ---- pydantic's validation errors in plain words -------------------------------------------------

# By pydantic's error type; "{ge}" and the like are filled from the error's ctx.
_PLAIN = {
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "greater_than": "must be more than {gt}",
    "less_than": "must be less than {lt}",
    "multiple_of": "must be a multiple of {multiple_of}",
    "finite_number": "must be a finite number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "int_type": "must be a whole number",
    "int_parsing_size": "is too large a number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "literal_error": "must be {expected}",
    "enum": "must be {expected}",
    "string_type": "must be text",
    "string_too_short": "must be at least {min_length} characters long",
    "string_too_long": "must be at most {max_length} characters long",
    "string_pattern_mismatch": "must match the pattern {pattern}",
    "too_short": "must hold at least {min_length} items",
    "too_long": "must hold at most {max_length} items",
    "list_type": "must be a list",
    "dict_type": "must be a mapping of keys to values",
    "path_type": "must be a path",
    "none_required": "must be null",
    "missing": "is required",
    "extra_forbidden": "unknown key",
}
# Types whose input is not quoted: it is absent (missing) or beside the point (an unknown key).
_NO_INPUT = {"missing", "extra_forbidden"}
# Number bounds: the input parsed as a number, so "(got 0)" even where it was typed as text.
_BOUNDS = {"greater_than_equal", "less_than_equal", "greater_than", "less_than", "multiple_of"}


def plain_error(err: Any) -> str:
    """One pydantic error (an item of ``ValidationError.errors()``) in plain words, without its
    location, which the caller names once: ``must be at least 1 (got 0)``.

    Common types have their own words; any other keeps pydantic's message with its "Input should
    be" turned into "must be", and a validator's own message loses pydantic's "Value error, "."""
    kind = err.get("type", "")
    # a bound on a float field is a float: "at least 1", not "at least 1.0"
    ctx = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in (err.get("ctx") or {}).items()}
    try:
        what = _PLAIN[kind].format(**ctx)
    except (KeyError, IndexError):
        msg = str(err.get("msg", "is not valid"))
        for prefix in ("Value error, ", "Assertion failed, "):
            msg = msg.removeprefix(prefix)
        if msg.startswith("Input should "):
            msg = "must " + msg.removeprefix("Input should ")
        what = msg[:1].lower() + msg[1:] if msg[1:2].islower() else msg
    if kind in _NO_INPUT or "input" not in err or isinstance(err["input"], (dict, list)):
        return what
    return f"{what} (got {_shown(err['input'], kind in _BOUNDS)})"


def _shown(value: Any, number: bool) -> str:
    text = str(value) if number and isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
