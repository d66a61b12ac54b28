"""What a context's engine is: one language's persistent interpreter.

An engine (python_kernel.PythonKernel, node_engine.NodeEngine,
bash_engine.BashEngine) owns one interpreter process and runs code in it,
one run at a time; the Context above it (contexts.py) queues the runs,
so an engine never sees two at once. All engines live on the server's one
asyncio loop: no locks inside them.
"""

import os
import signal
from typing import Callable, Dict, Optional

# Receives each output line (a dict of output_lines) of the current run.
Emit = Callable[[dict], None]


class EngineDied(Exception):
    """The interpreter process ended under a run (or was not running).

    The context reports it as an error line; a restart makes a new one.
    """


class Engine:
    language = ""

    async def start(self) -> None:
        """Starts the interpreter; raises with a readable reason on failure."""
        raise NotImplementedError

    async def run(self, code: str, env_vars: Optional[Dict[str, str]], emit: Emit) -> None:
        """Runs code, emitting stdout/stderr/result/error/count lines.

        env_vars hold for this run only: the engine restores the previous
        values afterwards. Raises EngineDied when the process goes away.
        """
        raise NotImplementedError

    async def interrupt(self) -> None:
        """Stops the current run (SIGINT-like); the interpreter's state stays."""
        raise NotImplementedError

    async def shutdown(self) -> None:
        """Ends the interpreter process; safe to call twice."""
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError


def signal_group(proc, sig: int) -> None:
    """Sends sig to the process group an engine's interpreter leads.

    The interpreters start in their own session, so a signal reaches what
    the user's code spawned as well; a group already gone is no error.
    """
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


async def kill_group(proc) -> None:
    """SIGKILLs an interpreter's group (if it still runs) and reaps it."""
    if proc is not None and proc.returncode is None:
        signal_group(proc, signal.SIGKILL)
        await proc.wait()
