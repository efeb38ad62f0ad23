"""``python -m vla_client.cli``."""

import sys

from vla_client.cli import main

sys.exit(main())
