"""Typed errors: one exception class per stable hutch error code.

Every error the server answers is a :class:`HutchError` subclass chosen by
its ``code`` (docs/api.md, "Auth, request ids, errors"). Catch a class, or
match ``err.code``; never match message strings, which may change.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type

__all__ = [
    "HutchError",
    "InvalidRequestError",
    "UnauthorizedError",
    "ForbiddenError",
    "QuotaExceededError",
    "NotFoundError",
    "SandboxNotFoundError",
    "TemplateNotFoundError",
    "SnapshotNotFoundError",
    "VolumeNotFoundError",
    "FileNotFoundInSandboxError",
    "ProcessNotFoundError",
    "MethodNotAllowedError",
    "ConflictError",
    "SandboxNotRunningError",
    "SandboxExpiredError",
    "SandboxResourceExhaustedError",
    "PayloadTooLargeError",
    "RangeNotSatisfiableError",
    "FilesystemError",
    "NotADirectoryInSandboxError",
    "IsADirectoryInSandboxError",
    "PermissionDeniedError",
    "NoSpaceError",
    "BuildFailedError",
    "RateLimitedError",
    "HeadersTooLargeError",
    "InternalError",
    "PortUnreachableError",
    "StorageFullError",
    "NotSupportedError",
    "CapacityExhaustedError",
    "UnavailableError",
    "AgentTimeoutError",
    "HutchConnectionError",
    "StreamEndedError",
    "error_class",
    "RETRYABLE_CODES",
]

#: The codes docs/api.md marks ``"retryable": true``.
RETRYABLE_CODES = frozenset(
    {
        "rate_limited",
        "capacity_exhausted",
        "unavailable",
        "storage_full",
        "port_unreachable",
        "agent_timeout",
        "internal",
    }
)


class HutchError(Exception):
    """An error answered by hutchd (or, for subclasses below, met on the way).

    Attributes:
        code: the server's stable machine-readable code, e.g. ``"sandbox_not_found"``
            (``""`` when the answer was not a hutch error body, e.g. a proxy's page).
        message: a human-readable explanation.
        request_id: the server's request id (quote it in bug reports).
        retryable: whether the same request may succeed if sent again later.
        status: the HTTP status (``200`` for an ``error`` event inside a stream,
            ``0`` when no answer came).
        retry_after: the ``Retry-After`` header in seconds, when the server sent one.
    """

    code: str = ""

    def __init__(
        self,
        message: str = "",
        *,
        code: Optional[str] = None,
        request_id: str = "",
        retryable: Optional[bool] = None,
        status: int = 0,
        retry_after: Optional[float] = None,
        method: str = "",
        path: str = "",
        body: Optional[Dict[str, Any]] = None,
    ) -> None:
        if code is not None:
            self.code = code
        self.message = message
        self.request_id = request_id
        if retryable is None:
            retryable = self.code in RETRYABLE_CODES or (
                self.code == "" and status in (429, 502, 503, 504)
            )
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.method = method
        self.path = path
        #: The whole JSON error body (extra fields such as ``log_tail``).
        self.body: Dict[str, Any] = dict(body or {})
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.method} {self.path}: " if self.method else ""
        code = self.code or "error"
        s = f"hutch: {where}{self.status} {code}" if self.status else f"hutch: {where}{code}"
        if self.message:
            s += ": " + self.message
        if self.request_id:
            s += f" (request {self.request_id})"
        return s


class InvalidRequestError(HutchError):
    """400: malformed JSON, wrong types, out-of-range numbers, unknown fields."""

    code = "invalid_request"


class UnauthorizedError(HutchError):
    """401: missing or wrong API key."""

    code = "unauthorized"


class ForbiddenError(HutchError):
    """403: a tenant key changing what every key shares."""

    code = "forbidden"


class QuotaExceededError(HutchError):
    """403: a tenant key's create past one of its tenant's quotas (not retryable)."""

    code = "quota_exceeded"


class NotFoundError(HutchError):
    """404: no such thing (the base of every ``*_not_found`` code; also ``not_found``)."""

    code = "not_found"


class SandboxNotFoundError(NotFoundError):
    code = "sandbox_not_found"


class TemplateNotFoundError(NotFoundError):
    code = "template_not_found"


class SnapshotNotFoundError(NotFoundError):
    code = "snapshot_not_found"


class VolumeNotFoundError(NotFoundError):
    code = "volume_not_found"


class FileNotFoundInSandboxError(NotFoundError):
    """404 ``file_not_found``: the path does not exist in the sandbox or volume."""

    code = "file_not_found"


class ProcessNotFoundError(NotFoundError):
    code = "process_not_found"


class MethodNotAllowedError(HutchError):
    code = "method_not_allowed"


class ConflictError(HutchError):
    """409: exec on a paused sandbox, mkdir over a file, a taken name, ..."""

    code = "conflict"


class SandboxNotRunningError(ConflictError):
    """409: the sandbox is stopped (deleted or expired) or failed."""

    code = "sandbox_not_running"


class SandboxExpiredError(ConflictError):
    """409: the sandbox's TTL ran out while the command ran."""

    code = "sandbox_expired"


class SandboxResourceExhaustedError(ConflictError):
    """409: the command could not start: the sandbox is at its process or memory limit."""

    code = "sandbox_resource_exhausted"


class PayloadTooLargeError(HutchError):
    code = "payload_too_large"


class RangeNotSatisfiableError(HutchError):
    code = "range_not_satisfiable"


class FilesystemError(HutchError):
    """422: a filesystem error inside the sandbox (base of the four below)."""


class NotADirectoryInSandboxError(FilesystemError):
    code = "not_a_directory"


class IsADirectoryInSandboxError(FilesystemError):
    code = "is_a_directory"


class PermissionDeniedError(FilesystemError):
    code = "permission_denied"


class NoSpaceError(FilesystemError):
    code = "no_space"


class BuildFailedError(HutchError):
    """422: a template build step failed; ``step``, ``name``, ``exit_code``, ``log_tail``."""

    code = "build_failed"

    @property
    def step(self) -> Optional[int]:
        v = self.body.get("step")
        return v if isinstance(v, int) else None

    @property
    def step_name(self) -> str:
        return str(self.body.get("name", ""))

    @property
    def exit_code(self) -> Optional[int]:
        v = self.body.get("exit_code")
        return v if isinstance(v, int) else None

    @property
    def log_tail(self) -> str:
        return str(self.body.get("log_tail", ""))


class RateLimitedError(HutchError):
    """429: the key's rate limit; ``retry_after`` says when to retry."""

    code = "rate_limited"


class HeadersTooLargeError(HutchError):
    code = "headers_too_large"


class InternalError(HutchError):
    code = "internal"


class PortUnreachableError(HutchError):
    """502: nothing accepts connections on that port inside the sandbox."""

    code = "port_unreachable"


class StorageFullError(HutchError):
    code = "storage_full"


class NotSupportedError(HutchError):
    """501: a route of the contract this server does not implement."""

    code = "not_supported"


class CapacityExhaustedError(HutchError):
    """503: the host is at its sandbox (or memory, or connection) limit."""

    code = "capacity_exhausted"


class UnavailableError(HutchError):
    """503: the sandbox's agent was lost."""

    code = "unavailable"


class AgentTimeoutError(HutchError):
    """504: the sandbox's agent did not answer within hutchd's --agent-timeout."""

    code = "agent_timeout"


class HutchConnectionError(HutchError):
    """A transport failure: the server could not be reached, or the connection broke."""

    code = "connection_error"

    def __init__(self, message: str, *, method: str = "", path: str = "") -> None:
        super().__init__(message, retryable=True, method=method, path=path)


class StreamEndedError(HutchError):
    """A stream ended without its final event (``exit``/``end``/``done``).

    ``cause`` is the typed error of the stream's ``error`` event when the
    server said why (``sandbox_expired``, ``sandbox_not_running``, ...), else
    ``None`` (the connection or the server died).
    """

    code = "stream_ended"

    def __init__(self, cause: Optional[HutchError] = None, *, method: str = "", path: str = "") -> None:
        self.cause = cause
        msg = "stream ended without its final event"
        if cause is not None:
            msg += f": {cause.code}: {cause.message}"
        super().__init__(
            msg,
            request_id=cause.request_id if cause else "",
            retryable=False,
            method=method,
            path=path,
        )


_BY_CODE: Dict[str, Type[HutchError]] = {
    cls.code: cls
    for cls in (
        InvalidRequestError,
        UnauthorizedError,
        ForbiddenError,
        QuotaExceededError,
        NotFoundError,
        SandboxNotFoundError,
        TemplateNotFoundError,
        SnapshotNotFoundError,
        VolumeNotFoundError,
        FileNotFoundInSandboxError,
        ProcessNotFoundError,
        MethodNotAllowedError,
        ConflictError,
        SandboxNotRunningError,
        SandboxExpiredError,
        SandboxResourceExhaustedError,
        PayloadTooLargeError,
        RangeNotSatisfiableError,
        NotADirectoryInSandboxError,
        IsADirectoryInSandboxError,
        PermissionDeniedError,
        NoSpaceError,
        BuildFailedError,
        RateLimitedError,
        HeadersTooLargeError,
        InternalError,
        PortUnreachableError,
        StorageFullError,
        NotSupportedError,
        CapacityExhaustedError,
        UnavailableError,
        AgentTimeoutError,
    )
}

# A code this SDK does not know yet still gets the class of its status.
_BY_STATUS: Dict[int, Type[HutchError]] = {
    400: InvalidRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    413: PayloadTooLargeError,
    416: RangeNotSatisfiableError,
    422: FilesystemError,
    429: RateLimitedError,
    431: HeadersTooLargeError,
    500: InternalError,
    501: NotSupportedError,
    502: PortUnreachableError,
    503: UnavailableError,
    504: AgentTimeoutError,
    507: StorageFullError,
}


def error_class(code: str, status: int = 0) -> Type[HutchError]:
    """The exception class for a server error code (falling back on the status)."""
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls
    return _BY_STATUS.get(status, HutchError)


def make_error(
    body: Dict[str, Any],
    *,
    status: int,
    request_id: str = "",
    retry_after: Optional[float] = None,
    method: str = "",
    path: str = "",
) -> HutchError:
    """Builds the typed error for a JSON error body (or an ``error`` event's data)."""
    code = str(body.get("code") or "")
    cls = error_class(code, status)
    retryable = body.get("retryable")
    return cls(
        str(body.get("message") or ""),
        code=code,
        request_id=str(body.get("request_id") or request_id),
        retryable=retryable if isinstance(retryable, bool) else None,
        status=status,
        retry_after=retry_after,
        method=method,
        path=path,
        body=body,
    )
