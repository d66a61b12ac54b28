"""hutch: the Python client of hutchd's ``/v1`` API.

::

    from hutch import Sandbox

    with Sandbox.create(ttl_seconds=600) as sb:       # deleted on exit
        print(sb.exec("echo hello; exit 3").exit_code)  # 3
        sb.files.write("/tmp/a.txt", "hi")
        for ev in sb.exec_stream("make test"):
            ...
"""

from ._retry import RetryPolicy
from ._transport import __version__
from .client import Client, SandboxPager, Snapshots, Templates, Volume, Volumes
from .errors import *  # noqa: F403
from .errors import __all__ as _errors_all
from .files import FileReader, Files
from .models import *  # noqa: F403
from .models import __all__ as _models_all
from .processes import Process, Processes
from .pty import Pty
from .sandbox import CommandError, Sandbox
from .streams import ExecStream, TemplateBuild

__all__ = [
    "__version__",
    "Client",
    "CommandError",
    "ExecStream",
    "FileReader",
    "Files",
    "Process",
    "Processes",
    "Pty",
    "RetryPolicy",
    "Sandbox",
    "SandboxPager",
    "Snapshots",
    "TemplateBuild",
    "Templates",
    "Volume",
    "Volumes",
    *_errors_all,
    *_models_all,
]
