"""The terminal, exposed ports, network policies and templates."""

from __future__ import annotations

import secrets
import time
from typing import Any, Dict, List

import pytest

import hutch


def test_pty(sandbox: hutch.Sandbox) -> None:
    with sandbox.pty(cols=100, rows=30) as term:
        term.write("stty size; echo $((6*7))\n")
        out = term.read_until("42\r\n")
        assert b"30 100" in out and b"42" in out
        term.resize(132, 43)
        term.write("stty size\n")
        assert b"43 132" in term.read_until("43 132")
        term.write(b"exit 3\n")
        assert term.wait().exit_code == 3
    with sandbox.pty(cmd="printf ready; read x; echo got-$x") as term:
        assert b"ready" in term.read_until("ready")
        term.write("z\n")
        assert b"got-z" in term.read_until("got-z")
        assert term.wait().exit_code == 0


def test_pty_errors(client: hutch.Client) -> None:
    with pytest.raises(hutch.SandboxNotFoundError):
        client.sandbox("sb_doesnotexist").pty()


def test_ports(sandbox: hutch.Sandbox) -> None:
    sandbox.files.write("/srv/www/hello.txt", "served from the sandbox")
    with pytest.raises(hutch.PortUnreachableError) as e:
        sandbox.port_request(8000, "/hello.txt")
    assert e.value.retryable
    sandbox.processes.start("exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /srv/www")
    for _ in range(300):
        try:
            r = sandbox.port_request(8000, "/hello.txt")
            break
        except hutch.PortUnreachableError:
            time.sleep(0.1)
    assert r.status == 200 and r.text == "served from the sandbox"
    assert sandbox.port_request(8000, "/missing").status == 404  # the server's own answer
    assert sandbox.url(8000, "/a/b") == f"{sandbox.client.url}/v1/sandboxes/{sandbox.id}/ports/8000/a/b"


def test_network_policy(client: hutch.Client, health: Dict[str, Any]) -> None:
    if health.get("capabilities", {}).get("network") is False or health.get("network") is False:
        pytest.skip("this hutchd has no networking")
    policy = hutch.NetworkPolicy(mode="policy", default="deny", allow=["example.com", "10.2.0.0/16"],
                                 deny=["bad.example.com"])
    with client.create(ttl_seconds=120, network=policy) as sb:
        got = sb.network()
        assert (got.mode, got.default, got.deny) == ("policy", "deny", policy.deny)
        assert sorted(got.allow) == sorted(policy.allow)
        sb.set_network("all")
        assert sb.network().mode == "all"
        with pytest.raises(hutch.InvalidRequestError):
            sb.set_network({"mode": "policy", "allow": ["not a host!"]})
    with client.create(ttl_seconds=120) as sb:
        assert sb.network().mode == "none"
        with pytest.raises(hutch.NotSupportedError):
            sb.set_network("all")


SPEC = """
name = "{name}"
from = "base"
run = ["echo hello-from-build", "mkdir -p /opt/t && echo baked > /opt/t/v"]
[env]
BAKED = "yes"
"""


def test_templates(client: hutch.Client) -> None:
    name = "pysdk-" + secrets.token_hex(3)
    logs: List[str] = []
    events = []
    with client.templates.build_stream(SPEC.format(name=name), on_log=lambda lg: logs.append(lg.text)) as b:
        for ev in b:
            events.append(ev)
    t = b.template
    assert t is not None and t.name == name and t.status == "ready" and not t.cached
    assert any(isinstance(e, hutch.TemplateStep) for e in events)
    assert any("hello-from-build" in line for line in logs)
    try:
        assert client.templates.build(SPEC.format(name=name)).cached  # same spec: a cache hit
        assert name in [x.name for x in client.templates.list()]
        assert client.templates.get(name).hash == t.hash
        client.templates.set_alias(name + ":1", name)
        assert client.templates.aliases().get(name + ":1") == name
        with client.create(template=name + ":1", ttl_seconds=120) as sb:
            assert sb.exec("cat /opt/t/v; echo $BAKED").stdout == "baked\nyes\n"
        client.templates.delete_alias(name + ":1")
        with pytest.raises(hutch.BuildFailedError) as e:
            client.templates.build({"name": name + "-bad", "from": "base", "run": ["echo dying; exit 7"]})
        assert e.value.exit_code == 7 and "dying" in e.value.log_tail and e.value.status == 422
    finally:
        client.templates.delete(name)
    with pytest.raises(hutch.TemplateNotFoundError):
        client.templates.get(name)
