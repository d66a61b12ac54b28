"""The client of one hutchd: sandboxes, volumes, snapshots, templates."""

from __future__ import annotations

import urllib.parse
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._retry import RetryPolicy
from ._transport import Transport
from .files import Files
from .models import SandboxInfo, SnapshotInfo, TemplateInfo, TemplateLog, TemplateStep, VolumeInfo, VolumeMount
from .sandbox import Network, Sandbox, _iter_pages
from .streams import TemplateBuild

__all__ = ["Client", "SandboxPager", "Volume", "Volumes", "Snapshots", "Templates"]


LogCallback = Callable[[TemplateLog], None]
StepCallback = Callable[[TemplateStep], None]


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


class Client:
    """A hutch API client (thread-safe).

    ``url`` and ``api_key`` default to ``$HUTCH_URL`` (then
    ``http://127.0.0.1:8080``) and ``$HUTCH_API_KEY``. ``retry`` turns on
    retries (:class:`RetryPolicy`; off by default). ``timeout`` bounds each
    socket operation in seconds (``None``: no limit; a long exec may be
    silent for its whole run).
    """

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None, *,
                 retry: Optional[RetryPolicy] = None, timeout: Optional[float] = None,
                 user_agent: Optional[str] = None) -> None:
        self._t = Transport(url, api_key, retry=retry, timeout=timeout, user_agent=user_agent)
        #: Named persistent volumes.
        self.volumes = Volumes(self)
        #: Snapshots of sandboxes' files.
        self.snapshots = Snapshots(self)
        #: Templates: build (with a streamed log), list, aliases.
        self.templates = Templates(self)

    @property
    def url(self) -> str:
        return self._t.base_url

    def close(self) -> None:
        """Closes the client's idle connections."""
        self._t.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def health(self) -> Dict[str, Any]:
        """``GET /healthz`` (no key needed)."""
        d = self._t.json("GET", "/healthz")
        return d if isinstance(d, dict) else {}

    # -- sandboxes ---------------------------------------------------------

    def create(self, template: Optional[str] = None, *, ttl_seconds: Optional[int] = None,
               env: Optional[Mapping[str, str]] = None, metadata: Optional[Mapping[str, str]] = None,
               cpu: Optional[float] = None, memory_mb: Optional[int] = None, disk_mb: Optional[int] = None,
               network: Network = None,
               volumes: Optional[Sequence[Union[VolumeMount, Mapping[str, Any]]]] = None,
               snapshot: Optional[str] = None, auto_pause_seconds: Optional[int] = None,
               driver: Optional[str] = None, idempotency_key: Optional[str] = None) -> Sandbox:
        """``Sandbox.create`` with this client."""
        return Sandbox.create(template, ttl_seconds=ttl_seconds, env=env, metadata=metadata, cpu=cpu,
                              memory_mb=memory_mb, disk_mb=disk_mb, network=network, volumes=volumes,
                              snapshot=snapshot, auto_pause_seconds=auto_pause_seconds, driver=driver,
                              idempotency_key=idempotency_key, client=self)

    def connect(self, sandbox_id: str) -> Sandbox:
        """Fetches the sandbox ``sandbox_id`` (``SandboxNotFoundError`` if unknown)."""
        return Sandbox(self, SandboxInfo.from_json(self._t.json("GET", "/v1/sandboxes/" + _q(sandbox_id))))

    get = connect

    def sandbox(self, sandbox_id: str) -> Sandbox:
        """A handle on ``sandbox_id`` without asking the server."""
        return Sandbox(self, SandboxInfo(id=sandbox_id))

    def list(self, *, status: Optional[str] = None, metadata: Optional[Mapping[str, str]] = None,
             limit: Optional[int] = None, cursor: Optional[str] = None) -> SandboxPager:
        """An iterator over the sandboxes (ordered by id), fetching pages of
        ``limit`` as it goes; ``.pages()`` gives them page by page."""
        q: Dict[str, Any] = {"status": status, "limit": limit, "cursor": cursor}
        for k, v in (metadata or {}).items():
            q["metadata." + k] = v
        return SandboxPager(self, q)

    def delete(self, sandbox_id: str) -> None:
        """Deletes a sandbox (idempotent for one that existed)."""
        self._t.request("DELETE", "/v1/sandboxes/" + _q(sandbox_id))


class SandboxPager:
    """Iterates sandboxes across pages (one request per page, as needed)."""

    def __init__(self, client: Client, query: Dict[str, Any]) -> None:
        self._c = client
        self._q = query

    def pages(self) -> Iterator[List[Sandbox]]:
        for page in _iter_pages(self._c._t, "/v1/sandboxes", self._q):
            yield [Sandbox(self._c, SandboxInfo.from_json(d)) for d in page]

    def __iter__(self) -> Iterator[Sandbox]:
        for page in self.pages():
            yield from page


