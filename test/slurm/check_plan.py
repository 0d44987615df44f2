#!/usr/bin/env python3
"""Checks the `psrun plan --json` views printed by every rank of one Slurm job step.

Input, either:
  --dir D [--prefix P]  files P<rank>.json (the plan), P<rank>.env ("SLURMD_NODENAME SLURM_NODEID SLURM_LOCALID")
  --srun-output F       the output of `srun -l psrun plan --json` ("R: <line>"; a pretty-printed object is joined)
Expectations:
  --ntasks N            number of ranks that must have printed a view
  --tasks LIST          tf4slurm task list: element i is the i-th task in node-major order (node, then local id)
  --ps K                number of ps (default: from --tasks)
  --ps-per-node N       every node that runs a task runs exactly N ps
  --distinct-ps-nodes   no two ps on one node
  --block-nodes LIST    (srun-output mode) node of each rank under block distribution, e.g. n1,n1,n2,n2
Prints one line per finding; exit 0 when every check passed, 1 otherwise. On success prints
"plan ok: <ps> | <worker> | chief <chief>" so the test log shows the map.
"""
import argparse
import json
import re
import sys
from collections import defaultdict

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
    return cond


def read_dir(d, prefix, ntasks):
    views, envs = {}, {}
    for r in range(ntasks):
        try:
            with open(f"{d}/{prefix}{r}.json") as f:
                views[r] = json.load(f)
            with open(f"{d}/{prefix}{r}.env") as f:
                node, nodeid, localid = f.read().split()
                envs[r] = (node, int(nodeid), int(localid))
        except (OSError, ValueError) as e:
            failures.append(f"rank {r}: no valid view: {e}")
    return views, envs


def read_srun_output(path):
    lines = defaultdict(list)
    with open(path) as f:
        for line in f:
            m = re.match(r"^\s*(\d+): ?(.*)$", line.rstrip("\n"))
            if m:
                lines[int(m.group(1))].append(m.group(2))
    views = {}
    for r, ls in lines.items():
        text = "\n".join(ls)
        start = text.find("{")
        try:
            views[r] = json.loads(text[start:]) if start >= 0 else None
        except ValueError as e:
            failures.append(f"rank {r}: output is not one JSON object ({e}): {text[:200]!r}")
            continue
        check(views[r] is not None, f"rank {r}: no JSON object in its output")
    return {r: v for r, v in views.items() if v is not None}


def node_major_slots(envs):
    """rank -> position when the step's tasks are listed node by node (Slurm's node order), then by local id."""
    per_node = defaultdict(int)
    for node, _, _ in envs.values():
        per_node[node] += 1
    order = sorted(per_node, key=lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n)])
    offset, acc = {}, 0
    for n in order:
        offset[n], acc = acc, acc + per_node[n]
    return {r: offset[node] + localid for r, (node, _, localid) in envs.items()}


