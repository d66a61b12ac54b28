"""A Python context's engine: one IPython kernel over the Jupyter protocol.

jupyter_client's AsyncKernelManager starts ipykernel (with this Python,
sys.executable, never a `python3` found on PATH) in the context's cwd,
with the server's environment, so the sandbox's env reaches user code.
kernel_startup.py runs inside it first (formatters for `data` and
`chart`, plain tracebacks, the per-run env helpers).

One task reads IOPub and one the shell channel for the kernel's whole
life and hand each message to the run whose request it answers (by the
parent msg_id): the silent requests around a run (env set/restore) and
a kernel's late messages never leak into a run's output.
"""

import asyncio
import os
import shutil
import sys
import tempfile
from typing import Dict, Optional

from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

import output_lines
from engine import Emit, Engine, EngineDied

_HERE = os.path.dirname(os.path.abspath(__file__))
_INLINE = "module://matplotlib_inline.backend_inline"
# How long a run may go without a message before we check the kernel lives.
_LIVENESS_POLL_S = 1.0


class _OurKernelSpecs(KernelSpecManager):
    """The one kernel spec we use, whatever kernel.json files lie around."""

    def get_kernel_spec(self, kernel_name, *args, **kw):
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                "--IPKernelApp.exec_files=" + os.path.join(_HERE, "kernel_startup.py")]
        return KernelSpec(argv=argv, display_name="Python 3", language="python",
                          resource_dir=_HERE)


