"""`python -m engine.tools.bench`: see `engine.tools.bench.run`."""

import sys

from engine.tools.bench.run import main

sys.exit(main())
