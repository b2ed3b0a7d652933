import sys

from core.config.bootstrap import apply

apply()  # process set-up first
from crew.cli import main

sys.exit(main())
