"""``python -m stepscope.cli``: the ``stepscope`` command."""

import sys

from stepscope.cli._main import main

sys.exit(main())
