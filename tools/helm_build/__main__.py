"""`python -m tools.helm_build build|path` (see `tools.helm_build.builder`)."""

import sys

from tools.helm_build.builder import main

sys.exit(main())
