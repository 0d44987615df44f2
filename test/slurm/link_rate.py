#!/usr/bin/env python3
"""TCP throughput between two tasks of a Slurm step (the network-namespace lab's link check).

Run as `srun -N2 --ntasks-per-node=1 link_rate.py SECONDS`: rank 0 listens on its node, rank 1 connects
to rank 0's node (first name of SLURM_STEP_NODELIST, resolved by the lab's hosts file) and sends for
SECONDS. Rank 0 prints one JSON line: {"bytes", "seconds", "mbit_per_s", "from", "to"}.
"""
import json
import os
import socket
import subprocess
import sys
import time

PORT = 5999


def first_node():
    out = subprocess.run(["scontrol", "show", "hostnames", os.environ["SLURM_STEP_NODELIST"]],
                         check=True, capture_output=True, text=True).stdout.split()
    return out[0]


def serve():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", PORT))
    s.listen(1)
    s.settimeout(60)
    conn, peer = s.accept()
    total, t0 = 0, None
    while True:
        b = conn.recv(1 << 20)
        if not b:
            break
        if t0 is None:
            t0 = time.monotonic()
        total += len(b)
    dt = time.monotonic() - t0
    print(json.dumps({"bytes": total, "seconds": round(dt, 3), "mbit_per_s": round(total * 8 / dt / 1e6, 1),
                      "from": peer[0], "to": socket.gethostname()}), flush=True)


def send(seconds):
    host = first_node()
    for _ in range(100):  # rank 0 may not listen yet
        try:
            conn = socket.create_connection((host, PORT), timeout=5)
            break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit(f"link_rate.py: cannot connect to {host}:{PORT}")
    buf = b"x" * (1 << 20)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        conn.sendall(buf)
    conn.close()


if __name__ == "__main__":
    if os.environ.get("SLURM_PROCID") == "0":
        serve()
    else:
        send(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
