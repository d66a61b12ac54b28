#!/usr/bin/env python3
"""hutch's code server: stateful code execution inside a sandbox.

The `code-interpreter` template starts it (templates/code-interpreter.toml)
on port 49999, where E2B's code-interpreter SDKs expect their server, and
it speaks that protocol natively: hutchd's port proxy carries the SDK's
requests here unchanged, and hutchd translates OpenSandbox's and /v1's
code routes onto the same routes. Kernels therefore run with the
sandbox's isolation and environment, never in hutchd (ARCHITECTURE.md).

    hutch_code_server.py [--host 0.0.0.0] [--port 49999] [--cwd DIR]

Prints "listening on HOST:PORT" once it accepts connections (port 0
picks a free one), starts the default python context in the background
(GET /health answers 503 until that is done), and on SIGTERM or SIGINT
stops every interpreter before exiting.
"""

import argparse
import asyncio
import os
import signal
import sys

# The modules beside this file, wherever it is started from.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tornado.httpserver  # noqa: E402
import tornado.netutil  # noqa: E402

from contexts import ContextRegistry  # noqa: E402
from http_handlers import Settings, make_app  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=49999)
    p.add_argument("--cwd", default=None, help="default contexts' working directory "
                   "(default: the current directory)")
    p.add_argument("--keepalive-seconds", type=float, default=5.0,
                   help="quiet time before a keepalive line")
    p.add_argument("--stall-seconds", type=float, default=30.0,
                   help="a client that reads nothing this long is treated as gone")
    return p.parse_args(argv)


async def serve(args) -> None:
    registry = ContextRegistry(os.path.abspath(args.cwd or os.getcwd()))
    settings = Settings(registry, args.keepalive_seconds, args.stall_seconds)
    server = tornado.httpserver.HTTPServer(make_app(settings), max_body_size=256 << 20)
    sockets = tornado.netutil.bind_sockets(args.port, address=args.host)
    server.add_sockets(sockets)
    host, port = sockets[0].getsockname()[:2]
    print(f"listening on {host}:{port}", flush=True)

    async def start_default():
        try:
            await registry.default("python")
        except Exception as e:  # reported by the runs that need it
            print(f"default python context did not start: {e}", file=sys.stderr, flush=True)
        settings.ready = True

    starting = asyncio.ensure_future(start_default())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.stop()
    starting.cancel()
    await registry.close()


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
