#!/usr/bin/env python3
"""psrun's parameter servers on an emulated cluster: throughput for W workers and K psd shards.

Every host is a network namespace of test/slurm/nslab.sh (network only, SLURM=0) with a link shaped to
--rate Mbit/s in both directions. psd and workerd are started with `psrun run` and TF-style flags
(--ps_hosts/--worker_hosts/--job_name/--task_index) inside their hosts; workers use synthetic compute
(`--synthetic-compute-ms T`: sleep T per step, then push a gradient of the model's real size and pull
the real parameters), so 32 workers fit on 2 cores while every byte crosses the shaped links.

Placements: spread (K psd hosts + W worker hosts), colocated (psd k on worker host k; needs K <= W) and
packed (all K psd on host 1, behind one link: what chunking one psd's exchange would give; the model's
pipelined variant is the cycle T + M/B + M/(K B) of replies overlapping the later pushes).
Measured: the chief's progress lines ("all workers N img/s") after the first --skip-lines, median;
steps/s = img/s / batch (async: one global step per pushed gradient; sync: per aggregated update).
Model (docs/scaling.md), with M the model's bytes, B the link's payload rate (--rate x 1448/1514), T the
compute time, J the mean of its exponential jitter (--jitter), b backup workers (spread placement;
colocated: a worker on a psd host reaches that shard over loopback):
  async, overlap off:  steps/s = min(W / (T + J + 2 M/B), K B / M)   (each worker's own cycle; the shards' links)
  sync (R = W - b replicas): steps/s = 1 / (T + S + 2 max(M/B, R M / (K B)))   (push phase, then pull phase)
    S = J (1/(b+1) + ... + 1/W): the expected wait for the R-th fastest of W exponential jitters
Async spread K = 1 lines also carry a closed queueing model (queueing_async: the pushes of workers in
random phase queue at the shard). Sync lines also carry the pipelined variant (pulls sent one after
another: M/B + max(M/B, R M/(K B)) instead of two phases) and an event simulation of psd's stale-gradient
rule with a first-in first-out push queue (simulate_sync).
Prints one JSON line per configuration; --plot draws the curves with the model (gnuplot, PNG); --remodel
recomputes the model fields of OUT/scale.jsonl.
Needs root (namespaces, tc). Example:
  bench/scale.py --psrun build/launcher/psrun --workers 1,2,4,8,16,32 --shards 1,2,4 --rate 100 \
      --compute-ms 100 --out runs/scale
  bench/scale.py --modes sync --workers 2,4,8 --shards 1,2 --backup-workers 0,1,2 --jitter 0,50 --out runs/sync
"""
import argparse
import heapq
import json
import os
import random
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
PROGRESS = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) .*step (\d+)/\d+ +\d+ img/s \(all workers (\d+)\)", re.M)


def lab(env, *args, **kw):
    return subprocess.run([NSLAB, *args], env=env, check=True, text=True, capture_output=True, **kw).stdout


# TCP payload per byte on the shaped link: 1448-byte segments (MSS with timestamps) in 1514-byte frames.
PAYLOAD_SHARE = 1448 / 1514
# Bytes per parameter in the payload frames (workerd --wire-precision).
WIRE_BYTES = {"f32": 4, "bf16": 2}


def straggler_s(workers, backups, jitter_ms):
    """Expected wait beyond T for the (W-b)-th fastest of W workers whose compute is T + Exp(jitter_ms).

    The order statistics of W i.i.d. exponentials with mean J (Renyi): the gap between the (j-1)-th and
    j-th fastest is exponential with mean J / (W - j + 1), independent of the others, so the (W-b)-th
    fastest finishes after J * (1/W + 1/(W-1) + ... + 1/(b+1)) on average (b = 0: J * H_W).
    Assumes every worker starts the step at once (see simulate_sync for the late starters).
    """
    return jitter_ms / 1000 * sum(1.0 / i for i in range(backups + 1, workers + 1))


