"""mlp.py (its arguments follow), then an end no agent sees: ``python abrupt.py END ...``.

END is ``exit0`` (``os._exit(0)``), ``sigkill`` (the process kills itself),
``segv`` (a crash in native code: ctypes reads address 0) or ``normal`` (a plain end,
the silent twin). The state is saved (``--save``) before the end.
"""

import ctypes
import os
import runpy
import signal
import sys
from pathlib import Path

end = sys.argv[1]
mlp = str(Path(__file__).with_name("mlp.py"))
sys.argv = [mlp, *sys.argv[2:]]
runpy.run_path(mlp, run_name="__main__")
sys.stdout.flush()
if end == "exit0":
    os._exit(0)
elif end == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
elif end == "segv":
    ctypes.string_at(0)
