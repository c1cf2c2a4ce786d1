"""``python -m webhook``: the ``gangcheck`` command line (webhook/cli.py), exit code and all."""

import sys

from .cli import main

sys.exit(main())