def link_terms(cfg):
    """(bits of the model, a link's payload bits/s, compute s) of a configuration."""
    m_bits = MODEL_FLOATS[cfg["model"]] * WIRE_BYTES[cfg.get("wire_precision", "f32")] * 8
    return (m_bits, cfg["rate_mbit"] * 1e6 * PAYLOAD_SHARE, cfg["compute_ms"] / 1000)


def sync_comm_s(cfg, pipelined=False):
    """Communication per sync step: push phase then pull phase, each max(own link, shard link).

    Two-phase: every counted push crosses the shard's downlink, then every pull its uplink:
    2 max(M/B, R M/(K B)) with R = W - b replicas. Pipelined: the shard sends the pulls one after another,
    so worker i starts computing (and later pushes) i M/(K B) after the first and the pushes no longer
    queue: M/B + max(M/B, R M/(K B)).
    """
    m_bits, b, _ = link_terms(cfg)
    w, k = cfg["workers"], cfg["shards"]
    replicas = w - cfg.get("backup_workers", 0)
    colocated = cfg["placement"] == "colocated"
    # A worker on a psd host reaches that shard (1/K of the model) over loopback; with K shards every
    # worker but the colocated one crosses a link to each shard.
    remote = replicas - (1 if colocated else 0)
    own = m_bits * (k - 1) / k / b if colocated and w <= k else m_bits / b
    shard = remote * m_bits / (k * b)
    return own + max(own, shard) if pipelined else 2 * max(own, shard)


def model_times(cfg, pipelined=False):
    """Global steps/s the model predicts (see the module doc)."""
    m_bits, b, t = link_terms(cfg)
    w, k = cfg["workers"], cfg["shards"]
    jitter = cfg.get("jitter_ms", 0) / 1000
    if cfg["mode"] == "sync":
        straggle = straggler_s(w, cfg.get("backup_workers", 0), cfg.get("jitter_ms", 0))
        return 1.0 / (t + straggle + sync_comm_s(cfg, pipelined))
    t += jitter  # async: every worker runs its own cycle, on average T + J
    if cfg["placement"] == "packed":
        # K shards behind host 1's one link: all pushes cross its downlink (B/M steps/s). A worker sends
        # its K pushes back to back; shard k's reply comes back (on the other direction) while the pushes
        # to the later shards still go out, so its cycle is T + M/B + M/(K B) (K = 1: T + 2 M/B).
        own = m_bits / b
        cycle = t + 2 * own if not pipelined else t + own + own / k
        return min(w / cycle, b / m_bits)
    # Workers whose host runs a psd reach that shard (1/K of the model) over the host's loopback.
    local = min(w, k) if cfg["placement"] == "colocated" else 0
    remote_per_shard = w - (1 if cfg["placement"] == "colocated" else 0)  # workers that reach a shard over links
    own_local = m_bits * (k - 1) / k / b  # per direction, a worker on a psd host
    own_remote = m_bits / b               # per direction, any other worker
    compute_bound = local / (t + 2 * own_local) + (w - local) / (t + 2 * own_remote)
    if remote_per_shard == 0:
        return compute_bound
    # Each step sends M/K to every shard; a shard's downlink takes B/(M/K) pushes per second from the
    # workers that are not on its host, a fraction remote_per_shard/W of all steps.
    shard_bound = k * b / m_bits * w / remote_per_shard
    return min(compute_bound, shard_bound)


def queueing_async(cfg):
    """Async, spread: global steps/s of the closed queueing model (mean value analysis), or None.

    The max() model assumes the W workers' pushes never meet at a shard. With random compute times they
    do: each shard's downlink (pushes) and uplink (pulls) is a server that W workers visit once per
    cycle with demand D = M/(K B), between think times of T + J. MVA over n = 1..W workers: a transfer
    waits D Q(n-1) behind the queue an arriving worker sees, the cycle is T + J + 2 (M/B + D Q(n-1)),
    X(n) = n / cycle, Q(n) = X(n) (D + D Q(n-1)). K = 1 only: with K >= 2 a worker's K slices share its
    own link and the shards are not single servers; measured, this formula then undershoots by ~10%.
    """
    if cfg["mode"] != "async" or cfg["placement"] != "spread" or cfg["shards"] != 1:
        return None
    m_bits, b, t = link_terms(cfg)
    think = t + cfg.get("jitter_ms", 0) / 1000
    own, d = m_bits / b, m_bits / (cfg["shards"] * b)
    queue, rate = 0.0, 0.0
    for n in range(1, cfg["workers"] + 1):
        cycle = think + 2 * (own + d * queue)
        rate = n / cycle
        queue = rate * d * (1 + queue)
    return rate


