"""The objects hutchd answers, as typed dataclasses."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

__all__ = [
    "SandboxInfo",
    "VolumeMount",
    "NetworkPolicy",
    "Metrics",
    "SnapshotInfo",
    "ExecResult",
    "StartEvent",
    "OutputEvent",
    "ExitEvent",
    "DroppedEvent",
    "ExecEvent",
    "ProcessInfo",
    "EntryInfo",
    "WriteInfo",
    "VolumeInfo",
    "TemplateInfo",
    "TemplateStep",
    "TemplateLog",
    "CodeResult",
    "CodeError",
    "OutputLine",
    "Execution",
    "CodeContext",
    "PortResponse",
]


def _s(d: Dict[str, Any], k: str) -> str:
    v = d.get(k)
    return "" if v is None else str(v)


def _i(d: Dict[str, Any], k: str) -> int:
    v = d.get(k)
    return int(v) if isinstance(v, (int, float)) else 0


def _oi(d: Dict[str, Any], k: str) -> Optional[int]:
    v = d.get(k)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass
class VolumeMount:
    """A named volume mounted into a sandbox at create."""

    name: str
    path: str
    read_only: bool = False

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"name": self.name, "path": self.path}
        if self.read_only:
            d["read_only"] = True
        return d


@dataclass
class NetworkPolicy:
    """A sandbox's network: ``none`` (loopback only), ``all``, or ``policy``
    with ``allow``/``deny`` lists of domains and IPv4 CIDRs and a ``default``."""

    mode: str = "none"
    default: Optional[str] = None
    allow: List[str] = field(default_factory=list)
    deny: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"mode": self.mode}
        if self.mode == "policy":
            if self.default:
                d["default"] = self.default
            d["allow"] = list(self.allow)
            d["deny"] = list(self.deny)
        return d

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> NetworkPolicy:
        return cls(mode=_s(d, "mode") or "none", default=d.get("default"),
                   allow=list(d.get("allow") or []), deny=list(d.get("deny") or []))


@dataclass
class SandboxInfo:
    """A sandbox's state as the server last reported it."""

    id: str
    template: str = ""
    status: str = ""
    created_at: str = ""
    expires_at: str = ""
    metadata: Dict[str, str] = field(default_factory=dict)
    cpu: float = 0.0
    memory_mb: int = 0
    disk_mb: int = 0
    driver: str = ""
    reason: str = ""
    paused_by: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> SandboxInfo:
        return cls(id=_s(d, "id"), template=_s(d, "template"), status=_s(d, "status"),
                   created_at=_s(d, "created_at"), expires_at=_s(d, "expires_at"),
                   metadata=dict(d.get("metadata") or {}), cpu=float(d.get("cpu") or 0),
                   memory_mb=_i(d, "memory_mb"), disk_mb=_i(d, "disk_mb"), driver=_s(d, "driver"),
                   reason=_s(d, "reason"), paused_by=_s(d, "paused_by"), raw=d)


@dataclass
class Metrics:
    cpu_seconds: float
    memory_bytes: int
    memory_peak_bytes: int
    pids: int
    oom_kills: int
    disk_used_bytes: int
    disk_limit_bytes: int
    net_rx_bytes: int
    net_tx_bytes: int
    uptime_ms: int

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> Metrics:
        return cls(cpu_seconds=float(d.get("cpu_seconds") or 0), memory_bytes=_i(d, "memory_bytes"),
                   memory_peak_bytes=_i(d, "memory_peak_bytes"), pids=_i(d, "pids"),
                   oom_kills=_i(d, "oom_kills"), disk_used_bytes=_i(d, "disk_used_bytes"),
                   disk_limit_bytes=_i(d, "disk_limit_bytes"), net_rx_bytes=_i(d, "net_rx_bytes"),
                   net_tx_bytes=_i(d, "net_tx_bytes"), uptime_ms=_i(d, "uptime_ms"))


@dataclass
class SnapshotInfo:
    id: str
    sandbox_id: str = ""
    template: str = ""
    status: str = ""
    created_at: str = ""
    size_bytes: int = 0
    memory: bool = False

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> SnapshotInfo:
        return cls(id=_s(d, "id"), sandbox_id=_s(d, "sandbox_id"), template=_s(d, "template"),
                   status=_s(d, "status"), created_at=_s(d, "created_at"),
                   size_bytes=_i(d, "size_bytes"), memory=bool(d.get("memory")))


@dataclass
class ExecResult:
    """The outcome of a command. A non-zero exit is not an exception."""

    exit_code: int
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""
    timed_out: bool = False
    oom_killed: bool = False
    duration_ms: int = 0
    truncated: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    pid: int = 0

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> ExecResult:
        def out(name: str) -> bytes:
            b64 = d.get(name + "_b64")
            if isinstance(b64, str) and b64:
                return base64.b64decode(b64)
            return _s(d, name).encode()

        return cls(exit_code=_i(d, "exit_code"), stdout_bytes=out("stdout"), stderr_bytes=out("stderr"),
                   timed_out=bool(d.get("timed_out")), oom_killed=bool(d.get("oom_killed")),
                   duration_ms=_i(d, "duration_ms"), truncated=bool(d.get("truncated")),
                   stdout_truncated=bool(d.get("stdout_truncated")),
                   stderr_truncated=bool(d.get("stderr_truncated")))


@dataclass
class StartEvent:
    """The command started (``pid`` inside the sandbox; ``offset`` for a reattach)."""

    pid: int
    offset: int = 0


