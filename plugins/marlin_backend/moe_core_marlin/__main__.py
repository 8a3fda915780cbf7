"""``python -m moe_core_marlin``: this plugin's part of ``moe-core doctor`` (which ops library, its version, its ops)."""

from __future__ import annotations

import sys

from moe_core_marlin.library import LIBRARY


if __name__ == "__main__":
    sys.exit(LIBRARY.print_report())