def simulate_sync(cfg, steps=20000, seed=1):
    """Sync steps/s with jitter and backup workers, by an event simulation of psd's rules and the links.

    A worker computes T + Exp(J) on the parameters of step v, then pushes: its M/K slice to a shard leaves
    its own link in M/B at the earliest and queues first-in first-out at the shard's downlink, D = M/(K B)
    per push (stale pushes too). If the step is still v when the push is in, it counts and the worker waits,
    else it is dropped and the worker gets the current parameters in M/B. When R = W - b pushes of the step
    are in, the step completes and the R waiting workers get the new parameters in max(M/B, R D) (the
    pulls share the shard's uplink). Unlike straggler_s, a worker that was late starts its next step late,
    and the push queue overlaps the wait for the slowest workers. Spread placement (for colocated lines it
    treats every worker as remote).
    """
    rng = random.Random(seed)
    w, backups = cfg["workers"], cfg.get("backup_workers", 0)
    m_bits, b, t = link_terms(cfg)
    jitter = cfg.get("jitter_ms", 0) / 1000
    own, d = m_bits / b, m_bits / (cfg["shards"] * b)
    replicas = w - backups

    def ready(start):  # when the gradient is computed
        return start + t + (rng.expovariate(1 / jitter) if jitter > 0 else 0)

    events = [(ready(0.0), i, 0) for i in range(w)]  # (gradient ready, worker, parameter version)
    heapq.heapify(events)
    step, waiting, done_at, link_free = 0, [], [], 0.0
    while len(done_at) < steps:
        ready_at, i, version = heapq.heappop(events)
        link_free = max(link_free, ready_at) + d
        now = max(ready_at + own, link_free)  # the push is in (pushes leave in ready order: FIFO)
        if version < step:  # stale: dropped, the current parameters go back at once
            heapq.heappush(events, (ready(now + own), i, step))
            continue
        waiting.append(i)
        if len(waiting) == replicas:
            step += 1
            done_at.append(now)
            for j in waiting:
                heapq.heappush(events, (ready(now + max(own, replicas * d)), j, step))
            waiting = []
    warm = steps // 10
    return (len(done_at) - 1 - warm) / (done_at[-1] - done_at[warm])


def run_config(args, cfg, env, port):
    w, k = cfg["workers"], cfg["shards"]
    if cfg["placement"] == "spread":
        ps_hosts = list(range(1, k + 1))
        worker_hosts = list(range(k + 1, k + w + 1))
    elif cfg["placement"] == "packed":  # every psd on host 1 (one link), each on its own port
        ps_hosts = [1] * k
        worker_hosts = list(range(2, w + 2))
    else:
        ps_hosts = list(range(1, k + 1))
        worker_hosts = list(range(1, w + 1))
    ps = ",".join(f"10.99.0.{h}:{port + 1 + (i if cfg['placement'] == 'packed' else 0)}"
                  for i, h in enumerate(ps_hosts))
    workers = ",".join(f"10.99.0.{h}:{port}" for h in worker_hosts)
    steps = cfg["steps_per_worker"] * (w if cfg["mode"] == "async" else 1)
    train = ["--model", cfg["model"], "--synthetic-compute-ms", str(cfg["compute_ms"]), "--steps", str(steps),
             "--batch-size", str(args.batch_size), "--threads", "1", "--log-every", str(cfg["log_every"]),
             "--data-dir", args.data_dir, "--wire-precision", cfg["wire_precision"]]
    if cfg["jitter_ms"] > 0:
        train += ["--synthetic-compute-jitter", f"exp:{cfg['jitter_ms']:g}"]
    common = ["run", "--ps_hosts", ps, "--worker_hosts", workers]
    if args.auth == "none":
        common.append("--no-auth")
    else:
        common += ["--auth", args.auth]
    if cfg["mode"] == "sync":
        common += ["--sync", "--replicas-to-aggregate", str(w - cfg["backup_workers"]),
                   "--backup-workers", str(cfg["backup_workers"])]
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
    lines = [(int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)), int(m.group(4)), int(m.group(5)))
             for m in PROGRESS.finditer(chief)][args.skip_lines:]
    if any(codes) or len(lines) < 2:
        return {"error": f"exit codes {codes}, {len(lines)} progress lines", "logs": logdir}
    ips = statistics.median(r for _, _, r in lines)
    # The chief's "all workers" rate is global steps x batch per second, in both modes. The span rate
    # is the global steps between the first and last line kept over the time between them (all the
    # windows at once: with jitter the windows vary more than their median shows).
    span = (lines[-1][0] - lines[0][0]) % 86400
    return {"images_per_sec": ips, "steps_per_sec": ips / args.batch_size,
            "span_steps_per_sec": round((lines[-1][1] - lines[0][1]) / span, 3) if span > 0 else None,
            "progress_lines": len(lines), "logs": logdir}


