"""Sandboxes and commands: life, list, exec, exec_stream, cancellation,
background processes and reattach."""

from __future__ import annotations

import secrets
import time

import pytest

import hutch
from conftest import Server


def wait_until(pred, what: str, tries: int = 300):  # type: ignore[no-untyped-def]
    """Polls pred (bounded: the suite asserts outcomes, never durations)."""
    for _ in range(tries):
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


def test_create_as_context_manager_deletes_on_exit(client: hutch.Client) -> None:
    with hutch.Sandbox.create(template="base", ttl_seconds=120, env={"FOO": "bar"},
                              metadata={"t": "cm"}, client=client) as sb:
        assert sb.id.startswith("sb_")
        assert sb.info.status == "running"
        assert sb.info.metadata == {"t": "cm"}
        assert sb.exec("echo $FOO").stdout == "bar\n"
    assert client.sandbox(sb.id).refresh().status == "stopped"


def test_client_from_environment(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUTCH_URL", server.url)
    monkeypatch.setenv("HUTCH_API_KEY", server.key)
    with hutch.Sandbox.create(ttl_seconds=60) as sb:  # Client() from the environment
        assert hutch.Sandbox.connect(sb.id).info.status == "running"


def test_list_pages_and_filters(client: hutch.Client) -> None:
    tag = secrets.token_hex(4)
    made = [client.create(ttl_seconds=120, metadata={"suite": tag}) for _ in range(3)]
    try:
        pages = list(client.list(metadata={"suite": tag}, limit=2).pages())
        assert [len(p) for p in pages] == [2, 1]
        ids = [sb.id for sb in hutch.Sandbox.list(metadata={"suite": tag}, status="running", limit=2, client=client)]
        assert ids == sorted(sb.id for sb in made)
    finally:
        for sb in made:
            sb.delete()
    assert list(client.list(metadata={"suite": tag}, status="running")) == []


def test_ttl_pause_resume_metrics(sandbox: hutch.Sandbox) -> None:
    before = sandbox.info.expires_at
    info = sandbox.set_ttl(900)
    assert info.expires_at > before
    assert sandbox.pause().status == "paused"
    with pytest.raises(hutch.ConflictError) as e:
        sandbox.exec("true")
    assert e.value.status == 409 and not e.value.retryable
    assert sandbox.exec("echo woke", auto_resume=True).stdout == "woke\n"
    sandbox.pause()
    assert sandbox.resume().status == "running"
    m = sandbox.metrics()
    assert m.memory_bytes > 0 and m.pids >= 1 and m.disk_limit_bytes > 0


def test_exec_results(sandbox: hutch.Sandbox) -> None:
    r = sandbox.exec("echo out; echo err >&2; exit 3")
    assert (r.stdout, r.stderr, r.exit_code, r.ok) == ("out\n", "err\n", 3, False)
    assert not r.timed_out and not r.oom_killed
    with pytest.raises(hutch.CommandError) as e:
        sandbox.exec("exit 4", check=True)
    assert e.value.result.exit_code == 4
    assert sandbox.exec(["printf", "%s|", "a b", "c"]).stdout == "a b|c|"
    assert sandbox.exec("cat", stdin="fed").stdout == "fed"
    assert sandbox.exec("pwd", cwd="/tmp").stdout == "/tmp\n"
    assert sandbox.exec("echo $X", env={"X": "y"}).stdout == "y\n"
    binary = sandbox.exec("printf '\\377\\000\\001'")
    assert binary.stdout_bytes == b"\xff\x00\x01"
    t = sandbox.exec("sleep 30", timeout_seconds=1)
    assert t.timed_out and t.exit_code == 137


def test_exec_stream_events_and_callbacks(sandbox: hutch.Sandbox) -> None:
    seen: list[bytes] = []
    errs: list[bytes] = []
    pids: list[int] = []
    with sandbox.exec_stream("echo one; echo two >&2; printf '\\377'; exit 5", on_stdout=seen.append,
                             on_stderr=errs.append, on_start=pids.append) as s:
        events = list(s)
    assert isinstance(events[0], hutch.StartEvent) and events[0].pid == pids[0] > 0
    assert isinstance(events[-1], hutch.ExitEvent) and events[-1].exit_code == 5
    assert b"".join(seen) == b"one\n\xff" and b"".join(errs) == b"two\n"
    out = b"".join(e.data for e in events if isinstance(e, hutch.OutputEvent) and e.stream == "stdout")
    assert out == b"one\n\xff"
    assert s.result is not None and s.result.exit_code == 5
    assert sandbox.exec_stream("exit 2").wait().exit_code == 2


def test_closing_a_stream_kills_the_command_in_the_sandbox(sandbox: hutch.Sandbox) -> None:
    s = sandbox.exec_stream("echo started; exec sleep 300")
    pid = 0
    for ev in s:
        if isinstance(ev, hutch.StartEvent):
            pid = ev.pid
        if isinstance(ev, hutch.OutputEvent) and b"started" in ev.data:
            break
    assert pid > 0
    assert any(p.pid == pid and p.running for p in sandbox.processes.list())
    s.close()  # mid-way: hutchd kills the process group inside the sandbox
    wait_until(lambda: all(p.pid != pid for p in sandbox.processes.list()), "the command left the list")
    wait_until(lambda: sandbox.exec(f"kill -0 {pid}").exit_code != 0, "the command is gone")
    assert "sleep 300" not in sandbox.exec("ps -eo args").stdout


def test_background_processes(sandbox: hutch.Sandbox) -> None:
    p = sandbox.processes.start("read a; echo got:$a; read b; echo got:$b >&2")
    assert p.info is not None and p.info.running and p.info.stdin_open
    assert p.send_stdin("one\n") == 4
    p.send_stdin(b"two\n", eof=True)
    res = p.wait()
    assert res.exit_code == 0
    with p.stream() as s:
        out = [(e.stream, e.data) for e in s if isinstance(e, hutch.OutputEvent)]
    assert out == [("stdout", b"got:one\n"), ("stderr", b"got:two\n")]
    info = p.refresh()
    assert info.status == "exited" and info.exit_code == 0 and info.output_bytes == 16
    assert any(x.pid == p.pid for x in sandbox.processes.list())

    sleeper = sandbox.processes.start(["sleep", "300"])
    assert sleeper.signal("term") == 15
    assert sleeper.wait().exit_code == 128 + 15
    with pytest.raises(hutch.ConflictError):
        sleeper.signal("SIGKILL")
    with pytest.raises(hutch.ProcessNotFoundError):
        sandbox.processes.get(999999)


def test_reattach_from_an_offset_after_a_client_restart(server: Server, sandbox: hutch.Sandbox) -> None:
    p = sandbox.processes.start("echo line1; echo line2; read go; echo line3; echo line4")
    first = server.client()
    got = b""
    with first.connect(sandbox.id).processes.stream(p.pid) as s:
        for ev in s:
            if isinstance(ev, hutch.OutputEvent):
                got += ev.data
                if got == b"line1\nline2\n":
                    break
        offset = s.offset
    first.close()
    assert offset == len(got) == 12

    second = server.client()  # a new client, as after a restart: only the ids survive
    sb = second.connect(sandbox.id)
    sb.processes.send_stdin(p.pid, "go\n")
    rest = b""
    with sb.processes.stream(p.pid, from_offset=offset) as s:
        for ev in s:
            if isinstance(ev, hutch.OutputEvent):
                rest += ev.data
    assert rest == b"line3\nline4\n"
    assert s.result is not None and s.result.exit_code == 0
    assert s.offset == 24
    second.close()


def test_fork_and_snapshot(client: hutch.Client, sandbox: hutch.Sandbox) -> None:
    sandbox.files.write("/root/state.txt", "parent")
    children = sandbox.fork(2)
    try:
        assert len(children) == 2 and len({c.id for c in children}) == 2
        for c in children:
            assert c.files.read_text("/root/state.txt") == "parent"
            assert c.info.metadata.get("hutch.fork_of") == sandbox.id
        children[0].files.write("/root/state.txt", "child")
        assert sandbox.files.read_text("/root/state.txt") == "parent"
    finally:
        for c in children:
            c.delete()
    snap = sandbox.snapshot()
    try:
        assert snap.id.startswith("snap_") and snap.sandbox_id == sandbox.id and not snap.memory
        assert client.snapshots.get(snap.id).status == "ready"
        assert any(s.id == snap.id for s in client.snapshots.list())
        with client.create(snapshot=snap.id, ttl_seconds=120) as restored:
            assert restored.files.read_text("/root/state.txt") == "parent"
    finally:
        client.snapshots.delete(snap.id)
    with pytest.raises(hutch.SnapshotNotFoundError):
        client.snapshots.get(snap.id)