@dataclass
class OutputEvent:
    """A chunk of output (at most 64 KiB, not split at lines)."""

    stream: str  # "stdout" or "stderr"
    data: bytes
    offset: Optional[int] = None  # processes: the offset just past these bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


@dataclass
class DroppedEvent:
    """A reattach asked for output older than the server kept."""

    from_offset: int
    oldest: int
    dropped_bytes: int


@dataclass
class ExitEvent:
    exit_code: int
    duration_ms: int = 0
    timed_out: bool = False
    oom_killed: bool = False


ExecEvent = Union[StartEvent, OutputEvent, DroppedEvent, ExitEvent]


@dataclass
class ProcessInfo:
    """A background process (or a running foreground command)."""

    pid: int
    cmd: Optional[str] = None
    argv: List[str] = field(default_factory=list)
    status: str = ""
    running: bool = False
    background: bool = True
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    timed_out: bool = False
    oom_killed: bool = False
    started_at: str = ""
    ended_at: Optional[str] = None
    stdin_open: bool = False
    output_bytes: int = 0
    output_oldest: int = 0

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> ProcessInfo:
        return cls(pid=_i(d, "pid"), cmd=d.get("cmd"), argv=list(d.get("argv") or []),
                   status=_s(d, "status"), running=bool(d.get("running")),
                   background=bool(d.get("background", True)), exit_code=_oi(d, "exit_code"),
                   signal=_oi(d, "signal"), timed_out=bool(d.get("timed_out")),
                   oom_killed=bool(d.get("oom_killed")), started_at=_s(d, "started_at"),
                   ended_at=d.get("ended_at"), stdin_open=bool(d.get("stdin_open")),
                   output_bytes=_i(d, "output_bytes"), output_oldest=_i(d, "output_oldest"))


@dataclass
class EntryInfo:
    """A file, directory or link in a sandbox or volume (of the link itself for a symlink)."""

    name: str
    path: str
    type: str  # file, dir, symlink, other
    size: int = 0
    mode: int = 0
    mtime: str = ""
    uid: int = 0
    gid: int = 0
    symlink_target: Optional[str] = None

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> EntryInfo:
        return cls(name=_s(d, "name"), path=_s(d, "path"), type=_s(d, "type"), size=_i(d, "size"),
                   mode=_i(d, "mode"), mtime=_s(d, "mtime"), uid=_i(d, "uid"), gid=_i(d, "gid"),
                   symlink_target=d.get("symlink_target"))


@dataclass
class WriteInfo:
    path: str
    size: int


@dataclass
class VolumeInfo:
    name: str
    size_mb: int = 0
    created_at: str = ""
    used_bytes: int = 0
    in_use_by: List[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> VolumeInfo:
        return cls(name=_s(d, "name"), size_mb=_i(d, "size_mb"), created_at=_s(d, "created_at"),
                   used_bytes=_i(d, "used_bytes"), in_use_by=list(d.get("in_use_by") or []))


@dataclass
class TemplateInfo:
    name: str
    hash: str = ""
    from_: str = ""
    status: str = ""
    built_at: str = ""
    size_bytes: int = 0
    alias: Optional[str] = None
    cached: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> TemplateInfo:
        return cls(name=_s(d, "name"), hash=_s(d, "hash"), from_=_s(d, "from"), status=_s(d, "status"),
                   built_at=_s(d, "built_at"), size_bytes=_i(d, "size_bytes"), alias=d.get("alias"),
                   raw=d)


@dataclass
class TemplateStep:
    index: int
    of: int
    name: str
    detail: str = ""
    percent: int = 0


@dataclass
class TemplateLog:
    step: str
    stream: str
    text: str


@dataclass
class OutputLine:
    text: str
    timestamp: str = ""


@dataclass
class CodeResult:
    """One result of a run, in every form the kernel gave (images base64)."""

    is_main_result: bool = False
    text: Optional[str] = None
    html: Optional[str] = None
    markdown: Optional[str] = None
    svg: Optional[str] = None
    png: Optional[str] = None
    jpeg: Optional[str] = None
    pdf: Optional[str] = None
    latex: Optional[str] = None
    javascript: Optional[str] = None
    json: Any = None
    data: Any = None
    chart: Any = None
    extra: Any = None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> CodeResult:
        return cls(is_main_result=bool(d.get("is_main_result")),
                   **{k: d.get(k) for k in ("text", "html", "markdown", "svg", "png", "jpeg", "pdf",
                                            "latex", "javascript", "json", "data", "chart", "extra")})


@dataclass
class CodeError:
    """The exception a run raised (or ``TimeoutError`` after its timeout)."""

    name: str
    value: str
    traceback: str = ""


@dataclass
class Execution:
    """What one ``run_code`` gave."""

    stdout: List[OutputLine] = field(default_factory=list)
    stderr: List[OutputLine] = field(default_factory=list)
    results: List[CodeResult] = field(default_factory=list)
    error: Optional[CodeError] = None
    execution_count: int = 0
    timed_out: bool = False

    @property
    def text(self) -> Optional[str]:
        """The main result's text (``None`` when the last line had no value)."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    @property
    def stdout_text(self) -> str:
        return "".join(line.text for line in self.stdout)

    @property
    def stderr_text(self) -> str:
        return "".join(line.text for line in self.stderr)


@dataclass
class CodeContext:
    id: str
    language: str
    cwd: str

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> CodeContext:
        return cls(id=_s(d, "id"), language=_s(d, "language"), cwd=_s(d, "cwd"))


@dataclass
class PortResponse:
    """The answer of a server inside the sandbox, relayed through an exposed port."""

    status: int
    headers: Dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")