def add_models(cfg):
    """Sets the model fields of a result line (and its ratio to the measured rate)."""
    cfg["model_steps_per_sec"] = round(model_times(cfg), 3)
    if queueing_async(cfg):
        cfg["model_queueing_steps_per_sec"] = round(queueing_async(cfg), 3)
    if cfg["mode"] == "async" and cfg["placement"] == "packed":
        cfg["model_pipelined_steps_per_sec"] = round(model_times(cfg, pipelined=True), 3)
    if cfg["mode"] == "sync":
        cfg["model_pipelined_steps_per_sec"] = round(model_times(cfg, pipelined=True), 3)
        cfg["straggler_ms"] = round(straggler_s(cfg["workers"], cfg.get("backup_workers", 0),
                                                cfg.get("jitter_ms", 0)) * 1000, 1)
        cfg["sim_steps_per_sec"] = round(simulate_sync(cfg), 3)
    if "steps_per_sec" in cfg:
        cfg["vs_model"] = round(cfg["steps_per_sec"] / cfg["model_steps_per_sec"], 3)


def remodel(jsonl):
    """Recomputes the model fields of every line of `jsonl` in place (after a change of the model)."""
    rows = [json.loads(l) for l in open(jsonl) if l.strip()]
    with open(jsonl, "w") as f:
        for r in rows:
            r.setdefault("jitter_ms", 0)
            r.setdefault("backup_workers", 0)
            add_models(r)
            f.write(json.dumps(r) + "\n")


