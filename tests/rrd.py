"""Read an ``.rrd`` file back with Rerun's own reader: each entity's rows, in time order."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any


def read_rrd(path: Path, timeline: str = "loop_time") -> dict[str, list[dict[str, Any]]]:
    """Entity path -> its rows (component column -> value, plus the timeline's time in
    seconds as ``"t"``), sorted by time; static rows (series names) under ``"static:PATH"``."""
    from rerun.chunk import RrdReader

    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for chunk in RrdReader(path).stream().to_chunks():
        batch = chunk.to_record_batch()
        names = [n for n in batch.schema.names if ":" in n]
        entity = chunk.entity_path if not chunk.is_static else "static:" + chunk.entity_path
        times = None
        if timeline in batch.schema.names:  # durations in ns
            times = batch.column(timeline).cast("int64").to_pylist()
        for i in range(chunk.num_rows):
            row = {name: batch.column(name)[i].as_py() for name in names}
            if times is not None:
                row["t"] = times[i] / 1e9 if times[i] is not None else None
            rows[entity].append(row)
    for entity_rows in rows.values():
        entity_rows.sort(key=lambda r: r.get("t") or 0.0)
    return dict(rows)
