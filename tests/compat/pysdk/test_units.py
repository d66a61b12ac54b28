"""No server: every error code of docs/api.md has its class, the SSE
decoder, the retry policy's waits."""

from __future__ import annotations

import io
import re

import hutch
from conftest import ROOT
from hutch._sse import SSEReader
from hutch.errors import RETRYABLE_CODES, error_class, make_error


def api_codes() -> set[str]:
    text = (ROOT / "docs" / "api.md").read_text()
    table = text[text.index("| status | code | when |"):]
    table = table[:table.index("\n\n")]
    codes: set[str] = set()
    for row in table.splitlines()[2:]:
        codes.update(re.findall(r"`([a-z_]+)`", row.split("|")[2]))
    return codes


def test_one_class_per_documented_code() -> None:
    codes = api_codes()
    assert {"sandbox_not_found", "capacity_exhausted", "agent_timeout", "build_failed"} <= codes
    for code in codes:
        cls = error_class(code)
        assert cls.code == code, f"no exception class for {code}"
        err = make_error({"code": code, "message": "m", "request_id": "r_1"}, status=400)
        assert isinstance(err, cls) and isinstance(err, hutch.HutchError)
        assert err.retryable == (code in RETRYABLE_CODES)
    doc = (ROOT / "docs" / "api.md").read_text()
    sentence = doc[doc.index("`retryable` is true exactly for"):][:200]
    assert set(re.findall(r"`([a-z_]+)`", sentence)) - {"retryable"} == set(RETRYABLE_CODES)


def test_unknown_codes_fall_back_on_the_status() -> None:
    e = make_error({"code": "brand_new", "message": "x"}, status=404)
    assert isinstance(e, hutch.NotFoundError) and e.code == "brand_new"
    e = make_error({"message": "<html>bad gateway</html>"}, status=502)
    assert e.code == "" and e.retryable


def test_sse_reader() -> None:
    raw = (b": ping\r\n\r\nevent: stdout\r\nid: 5\r\ndata: {\"text\":\"a\"}\r\n\r\n"
           b"data: line1\ndata: line2\n\nevent: exit\ndata: {}")
    r = SSEReader(io.BytesIO(raw))
    ev = r.next()
    assert ev is not None and (ev.event, ev.data, ev.id) == ("stdout", '{"text":"a"}', "5")
    ev = r.next()
    assert ev is not None and (ev.event, ev.data) == ("message", "line1\nline2")
    ev = r.next()
    assert ev is not None and (ev.event, ev.data) == ("exit", "{}")  # unterminated last event
    assert r.next() is None


def test_retry_backoff_and_retry_after() -> None:
    p = hutch.RetryPolicy(initial_backoff=1, max_backoff=4)
    for attempt, top in ((1, 1), (2, 2), (3, 4), (9, 4)):
        w = p.backoff(attempt)
        assert top / 2 <= w <= top
    assert p.backoff(1, retry_after=30) == 30
    assert p.backoff(1, retry_after=500) == 60  # capped