class PythonKernel(Engine):
    language = "python"

    def __init__(self, cwd: str):
        self._cwd = cwd
        self._km: Optional[AsyncKernelManager] = None
        self._kc = None
        self._readers = []
        self._routes: Dict[str, asyncio.Queue] = {}
        self._closed = False
        self._ipc_dir = None
        self._interrupted = False  # an interrupt was sent during the current request

    async def start(self) -> None:
        env = dict(os.environ)
        # The inline backend turns figures into PNG displays (and our chart);
        # an MPLBACKEND from the sandbox's env (Agg) would lose them.
        env["MPLBACKEND"] = _INLINE
        env["HUTCH_INTERPRETER_DIR"] = _HERE
        env.pop("PYTHONSTARTUP", None)
        # ipykernel's debugger otherwise warns on stderr at every start.
        env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        # The kernel's sockets are Unix sockets in a private directory, not
        # TCP ports: picking free ports and binding them later races with
        # every other process (Address already in use), and no one else in
        # the sandbox can reach a kernel through a 0700 directory.
        self._ipc_dir = tempfile.mkdtemp(prefix="hutch-kernel-")
        self._km = AsyncKernelManager(kernel_spec_manager=_OurKernelSpecs(), kernel_name="python3",
                                      transport="ipc", ip=os.path.join(self._ipc_dir, "kernel"),
                                      connection_file=os.path.join(self._ipc_dir, "kernel.json"))
        await self._km.start_kernel(env=env, cwd=self._cwd)
        self._kc = self._km.client()
        self._kc.start_channels()
        try:
            await self._kc.wait_for_ready(timeout=60)
        except RuntimeError as e:
            await self.shutdown()
            raise EngineDied(f"the Python kernel did not start: {e}") from e
        self._readers = [asyncio.create_task(self._read(self._kc.get_iopub_msg, "iopub")),
                         asyncio.create_task(self._read(self._kc.get_shell_msg, "shell"))]

    async def _read(self, get, channel):
        while True:
            try:
                msg = await get()
            except asyncio.CancelledError:
                raise
            except Exception:  # a malformed message: skip it, keep the channel
                continue
            q = self._routes.get(msg.get("parent_header", {}).get("msg_id"))
            if q is not None:
                q.put_nowait((channel, msg))

    def alive(self) -> bool:
        return self._km is not None and not self._closed

    async def _exit_reason(self) -> str:
        proc = getattr(self._km.provisioner, "process", None) if self._km else None
        code = proc.poll() if proc is not None else None
        return f"the Python kernel died (exit status {code})" if code is not None else \
            "the Python kernel died"

    async def _request(self, code: str, silent: bool, emit: Optional[Emit]) -> None:
        """Sends one execute request and follows it until idle and replied."""
        if not self.alive():
            raise EngineDied("the Python kernel is not running")
        msg_id = self._kc.execute(code, silent=silent, store_history=not silent,
                                  allow_stdin=False, stop_on_error=False)
        q = asyncio.Queue()
        self._routes[msg_id] = q
        self._interrupted = False
        probe = None
        idle = replied = False
        try:
            while not (idle and replied):
                try:
                    channel, msg = await asyncio.wait_for(q.get(), _LIVENESS_POLL_S)
                except asyncio.TimeoutError:
                    if self._closed or not await self._km.is_alive():
                        self._closed = True
                        raise EngineDied(await self._exit_reason())
                    if self._interrupted and probe is None and not replied:
                        probe = self._kc.kernel_info()
                        self._routes[probe] = q
                    continue
                if channel is None:  # shutdown() woke us
                    raise EngineDied("the Python kernel was stopped")
                kind, content = msg["header"]["msg_type"], msg["content"]
                if channel == "shell" and kind == "kernel_info_reply":
                    # The kernel answers a shell request only once the one
                    # before it is done: no execute_reply before this one
                    # means an interrupt that hit ipykernel's own code ended
                    # the run without a reply ("KeyboardInterrupt caught in
                    # kernel"). Without this the run would wait forever.
                    if not replied:
                        if emit:
                            emit(output_lines.error("KeyboardInterrupt",
                                                    "the run was interrupted", ""))
                        break
                    continue
                if channel == "shell":
                    replied = kind == "execute_reply"
                    if replied and content.get("status") == "aborted" and emit:
                        emit(output_lines.error("ExecutionAborted", "the kernel aborted the run",
                                                ""))
                elif kind == "status":
                    idle = content.get("execution_state") == "idle"
                elif emit:
                    self._translate(kind, content, emit)
        finally:
            del self._routes[msg_id]
            if probe is not None:
                self._routes.pop(probe, None)

    @staticmethod
    def _translate(kind: str, content: dict, emit: Emit) -> None:
        if kind == "stream":
            emit(output_lines.stream(content.get("name", "stdout"), content.get("text", "")))
        elif kind == "execute_input":
            emit(output_lines.execution_count(content.get("execution_count")))
        elif kind == "execute_result":
            emit(output_lines.result(content.get("data", {}), True))
        elif kind in ("display_data", "update_display_data"):
            emit(output_lines.result(content.get("data", {}), False))
        elif kind == "error":
            emit(output_lines.error(content.get("ename", ""), content.get("evalue", ""),
                                    "\n".join(content.get("traceback", []))))

    async def run(self, code: str, env_vars: Optional[Dict[str, str]], emit: Emit) -> None:
        if env_vars:
            await self._request(f"__import__('sys').modules['__hutch__'].set_env({env_vars!r})",
                                True, None)
        try:
            await self._request(code, False, emit)
        finally:
            if env_vars and self.alive():
                await self._request("__import__('sys').modules['__hutch__'].restore_env()", True,
                                    None)

    async def interrupt(self) -> None:
        if self.alive():
            self._interrupted = True
            await self._km.interrupt_kernel()

    async def shutdown(self) -> None:
        self._closed = True
        for q in self._routes.values():
            q.put_nowait((None, None))
        for t in self._readers:
            t.cancel()
        self._readers = []
        if self._kc is not None:
            self._kc.stop_channels()
            self._kc = None
        if self._km is not None:
            try:
                await self._km.shutdown_kernel(now=True)
            except Exception:
                pass
        if self._ipc_dir is not None:
            shutil.rmtree(self._ipc_dir, ignore_errors=True)
            self._ipc_dir = None
