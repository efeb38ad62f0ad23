"""`RequestRecorder`: what a server served, written off the request path, bounded, and never in
the way of serving when the folder cannot be written."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vla_client.cameras.scene import synthetic_frames
from vla_client.cli import main
from vla_client.recording import load_action_chunks, load_observations
from vla_client.server.policies import reference_actions
from vla_client.server.policy import PolicyInput
from vla_client.server.recorder import RequestRecorder


def served(t: int, size: tuple[int, int] = (48, 64)):
    """Request `t` as a server would record it: decoded frames, state, task, parameters, the
    reference policy's actions (horizon 10, 7 dims) and timings."""
    frames = synthetic_frames(2, *size, t=t)
    state = np.linspace(0, 1, 7, dtype=np.float32) * t
    task = f"task {t % 2}"
    actions = reference_actions(PolicyInput(frames, state, task), horizon=10, action_dim=7)
    return {
        "frames": frames,
        "state": state,
        "task": task,
        "parameters": {"action_horizon": 10},
        "actions": actions,
        "timings": {"preprocess_ms": 1.0 + t, "inference_ms": 2.0},
        "request_id": f"req-{t}",
    }


def record(recorder: RequestRecorder, t: int, **kwargs) -> None:
    request = served(t, **kwargs)
    request_id = request.pop("request_id")
    recorder.record(**request, request_id=request_id)


def stopped_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "stopped" in r.getMessage()]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``vla-client ARGS`` in this process: exit code, stdout, stderr."""
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_round_trip_through_view_and_send(tmp_path, capsys, server_url):
    with RequestRecorder(tmp_path / "records") as recorder:
        for t in range(3):
            record(recorder, t)
    assert recorder.stats().recorded == 3 and recorder.stats().files == 1
    (path,) = sorted((tmp_path / "records").glob("requests-*.vlaobs"))
    steps = load_observations(path)
    assert [step.served.request_id for step in steps] == ["req-0", "req-1", "req-2"]
    for t, step in enumerate(steps):
        expected = served(t)
        for name, frame in expected["frames"].items():
            np.testing.assert_array_equal(step.observation.images[name], frame)  # PNG: lossless
        np.testing.assert_array_equal(step.observation.state, expected["state"])
        assert step.observation.task == expected["task"]
        np.testing.assert_array_equal(step.served.actions, expected["actions"])
        assert step.served.parameters == {"action_horizon": 10}
        assert step.served.timings == expected["timings"]
    assert steps[0].wall_time <= steps[1].wall_time <= steps[2].wall_time

    code, out, err = cli(capsys, "view", str(path), "--out", str(tmp_path / "sheet.png"))
    assert code == 0, err
    assert "3 of 3 step(s)" in out

    # replayed to a reference server, the requests get the actions that were recorded
    replayed = tmp_path / "replayed.npz"
    code, _, err = cli(
        capsys, "send", server_url, "--obs", str(path), "--save-actions", str(replayed)
    )
    assert code == 0, err
    np.testing.assert_allclose(
        load_action_chunks(replayed), np.stack([s.served.actions for s in steps]), rtol=1e-5
    )


def _one_step_bytes(tmp_path: Path) -> int:
    with RequestRecorder(tmp_path / "probe") as probe:
        record(probe, 0)
    return probe.stats().bytes


def test_rotate_keeps_the_latest_requests_within_the_bounds(tmp_path):
    step = _one_step_bytes(tmp_path)  # header and one step
    max_files = 3
    max_bytes = max_files * 2 * step  # two steps (and a header) per file
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "older.vlaobs").write_bytes(b"not ours")
    with RequestRecorder(folder, max_bytes=max_bytes, max_files=max_files) as recorder:
        for t in range(12):
            record(recorder, t)
    stats = recorder.stats()
    files = sorted(folder.glob("requests-*.vlaobs"))
    assert len(files) == stats.files == max_files
    assert sum(f.stat().st_size for f in files) == stats.bytes <= max_bytes
    assert stats.rotated > 0 and stats.stopped is None and stats.skipped == 0
    kept = [s.served.request_id for f in files for s in load_observations(f)]
    assert kept == [f"req-{t}" for t in range(12 - len(kept), 12)]  # the latest, in order
    assert (folder / "older.vlaobs").read_bytes() == b"not ours"  # never touched


def test_recordings_are_private_to_their_owner(tmp_path):
    """Camera frames: files 0600 and the folder the recorder makes 0700, whatever the umask
    would let other users read (022, the usual one, gives 0644 and 0755)."""
    folder = tmp_path / "records"
    umask = os.umask(0o022)
    try:
        with RequestRecorder(folder) as recorder:
            record(recorder, 0)
    finally:
        os.umask(umask)
    (recording,) = folder.glob("requests-*.vlaobs")
    assert oct(folder.stat().st_mode & 0o777) == oct(0o700)
    assert oct(recording.stat().st_mode & 0o777) == oct(0o600)
    assert len(load_observations(recording)) == 1


def test_stop_keeps_the_first_requests_and_says_so_once(tmp_path, caplog):
    step = _one_step_bytes(tmp_path)
    folder = tmp_path / "records"
    with (
        caplog.at_level(logging.WARNING, logger="vla_client.server.recorder"),
        RequestRecorder(folder, max_bytes=2 * 2 * step, max_files=2, on_full="stop") as recorder,
    ):
        for t in range(10):
            record(recorder, t)
    stats = recorder.stats()
    assert stats.stopped is not None and "full" in stats.stopped
    kept = [s.served.request_id for f in sorted(folder.iterdir()) for s in load_observations(f)]
    assert kept == [f"req-{t}" for t in range(len(kept))] and 0 < len(kept) < 10
    assert stats.recorded == len(kept)
    assert len(stopped_logs(caplog)) == 1


@pytest.mark.parametrize("kind", ["file", "proc", "read-only"])
def test_a_folder_that_cannot_be_written_stops_recording_once(tmp_path, caplog, kind):
    if kind == "file":
        folder = tmp_path / "not-a-folder"
        folder.write_text("")
    elif kind == "proc":
        folder = Path("/proc/vla-client-recorder-test")
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes to a read-only folder regardless of its mode")
        folder = tmp_path / "read-only"
        folder.mkdir()
        folder.chmod(0o500)
    with (
        caplog.at_level(logging.WARNING, logger="vla_client.server.recorder"),
        RequestRecorder(folder) as recorder,
    ):
        for t in range(3):
            record(recorder, t)  # returns, raises nothing: the caller goes on serving
    assert recorder.stats().stopped is not None and recorder.stats().recorded == 0
    (line,) = stopped_logs(caplog)
    assert str(folder) in line and "requests are still served" in line


DISK_FULL = """
import json, logging, resource, signal, sys
import numpy as np
from vla_client.server.recorder import RequestRecorder

logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
frames = {"wrist": np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)}
folder, limit = sys.argv[1], int(sys.argv[2])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
recorder = RequestRecorder(folder, image_format="raw")
for t in range(6):
    recorder.record(frames, None, "", {}, np.zeros((2, 2), np.float32), {}, request_id=str(t))
recorder.close()
stats = recorder.stats()
print(json.dumps({"recorded": stats.recorded, "stopped": stats.stopped}))
"""


def test_a_full_disk_stops_recording_once_and_keeps_every_whole_step(tmp_path):
    """A file size limit (RLIMIT_FSIZE) makes writes fail the way a full disk does."""
    step = 48 * 64 * 3 + 200  # a raw frame and its framing, roughly
    completed = subprocess.run(
        [sys.executable, "-c", DISK_FULL, str(tmp_path), str(int(2.5 * step))],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["stopped"] == "cannot write: File too large"
    assert [line for line in completed.stderr.splitlines() if "stopped" in line] == [
        f"ERROR recording to {tmp_path} stopped: cannot write: File too large "
        "(requests are still served)"
    ]
    (path,) = tmp_path.glob("requests-*.vlaobs")
    steps = load_observations(path)  # the failed write was cut back: no truncated step
    assert [s.served.request_id for s in steps] == [str(t) for t in range(report["recorded"])]
    assert report["recorded"] == 2


def test_a_full_queue_drops_and_counts(tmp_path, caplog):
    request = served(0, size=(360, 640))
    request.pop("request_id")
    with (
        caplog.at_level(logging.WARNING, logger="vla_client.server.recorder"),
        RequestRecorder(tmp_path, queue_size=1) as recorder,
    ):
        for _ in range(50):  # far faster than three PNG encodes per request
            recorder.record(**request)
    stats = recorder.stats()
    assert stats.dropped > 0 and stats.recorded + stats.dropped == 50
    assert stats.recorded == len(load_observations(next(tmp_path.glob("*.vlaobs"))))
    assert sum("dropped" in r.getMessage() for r in caplog.records) == 1


def test_a_request_it_cannot_store_is_skipped_and_counted(tmp_path, caplog):
    with (
        caplog.at_level(logging.WARNING, logger="vla_client.server.recorder"),
        RequestRecorder(tmp_path) as recorder,
    ):
        request = served(0)
        request.pop("request_id")
        recorder.record(**{**request, "parameters": {"callback": object()}})
        recorder.record(**{**request, "frames": {"wrist": np.zeros((4, 4, 5), np.uint8)}})
        record(recorder, 1)
    stats = recorder.stats()
    assert (stats.skipped, stats.recorded, stats.stopped) == (2, 1, None)
    assert sum("skipped" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"on_full": "drop"}, "on_full must be one of 'rotate', 'stop'"),
        ({"image_format": "webp"}, "image_format must be one of 'png', 'jpeg', 'raw'"),
        ({"max_files": 0}, "max_files must be at least 1"),
        ({"max_bytes": 100}, "max_bytes must allow"),
        ({"queue_size": 0}, "queue_size must be at least 1"),
    ],
)
def test_options_are_checked(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        RequestRecorder(tmp_path, **options)


def test_importing_the_recorder_pulls_in_no_http_stack_and_no_other_server_part():
    code = (
        "import sys, vla_client.server.recorder; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'uvicorn') "
        "or m.startswith('vla_client.server')))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert completed.stdout.strip() == "['vla_client.server', 'vla_client.server.recorder']"
