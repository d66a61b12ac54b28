"""The lines of E2B's /execute stream, built in one place.

Every line the server writes is one JSON object of E2B's code-interpreter
wire (docs/compat-code-interpreter in the design notes): the SDKs parse
each line on its own, so a line never holds a newline, and fields that
would be null are left out (the Python SDK builds its Result from the
line's keys, so a key it does not know breaks it: only E2B's keys appear).
"""

import datetime
import json
import math

# MIME types of a Jupyter display bundle → E2B's result keys.
MIME_KEYS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
}

# Our own MIME types, produced by the kernel's formatters
# (kernel_startup.py): a DataFrame's columns and a matplotlib chart.
DATA_MIME = "application/vnd.hutch.data+json"
CHART_MIME = "application/vnd.hutch.chart+json"


def _now() -> str:
    # ISO-8601 with an explicit UTC offset: the callbacks of the SDKs pass it on.
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def _finite(value):
    """NaN and infinities as null: JSON has no such numbers, and JavaScript's
    JSON.parse (the JS SDK) rejects the NaN that Python's json writes."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def encode(line: dict) -> bytes:
    """One wire line; json.dumps escapes newlines inside strings."""
    try:
        text = json.dumps(line, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(line), ensure_ascii=False, separators=(",", ":"))
    return text.encode() + b"\n"


def stream(name: str, text: str) -> dict:
    return {"type": name, "text": text, "timestamp": _now()}


def strip_quotes(text: str) -> str:
    """The repr of a str comes quoted ('abc'); E2B gives the bare text."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


# The kernel's text/plain as it came, kept beside `text` (unquoted, for
# E2B) until the line is written: ExecuteStream sends one of the two.
RAW_TEXT = "_raw_text"


def result(bundle: dict, is_main: bool) -> dict:
    """A result line from a MIME bundle (Jupyter's `data` of a display)."""
    line = {"type": "result", "is_main_result": is_main}
    extra = {}
    for mime, value in bundle.items():
        if value is None:
            continue
        if mime == "text/plain":
            line["text"] = strip_quotes(value)
            line[RAW_TEXT] = value
        elif mime in MIME_KEYS:
            line[MIME_KEYS[mime]] = value
        elif mime == DATA_MIME:
            line["data"] = value
        elif mime == CHART_MIME:
            line["chart"] = value
        else:
            extra[mime] = value
    if extra:
        line["extra"] = extra
    return line


def text_result(text: str, is_main: bool = True) -> dict:
    return result({"text/plain": text}, is_main)


def error(name: str, value: str, traceback: str) -> dict:
    return {"type": "error", "name": name, "value": value, "traceback": traceback}


def execution_count(n: int) -> dict:
    return {"type": "number_of_executions", "execution_count": n}


def keepalive() -> dict:
    return {"type": "keepalive"}


def end_of_execution() -> dict:
    return {"type": "end_of_execution"}
