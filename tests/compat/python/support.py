"""What the base SDK suites (test_e2b_sdk.py, test_opensandbox_sdk.py)
share: polling with a deadline, and a digest to compare contents by."""

import asyncio
import hashlib
import time


def wait_for(pred, what, seconds=20.0):
    """Polls `pred` until it is truthy and returns that; fails naming `what`
    after `seconds`."""
    end = time.monotonic() + seconds
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


async def async_wait_for(pred, what, seconds=20.0):
    """wait_for with a coroutine function as `pred`."""
    end = time.monotonic() + seconds
    while True:
        v = await pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def sha256(data):
    return hashlib.sha256(data).hexdigest()
