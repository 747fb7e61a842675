"""``python -m ahasd.cli``: the same as the ``ahasd`` command."""

import sys

from ahasd.cli import main

sys.exit(main())
