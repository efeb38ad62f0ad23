import subprocess
import sys


def test_demo_runs_every_path_and_reports_bit_exact_delivery():
    completed = subprocess.run(
        [sys.executable, "-m", "vla_client.cli", "demo", "--repeat", "1", "--cameras", "2"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    for path in ("raw/msgpack", "png/json", "jpeg/json", "pixels/json"):
        row = next(line for line in lines if line.startswith(path))
        assert row.split()[-1] == ("lossy" if path.startswith("jpeg") else "yes")
    rows = [line.split() for line in lines if line.split()[:1] and "/" in line.split()[0]]
    assert len(rows) == 11
    ipc = next(row for row in rows if row[1] == "ipc")  # raw frames in shared memory
    assert ipc[0] == "raw/msgpack" and ipc[-1] == "yes"
    totals = [float(row[5]) for row in rows]
    assert totals == sorted(totals)  # fastest path first
