"""``python -m engine.conformance``: see ``engine.conformance`` for usage."""

import sys

from engine.conformance import main

sys.exit(main())
