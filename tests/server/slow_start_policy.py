"""A reference policy whose module takes `SLOW_IMPORT_S` to import in processes that
multiprocessing started (the entrypoints of ``serve --api-servers N``), as importing the app
does on a busy machine; the serving process and the inference worker import it at once."""

from __future__ import annotations

import multiprocessing
import time

from vla_client.server import ReferencePolicy

SLOW_IMPORT_S = 3.0

if multiprocessing.parent_process() is not None:
    time.sleep(SLOW_IMPORT_S)


class SlowStartPolicy(ReferencePolicy):
    """`ReferencePolicy`, from a module that is slow to import in an entrypoint."""
