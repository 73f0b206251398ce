"""``python -m streamscope``: the same as the ``streamscope`` command."""

from __future__ import annotations

import sys

from streamscope.cli import main

sys.exit(main())
