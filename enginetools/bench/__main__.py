"""`python -m enginetools.bench`: see `enginetools.bench.run`."""

import sys

from enginetools.bench.run import main

sys.exit(main())