class Volume:
    """A named persistent volume; ``files`` reads and writes it without a sandbox."""

    def __init__(self, client: Client, info: VolumeInfo) -> None:
        self.info = info
        self.name = info.name
        self.files = Files(client._t, "/v1/volumes/" + _q(info.name) + "/fs")
        self._c = client

    def __repr__(self) -> str:
        return f"Volume(name={self.name!r})"

    def mount(self, path: str, *, read_only: bool = False) -> VolumeMount:
        """A mount of this volume for ``Sandbox.create(volumes=[...])``."""
        return VolumeMount(self.name, path, read_only)

    def delete(self) -> None:
        self._c.volumes.delete(self.name)


class Volumes:
    def __init__(self, client: Client) -> None:
        self._c = client
        self._t = client._t

    def create(self, name: str, size_mb: Optional[int] = None) -> Volume:
        body: Dict[str, Any] = {"name": name}
        if size_mb:
            body["size_mb"] = int(size_mb)
        return Volume(self._c, VolumeInfo.from_json(self._t.json("POST", "/v1/volumes", json_body=body)))

    def get(self, name: str) -> Volume:
        return Volume(self._c, VolumeInfo.from_json(self._t.json("GET", "/v1/volumes/" + _q(name))))

    def list(self) -> List[Volume]:
        d = self._t.json("GET", "/v1/volumes")
        return [Volume(self._c, VolumeInfo.from_json(v)) for v in d.get("volumes") or []]

    def delete(self, name: str) -> None:
        """Deletes a volume and its data (``ConflictError`` while mounted)."""
        self._t.request("DELETE", "/v1/volumes/" + _q(name))


class Snapshots:
    def __init__(self, client: Client) -> None:
        self._t = client._t

    def list(self) -> List[SnapshotInfo]:
        d = self._t.json("GET", "/v1/snapshots")
        return [SnapshotInfo.from_json(s) for s in d.get("items") or []]

    def get(self, snapshot_id: str) -> SnapshotInfo:
        return SnapshotInfo.from_json(self._t.json("GET", "/v1/snapshots/" + _q(snapshot_id)))

    def delete(self, snapshot_id: str) -> None:
        self._t.request("DELETE", "/v1/snapshots/" + _q(snapshot_id))


class Templates:
    def __init__(self, client: Client) -> None:
        self._t = client._t

    def build_stream(self, spec: Union[str, bytes, Mapping[str, Any]], *, name: Optional[str] = None,
                     on_log: Optional[LogCallback] = None,
                     on_step: Optional[StepCallback] = None) -> TemplateBuild:
        """Starts a build of ``spec`` (TOML text, or the same keys as a dict)
        and streams its progress. The build carries on if the stream is closed."""
        if isinstance(spec, Mapping):
            import json

            body = json.dumps(dict(spec)).encode()
        else:
            body = spec.encode() if isinstance(spec, str) else bytes(spec)
        resp = self._t.request("POST", "/v1/templates", query={"name": name}, body=body,
                               headers={"Accept": "text/event-stream"}, stream=True)
        return TemplateBuild(resp, on_log=on_log, on_step=on_step)

    def build(self, spec: Union[str, bytes, Mapping[str, Any]], *, name: Optional[str] = None,
              on_log: Optional[LogCallback] = None, on_step: Optional[StepCallback] = None) -> TemplateInfo:
        """Builds ``spec`` and returns the template (``BuildFailedError`` with
        ``step``, ``exit_code`` and ``log_tail`` when a step fails)."""
        with self.build_stream(spec, name=name, on_log=on_log, on_step=on_step) as b:
            return b.wait()

    def list(self) -> List[TemplateInfo]:
        d = self._t.json("GET", "/v1/templates")
        return [TemplateInfo.from_json(t) for t in d.get("items") or []]

    def get(self, name: str) -> TemplateInfo:
        return TemplateInfo.from_json(self._t.json("GET", "/v1/templates/" + _q(name)))

    def delete(self, name: str) -> None:
        self._t.request("DELETE", "/v1/templates/" + _q(name))

    def aliases(self) -> Dict[str, str]:
        d = self._t.json("GET", "/v1/template-aliases")
        if isinstance(d, dict) and isinstance(d.get("aliases"), dict):
            return dict(d["aliases"])
        return dict(d) if isinstance(d, dict) else {}

    def set_alias(self, alias: str, template: str) -> None:
        self._t.request("PUT", "/v1/template-aliases/" + _q(alias), json_body={"template": template})

    def delete_alias(self, alias: str) -> None:
        self._t.request("DELETE", "/v1/template-aliases/" + _q(alias))

