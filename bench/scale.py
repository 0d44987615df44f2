#!/usr/bin/env python3
"""psrun's parameter servers on an emulated cluster: throughput for W workers and K psd shards.

Every host is a network namespace of test/slurm/nslab.sh (network only, SLURM=0) with a link shaped to
--rate Mbit/s in both directions. psd and workerd are started with `psrun run` and TF-style flags
(--ps_hosts/--worker_hosts/--job_name/--task_index) inside their hosts; workers use synthetic compute
(`--synthetic-compute-ms T`: sleep T per step, then push a gradient of the model's real size and pull
the real parameters), so 32 workers fit on 2 cores while every byte crosses the shaped links.

Placements: spread (K psd hosts + W worker hosts) and colocated (psd k on worker host k; needs K <= W).
Measured: the chief's progress lines ("all workers N img/s") after the first --skip-lines, median;
steps/s = img/s / batch (async: one global step per pushed gradient; sync: per aggregated update).
Model (docs/scaling.md), with M the model's bytes, B the link's payload rate (--rate x 1448/1514), T the
compute time (spread placement; colocated: a worker on a psd host reaches that shard over loopback):
  async, overlap off:  steps/s = min(W / (T + 2 M/B), K B / M)   (each worker's own cycle; the shards' links)
  sync (R = W replicas): steps/s = 1 / (T + 2 max(M/B, W M / (K B)))   (push phase, then pull phase)
Prints one JSON line per configuration; --plot draws the curves with the model (gnuplot, PNG).
Needs root (namespaces, tc). Example:
  bench/scale.py --psrun build/launcher/psrun --workers 1,2,4,8,16,32 --shards 1,2,4 --rate 100 \
      --compute-ms 100 --out /tmp/scale
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NSLAB = os.path.join(ROOT, "test", "slurm", "nslab.sh")
MODEL_FLOATS = {"dls_mlp": 79510, "mnist_softmax": 7850, "mnist_deep": 3274634, "lenet5": 61706}
PROGRESS = re.compile(r"step (\d+)/\d+ +\d+ img/s \(all workers (\d+)\)")


def lab(env, *args, **kw):
    return subprocess.run([NSLAB, *args], env=env, check=True, text=True, capture_output=True, **kw).stdout


# TCP payload per byte on the shaped link: 1448-byte segments (MSS with timestamps) in 1514-byte frames.
PAYLOAD_SHARE = 1448 / 1514
# Bytes per parameter in the payload frames (workerd --wire-precision).
WIRE_BYTES = {"f32": 4, "bf16": 2}


def model_times(cfg):
    """Global steps/s the model predicts (see the module doc)."""
    m_bits = MODEL_FLOATS[cfg["model"]] * WIRE_BYTES[cfg.get("wire_precision", "f32")] * 8
    b = cfg["rate_mbit"] * 1e6 * PAYLOAD_SHARE
    t = cfg["compute_ms"] / 1000
    w, k = cfg["workers"], cfg["shards"]
    # Workers whose host runs a psd reach that shard (1/K of the model) over the host's loopback.
    local = min(w, k) if cfg["placement"] == "colocated" else 0
    remote_per_shard = w - (1 if cfg["placement"] == "colocated" else 0)  # workers that reach a shard over links
    own_local = m_bits * (k - 1) / k / b  # per direction, a worker on a psd host
    own_remote = m_bits / b               # per direction, any other worker
    if cfg["mode"] == "sync":
        own = own_remote if w > local else own_local
        return 1.0 / (t + 2 * max(own, remote_per_shard * m_bits / (k * b)))
    compute_bound = local / (t + 2 * own_local) + (w - local) / (t + 2 * own_remote)
    if remote_per_shard == 0:
        return compute_bound
    # Each step sends M/K to every shard; a shard's downlink takes B/(M/K) pushes per second from the
    # workers that are not on its host, a fraction remote_per_shard/W of all steps.
    shard_bound = k * b / m_bits * w / remote_per_shard
    return min(compute_bound, shard_bound)


def run_config(args, cfg, env, port):
    w, k = cfg["workers"], cfg["shards"]
    if cfg["placement"] == "spread":
        ps_hosts = list(range(1, k + 1))
        worker_hosts = list(range(k + 1, k + w + 1))
    else:
        ps_hosts = list(range(1, k + 1))
        worker_hosts = list(range(1, w + 1))
    ps = ",".join(f"10.99.0.{h}:{port + 1}" for h in ps_hosts)
    workers = ",".join(f"10.99.0.{h}:{port}" for h in worker_hosts)
    steps = cfg["steps_per_worker"] * (w if cfg["mode"] == "async" else 1)
    train = ["--model", cfg["model"], "--synthetic-compute-ms", str(cfg["compute_ms"]), "--steps", str(steps),
             "--batch-size", str(args.batch_size), "--threads", "1", "--log-every", str(cfg["log_every"]),
             "--data-dir", args.data_dir, "--wire-precision", cfg["wire_precision"]]
    common = ["run", "--ps_hosts", ps, "--worker_hosts", workers]
    if not args.auth:
        common.append("--no-auth")
    if cfg["mode"] == "sync":
        common += ["--sync", "--replicas-to-aggregate", str(w)]
    procs = []
    logdir = tempfile.mkdtemp(prefix="scale-", dir=args.out)
    try:
        for i, h in enumerate(ps_hosts):
            log = open(os.path.join(logdir, f"ps{i}.log"), "w")
            procs.append(subprocess.Popen([NSLAB, "on", str(h), args.psrun, *common, "--job_name", "ps",
                                           "--task_index", str(i), "--", *train],
                                          env=env, stdout=log, stderr=subprocess.STDOUT))
        for i, h in enumerate(worker_hosts):
            log = open(os.path.join(logdir, f"worker{i}.log"), "w")
            procs.append(subprocess.Popen([NSLAB, "on", str(h), args.psrun, *common, "--job_name", "worker",
                                           "--task_index", str(i), "--", *train],
                                          env=env, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + args.timeout
        for p in procs:
            p.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {args.timeout} s", "logs": logdir}
    finally:
        for p in procs:  # by PID; a finished one is a no-op
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    codes = [p.returncode for p in procs]
    chief = open(os.path.join(logdir, "worker0.log")).read()
    rates = [int(m.group(2)) for m in PROGRESS.finditer(chief)]
    rates = rates[args.skip_lines:]
    if any(codes) or len(rates) < 2:
        return {"error": f"exit codes {codes}, {len(rates)} progress lines", "logs": logdir}
    ips = statistics.median(rates)
    # The chief's "all workers" rate is global steps x batch per second, in both modes.
    return {"images_per_sec": ips, "steps_per_sec": ips / args.batch_size,
            "progress_lines": len(rates), "logs": logdir}


def plot(jsonl, png):
    """Measured steps/s (points) and the model (lines) against W, one colour per K, with gnuplot."""
    rows = [json.loads(l) for l in open(jsonl) if l.strip()]
    rows = [r for r in rows if "steps_per_sec" in r]
    groups = sorted({(r["mode"], r["placement"], r["shards"]) for r in rows})
    data = os.path.splitext(png)[0] + ".dat"
    with open(data, "w") as f:
        for g in groups:
            f.write(f"# {g[0]} {g[1]} K={g[2]}\n")
            for r in sorted((r for r in rows if (r["mode"], r["placement"], r["shards"]) == g),
                            key=lambda r: r["workers"]):
                f.write(f"{r['workers']} {r['steps_per_sec']} {r['model_steps_per_sec']}\n")
            f.write("\n\n")
    r0 = rows[0]
    title = (f"{r0['model']} ({r0['model_bytes'] // 1000} kB), links {r0['rate_mbit']} Mbit/s, "
             f"compute {r0['compute_ms']:g} ms per step")
    plots = []
    for i, g in enumerate(groups):
        label = f"{g[0]} {g[1]} K={g[2]}"
        plots.append(f"'{data}' index {i} using 1:2 with linespoints lc {i + 1} pt 7 title '{label}: measured' noenhanced")
        plots.append(f"'{data}' index {i} using 1:3 with lines lc {i + 1} dt 2 title '{label}: model' noenhanced")
    script = (f"set terminal pngcairo size 900,600; set output '{png}'; set logscale x 2; set logscale y 2;"
              f"set xlabel 'workers W'; set ylabel 'global steps/s'; set key left top; set grid;"
              f"set title \"{title}\" noenhanced; plot " + ", ".join(plots))
    subprocess.run(["gnuplot", "-e", script], check=True)
    print(f"wrote {png}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--psrun", default=os.path.join(ROOT, "build", "launcher", "psrun"))
    ap.add_argument("--workers", default="1,2,4,8,16,32")
    ap.add_argument("--shards", default="1,2,4")
    ap.add_argument("--modes", default="async")
    ap.add_argument("--placements", default="spread")
    ap.add_argument("--rate", type=int, default=100, help="link rate, Mbit/s per direction")
    ap.add_argument("--compute-ms", type=float, default=100)
    ap.add_argument("--model", default="dls_mlp", choices=sorted(MODEL_FLOATS))
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps-per-worker", type=int, default=40)
    ap.add_argument("--skip-lines", type=int, default=2, help="progress lines dropped as warm-up")
    ap.add_argument("--data-dir", default=os.path.expanduser("~/.cache/psrun/data/mnist"))
    ap.add_argument("--wire-precision", default="f32", choices=sorted(WIRE_BYTES),
                    help="the workers' --wire-precision (bytes per value in the payload frames)")
    ap.add_argument("--auth", action="store_true", help="CURVE between the daemons (default: --no-auth)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", default=tempfile.mkdtemp(prefix="psrun-scale-"))
    ap.add_argument("--plot", metavar="PNG", help="only draw OUT/scale.jsonl into PNG (no measuring)")
    args = ap.parse_args()
    if args.plot:
        plot(os.path.join(args.out, "scale.jsonl"), args.plot)
        return
    os.makedirs(args.out, exist_ok=True)
    workers = [int(x) for x in args.workers.split(",")]
    shards = [int(x) for x in args.shards.split(",")]
    placements = args.placements.split(",")
    nodes = max(workers) + max(shards)
    env = dict(os.environ, LAB=os.path.join(args.out, "lab"), NODES=str(nodes), RATE=str(args.rate), SLURM="0")
    print(lab(env, "up").strip(), file=sys.stderr)
    results = open(os.path.join(args.out, "scale.jsonl"), "a")
    try:
        port = 7000
        for mode in args.modes.split(","):
            for placement in placements:
                for k in shards:
                    for w in workers:
                        if placement == "colocated" and k > w:
                            continue
                        cfg = {"mode": mode, "placement": placement, "workers": w, "shards": k,
                               "rate_mbit": args.rate, "compute_ms": args.compute_ms, "model": args.model,
                               "model_bytes": MODEL_FLOATS[args.model] * WIRE_BYTES[args.wire_precision],
                               "wire_precision": args.wire_precision, "batch_size": args.batch_size,
                               "steps_per_worker": args.steps_per_worker,
                               "log_every": max(1, w if mode == "async" else 1) * 4}
                        port += 2
                        t0 = time.monotonic()
                        r = run_config(args, cfg, env, port)
                        cfg.update(r)
                        cfg["seconds"] = round(time.monotonic() - t0, 1)
                        cfg["model_steps_per_sec"] = round(model_times(cfg), 3)
                        if "steps_per_sec" in cfg:
                            cfg["steps_per_sec"] = round(cfg["steps_per_sec"], 3)
                            cfg["vs_model"] = round(cfg["steps_per_sec"] / cfg["model_steps_per_sec"], 3)
                        line = json.dumps(cfg)
                        print(line, flush=True)
                        results.write(line + "\n")
                        results.flush()
    finally:
        print(lab(env, "down").strip(), file=sys.stderr)


if __name__ == "__main__":
    main()
