"""Writes API.md, the SDK's reference, from the package's docstrings and
signatures (``python tools/apidoc.py``; ``--check`` fails when API.md is
out of date, as tests/compat/pysdk/test_apidoc.py does)."""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path
from typing import Any, List

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

import hutch  # noqa: E402
import hutch.aio  # noqa: E402

SECTIONS = [
    ("Client and sandboxes", ["Client", "Sandbox", "SandboxPager", "RetryPolicy", "CommandError"]),
    ("Commands and processes", ["ExecStream", "Processes", "Process", "ExecResult", "StartEvent", "OutputEvent",
                                "DroppedEvent", "ExitEvent", "ProcessInfo"]),
    ("Files", ["Files", "FileReader", "EntryInfo", "WriteInfo"]),
    ("Terminal", ["Pty"]),
    ("Volumes, snapshots, templates", ["Volumes", "Volume", "VolumeInfo", "VolumeMount", "Snapshots",
                                       "SnapshotInfo", "Templates", "TemplateBuild", "TemplateInfo",
                                       "TemplateStep", "TemplateLog"]),
    ("Network, ports, metrics", ["NetworkPolicy", "PortResponse", "Metrics", "SandboxInfo"]),
    ("Code interpreter", ["Execution", "CodeResult", "CodeError", "OutputLine", "CodeContext"]),
]


def _doc(obj: Any) -> str:
    d = inspect.getdoc(obj) or ""
    return d.strip()


def _sig(obj: Any) -> str:
    try:
        s = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    s = s.replace("'", "")
    for first in ("(self, ", "(cls, "):
        s = s.replace(first, "(", 1)
    return s.replace("(self)", "()").replace("(cls)", "()")


def _class(name: str, cls: type, out: List[str], prefix: str = "hutch") -> None:
    out.append(f"### `{prefix}.{name}`\n")
    if _doc(cls):
        out.append(_doc(cls) + "\n")
    for mname, member in cls.__dict__.items():
        if mname.startswith("_") and mname not in ("__init__",):
            continue
        if isinstance(member, property):
            doc = _doc(member)
            out.append(f"- `{mname}` (property)" + (f": {doc.splitlines()[0]}" if doc else ""))
            continue
        fn = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
        if not inspect.isfunction(fn):
            continue
        if mname == "__init__" and dataclasses.is_dataclass(cls):
            continue
        label = name if mname == "__init__" else mname
        out.append(f"- `{label}{_sig(fn)}`")
        doc = inspect.cleandoc(fn.__doc__ or "")
        if doc:
            out.append("\n".join("  " + line if line else "" for line in doc.splitlines()))
    out.append("")


def render() -> str:
    out = ["# hutch Python SDK: API reference", "",
           "Generated from the docstrings by `tools/apidoc.py`; do not edit by hand. The guide is README.md.", ""]
    for title, names in SECTIONS:
        out.append(f"## {title}\n")
        for n in names:
            _class(n, getattr(hutch, n), out)
    out.append("## Errors\n")
    out.append(_doc(hutch.errors) + "\n")
    out.append("| class | code | base |\n|---|---|---|")
    for n in hutch.errors.__all__:
        obj = getattr(hutch.errors, n)
        if isinstance(obj, type) and issubclass(obj, Exception):
            base = obj.__mro__[1].__name__
            out.append(f"| `{n}` | `{getattr(obj, 'code', '') or '-'}` | `{base}` |")
    out.append("")
    _class("HutchError", hutch.HutchError, out)
    out.append("## asyncio (`hutch.aio`)\n")
    out.append(_doc(hutch.aio) + "\n")
    for n in hutch.aio.__all__:
        _class(n, getattr(hutch.aio, n), out, "hutch.aio")
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    text = render()
    path = HERE / "API.md"
    if "--check" in sys.argv:
        if not path.exists() or path.read_text() != text:
            print("sdk/python/API.md is out of date: run python3 sdk/python/tools/apidoc.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
