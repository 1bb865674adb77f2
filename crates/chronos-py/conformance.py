#!/usr/bin/env python3
"""Runs producer contract v1's enqueue vectors with the Python producer; prints one JSON report.

    python3 crates/chronos-py/conformance.py --redis URL --namespace NS --vectors PATH/enqueue.json

See chronos_producer/conformance.py.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from chronos_producer.conformance import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