def plot(jsonl, png):
    """Measured steps/s (points) and the model (lines) against W, one colour per K, with gnuplot."""
    rows = [json.loads(l) for l in open(jsonl) if l.strip()]
    rows = [r for r in rows if "steps_per_sec" in r]
    key = lambda r: (r["mode"], r["placement"], r["shards"], r.get("jitter_ms", 0), r.get("backup_workers", 0))
    groups = sorted({key(r) for r in rows})
    data = os.path.splitext(png)[0] + ".dat"
    with open(data, "w") as f:
        for g in groups:
            f.write(f"# {g[0]} {g[1]} K={g[2]} J={g[3]:g} b={g[4]}\n")
            for r in sorted((r for r in rows if key(r) == g),
                            key=lambda r: r["workers"]):
                f.write(f"{r['workers']} {r['steps_per_sec']} {r['model_steps_per_sec']}\n")
            f.write("\n\n")
    r0 = rows[0]
    title = (f"{r0['model']} ({r0['model_bytes'] // 1000} kB), links {r0['rate_mbit']} Mbit/s, "
             f"compute {r0['compute_ms']:g} ms per step")
    plots = []
    for i, g in enumerate(groups):
        label = f"{g[0]} {g[1]} K={g[2]}" + (f" J={g[3]:g}ms" if g[3] else "") + (f" b={g[4]}" if g[4] else "")
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
    ap.add_argument("--jitter", default="0",
                    help="comma list of mean extra compute ms, exponential (workerd --synthetic-compute-jitter "
                         "exp:J); 0: none. Several values run one after another at each point (A/B interleaved)")
    ap.add_argument("--backup-workers", default="0",
                    help="sync: comma list of backup workers b (replicas to aggregate = W - b), interleaved "
                         "like --jitter; points with b >= W are skipped")
    ap.add_argument("--model", default="dls_mlp", choices=sorted(MODEL_FLOATS))
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps-per-worker", type=int, default=40)
    ap.add_argument("--skip-lines", type=int, default=2, help="progress lines dropped as warm-up")
    ap.add_argument("--data-dir", default=os.path.expanduser("~/.cache/psrun/data/mnist"))
    ap.add_argument("--wire-precision", default="f32", choices=sorted(WIRE_BYTES),
                    help="the workers' --wire-precision (bytes per value in the payload frames)")
    ap.add_argument("--auth", choices=["none", "mac", "curve"], default="none",
                    help="between the daemons: none (--no-auth, the default), a MAC on every message, or CURVE")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", default=tempfile.mkdtemp(prefix="psrun-scale-"))
    ap.add_argument("--plot", metavar="PNG", help="only draw OUT/scale.jsonl into PNG (no measuring)")
    ap.add_argument("--remodel", action="store_true", help="only recompute the model fields of OUT/scale.jsonl")
    args = ap.parse_args()
    if args.remodel:
        remodel(os.path.join(args.out, "scale.jsonl"))
        return
    if args.plot:
        plot(os.path.join(args.out, "scale.jsonl"), args.plot)
        return
    os.makedirs(args.out, exist_ok=True)
    workers = [int(x) for x in args.workers.split(",")]
    shards = [int(x) for x in args.shards.split(",")]
    placements = args.placements.split(",")
    jitters = [float(x) for x in args.jitter.split(",")]
    backups = [int(x) for x in args.backup_workers.split(",")]
    if min(jitters) < 0 or min(backups) < 0:
        ap.error("--jitter and --backup-workers must be >= 0")
    nodes = max(workers) + max(shards)
    env = dict(os.environ, LAB=os.path.join(args.out, "lab"), NODES=str(nodes), RATE=str(args.rate), SLURM="0")
    print(lab(env, "up").strip(), file=sys.stderr)
    results = open(os.path.join(args.out, "scale.jsonl"), "a")
    try:
        port = 7000
        for mode in args.modes.split(","):
            for placement in placements:
                for k in shards:
                    for w, b, j in ((w, b, j) for w in workers for b in backups for j in jitters):
                        if placement == "colocated" and k > w or b >= w or b > 0 and mode != "sync":
                            continue
                        cfg = {"mode": mode, "placement": placement, "workers": w, "shards": k,
                               "rate_mbit": args.rate, "compute_ms": args.compute_ms, "jitter_ms": j,
                               "backup_workers": b, "model": args.model,
                               "model_bytes": MODEL_FLOATS[args.model] * WIRE_BYTES[args.wire_precision],
                               "wire_precision": args.wire_precision, "batch_size": args.batch_size,
                               "steps_per_worker": args.steps_per_worker,
                               "log_every": max(1, w if mode == "async" else 1) * 4}
                        port += 2
                        cfg["load_before"] = os.getloadavg()[0]
                        t0 = time.monotonic()
                        r = run_config(args, cfg, env, port)
                        cfg.update(r)
                        cfg["seconds"] = round(time.monotonic() - t0, 1)
                        if "steps_per_sec" in cfg:
                            cfg["steps_per_sec"] = round(cfg["steps_per_sec"], 3)
                        add_models(cfg)
                        line = json.dumps(cfg)
                        print(line, flush=True)
                        results.write(line + "\n")
                        results.flush()
    finally:
        print(lab(env, "down").strip(), file=sys.stderr)


if __name__ == "__main__":
    main()
