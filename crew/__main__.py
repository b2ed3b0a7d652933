import sys

import core  # noqa: F401  (process set-up first)
from crew.cli import main

sys.exit(main())