def host_of(addr):
    addr = addr.removeprefix("tcp://")
    return addr.rsplit(":", 1)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir")
    ap.add_argument("--prefix", default="rank-")
    ap.add_argument("--srun-output")
    ap.add_argument("--ntasks", type=int, required=True)
    ap.add_argument("--tasks")
    ap.add_argument("--ps", type=int)
    ap.add_argument("--ps-per-node", type=int)
    ap.add_argument("--distinct-ps-nodes", action="store_true")
    ap.add_argument("--block-nodes")
    a = ap.parse_args()

    if a.dir:
        views, envs = read_dir(a.dir, a.prefix, a.ntasks)
    else:
        views, envs = read_srun_output(a.srun_output), {}
        if a.block_nodes:
            nodes = a.block_nodes.split(",")
            seen = defaultdict(int)
            for r in range(len(nodes)):
                envs[r] = (nodes[r], None, seen[nodes[r]])
                seen[nodes[r]] += 1
    check(sorted(views) == list(range(a.ntasks)),
          f"expected views from ranks 0..{a.ntasks - 1}, got {sorted(views)}")
    if not views:
        return report()

    # 1. Shape of every view, and agreement on the map.
    for r, v in views.items():
        for key, typ in (("ps", list), ("worker", list), ("chief", str), ("self", dict)):
            check(isinstance(v.get(key), typ), f"rank {r}: '{key}' missing or not a {typ.__name__}: {v}")
    if failures:
        return report()
    ref = views[min(views)]
    for r, v in views.items():
        for key in ("ps", "worker", "chief"):
            check(v[key] == ref[key], f"rank {r}: {key} {v[key]} differs from rank {min(views)}'s {ref[key]}")
    ps, worker, chief = ref["ps"], ref["worker"], ref["chief"]
    addrs = ps + worker + ([] if chief in worker else [chief])
    check(len(set(addrs)) == len(addrs), f"addresses are not all distinct: {addrs}")
    check(len(addrs) == a.ntasks, f"{len(addrs)} addresses for {a.ntasks} tasks: {addrs}")
    check(bool(worker) and chief == worker[0], f"chief {chief} is not worker 0 ({worker[:1]})")
    for addr in addrs:
        check(re.fullmatch(r"(tcp://)?[A-Za-z0-9.-]+:\d{1,5}", addr) is not None
              and 0 < int(addr.rsplit(":", 1)[1]) < 65536, f"malformed address {addr!r}")

    # 2. Each rank's self: rank, node, and its own address in the map. self.rank is the task's SLURM_PROCID,
    # or, when the view also has self.procid (== SLURM_PROCID), the task's node-major slot (node order, then
    # local id), which differs from SLURM_PROCID under -m cyclic.
    slots = node_major_slots(envs)
    by_role = defaultdict(list)
    for r, v in views.items():
        s = v["self"]
        if "procid" in s:
            check(s["procid"] == r, f"rank {r}: self.procid is {s['procid']}")
            if r in slots:
                check(s.get("rank") == slots[r], f"rank {r}: self.rank is {s.get('rank')}, its node-major slot is {slots[r]}")
        else:
            check(s.get("rank") == r, f"rank {r}: self.rank is {s.get('rank')}")
        role, idx = s.get("role"), s.get("index")
        check(role in ("ps", "worker", "evaluator"), f"rank {r}: bad role {role!r}")
        by_role[role].append(idx)
        if r in envs:
            check(s.get("node") == envs[r][0], f"rank {r}: self.node {s.get('node')} but it runs on {envs[r][0]}")
        lst = ps if role == "ps" else worker if role == "worker" else None
        if lst is not None and check(isinstance(idx, int) and 0 <= idx < len(lst),
                                     f"rank {r}: {role} index {idx} out of range"):
            check(host_of(lst[idx]) == s.get("node"),
                  f"rank {r}: its address {lst[idx]} is not on its node {s.get('node')}")
    check(sorted(by_role["ps"]) == list(range(len(ps))), f"ps indices {sorted(by_role['ps'])} for {len(ps)} ps")
    check(sorted(by_role["worker"]) == list(range(len(worker))),
          f"worker indices {sorted(by_role['worker'])} for {len(worker)} workers")

    # 3. Expectations from the request.
    if a.tasks:
        tasks = a.tasks.split(",")
        check(len(tasks) == a.ntasks, "test bug: task list length")
        counts = defaultdict(int)
        expected = {}
        for pos, role in enumerate(tasks):
            expected[pos] = ("worker" if role == "chief" else role, counts[role])
            counts[role] += 1
        for r, v in views.items():
            if r not in envs:
                continue
            node, _, localid = envs[r]
            want_role, want_idx = expected[slots[r]]
            got = (v["self"]["role"], v["self"]["index"])
            check(got == (want_role, want_idx), f"rank {r} ({node} local {localid}): self is {got}, "
                                                 f"task list says {(want_role, want_idx)}")
    want_ps = a.ps if a.ps is not None else (a.tasks.split(",").count("ps") if a.tasks else None)
    if want_ps is not None:
        check(len(ps) == want_ps, f"{len(ps)} ps, expected {want_ps}: {ps}")
    ps_nodes = [host_of(p) for p in ps]
    if a.ps_per_node is not None:
        nodes = {e[0] for e in envs.values()}
        for n in nodes:
            check(ps_nodes.count(n) == a.ps_per_node, f"node {n} has {ps_nodes.count(n)} ps, expected {a.ps_per_node}")
    if a.distinct_ps_nodes:
        check(len(set(ps_nodes)) == len(ps_nodes), f"two ps on one node: {ps}")
    return report(ref)


def report(ref=None):
    for f in failures:
        print("FAIL:", f)
    if not failures and ref is not None:
        print(f"plan ok: ps {ref['ps']} | worker {ref['worker']} | chief {ref['chief']}")
    return 1 if failures or ref is None else 0


if __name__ == "__main__":
    sys.exit(main())
