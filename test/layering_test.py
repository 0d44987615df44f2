#!/usr/bin/env python3
"""The layers of docs/architecture.md ("Layers"), checked on every #include "..." of the tree,
within common/ the layers of its libraries (common/meson.build), and within launcher/ the
cluster map's library below the commands (launcher/meson.build), and within psd/ the server's logic
above its transport (psd/transport.h).

Each folder may include only the folders its layer lists; a lower layer that includes a higher
one fails here with the file, the line and the rule. Usage: layering_test.py SOURCE_ROOT.
Before the tree, the checker runs on two made-up files (one allowed, one not), so a checker
that stopped finding violations fails too."""
import re
import sys
from pathlib import Path

# Most specific folder first: a file belongs to the first layer whose folder holds it.
LAYERS = [
    ("common", {"common"}),
    ("psd", {"common", "psd"}),
    ("workerd/nn", {"common", "workerd/nn"}),
    ("workerd/data", {"common", "workerd/data"}),
    ("workerd/onnx", {"common", "workerd/nn", "workerd/onnx"}),
    ("workerd", {"common", "workerd", "workerd/nn", "workerd/data", "workerd/onnx"}),  # the runtime
    ("launcher", {"common", "launcher", "workerd/nn", "workerd/data", "workerd/onnx"}),
]
# The runtime's headers the launcher may include (its public surface for psrun's own commands:
# eval, predict, export, bench, model). A new one is a decision: add it here and in the doc.
LAUNCHER_RUNTIME_SURFACE = {
    "workerd/bench.h", "workerd/class_names.h", "workerd/classification_report.h", "workerd/datasets.h",
    "workerd/eval_metrics.h", "workerd/evaluator.h", "workerd/inference.h", "workerd/input_columns.h",
    "workerd/keyed_checkpoint.h", "workerd/keyed_export.h", "workerd/model_identity.h",
    "workerd/parameter_set.h", "workerd/predict_inputs.h", "workerd/run_recipe.h", "workerd/sparse_tables.h",
    "workerd/table_split.h",
    "workerd/train_flops.h", "workerd/train_options.h", "workerd/trainer.h",
}
# psd's server logic (psd/parameter_server*) runs over psd/transport.h and never sees the transport
# beneath it: only the daemon's constructor (psd/parameter_server_daemon.cpp) names the ZeroMQ one.
PSD_TRANSPORT_HEADERS = {"psd/zmq_transport.h", "psd/zap_handler.h", "common/message_auth.h"}
PSD_DAEMON = "psd/parameter_server_daemon.cpp"
TOP = {"common", "psd", "workerd", "launcher"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    for folder, allowed in LAYERS:
        if path == folder or path.startswith(folder + "/"):
            return folder, allowed
    return None, None


def target_folder(include):
    """The layer folder an include names, or None for headers outside the four components."""
    if include.split("/")[0] not in TOP:
        return None
    folder, _ = layer_of(include)
    return folder


def violations(rel, text):
    folder, allowed = layer_of(rel)
    if folder is None:
        return []
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        inc = m.group(1)
        target = target_folder(inc)
        if target is None or target in allowed:
            continue
        if folder == "launcher" and inc in LAUNCHER_RUNTIME_SURFACE:
            continue
        out.append(f"{rel}:{n}: includes {inc} ({target}), but {folder} may include only "
                   f"{', '.join(sorted(allowed))}" + (" and the runtime surface listed in test/layering_test.py"
                                                       if folder == "launcher" else ""))
    return out


# common/'s libraries (common/meson.build: common_layers and common_layer_uses): a file belongs to
# the library that lists its .cpp (a header without one to base) and may include the headers of
# that library and of the ones it uses.
COMMON_LAYERS = {}  # "wire" -> "protocol"
COMMON_USES = {}    # "client" -> {"client", "base", ...}


def read_common_layers(meson_text):
    layers = re.search(r"common_layers = \{(.*?)\n\}", meson_text, re.S).group(1)
    for name, body in re.findall(r"'(\w+)' : files\((.*?)\)", layers, re.S):
        for source in re.findall(r"'(\w+)\.cpp'", body):
            COMMON_LAYERS[source] = name
    uses = re.search(r"common_layer_uses = \{(.*?)\n\}", meson_text, re.S).group(1)
    for name, body in re.findall(r"'(\w+)' : \[(.*?)\]", uses):
        COMMON_USES[name] = {name} | set(re.findall(r"'(\w+)'", body))
    assert COMMON_LAYERS and set(COMMON_LAYERS.values()) <= set(COMMON_USES), "common/meson.build not understood"


def common_layer(path):
    return COMMON_LAYERS.get(Path(path).stem, "base")


def common_violations(rel, text):
    if not rel.startswith("common/") or not COMMON_USES:
        return []
    own = common_layer(rel)
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        m = INCLUDE.match(line)
        if not m or not m.group(1).startswith("common/"):
            continue
        target = common_layer(m.group(1))
        if target not in COMMON_USES[own]:
            out.append(f"{rel}:{n}: includes {m.group(1)} (common library {target}), but {rel} is in library {own}, "
                       f"which uses only {', '.join(sorted(COMMON_USES[own]))} (common/meson.build)")
    return out


# launcher/'s cluster map (launcher/meson.build: cluster_map_sources): its files may include
# common/ and one another, nothing else of the tree (not the commands, not the runtime).
CLUSTER_MAP = set()  # "hostlist", ...


def read_cluster_map(meson_text):
    body = re.search(r"cluster_map_sources = files\((.*?)\)", meson_text, re.S).group(1)
    CLUSTER_MAP.update(re.findall(r"'(\w+)\.cpp'", body))
    assert CLUSTER_MAP, "launcher/meson.build not understood"


def cluster_map_violations(rel, text):
    if not rel.startswith("launcher/") or Path(rel).stem not in CLUSTER_MAP:
        return []
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        m = INCLUDE.match(line)
        if not m or target_folder(m.group(1)) is None or m.group(1).startswith("common/"):
            continue
        if not (m.group(1).startswith("launcher/") and Path(m.group(1)).stem in CLUSTER_MAP):
            out.append(f"{rel}:{n}: includes {m.group(1)}, but {rel} is in the cluster map (launcher/meson.build "
                       "cluster_map_sources), which may include only common/ and its own headers")
    return out


def psd_transport_violations(rel, text):
    if not Path(rel).name.startswith("parameter_server") or not rel.startswith("psd/") or rel == PSD_DAEMON:
        return []
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        m = INCLUDE.match(line)
        if m and m.group(1) in PSD_TRANSPORT_HEADERS:
            out.append(f"{rel}:{n}: includes {m.group(1)}, but psd's server logic talks to its transport only "
                       f"through psd/transport.h (the ZeroMQ transport is named in {PSD_DAEMON} alone)")
    return out


def self_test():
    ok = violations("workerd/nn/x.cpp", '#include "common/rng.h"\n#include "workerd/nn/shape.h"\n')
    bad = violations("workerd/data/x.cpp", '#include <vector>\n#include "workerd/trainer.h"\n')
    launcher_bad = violations("launcher/x.cpp", '#include "workerd/step_loop.h"\n')
    common_bad = violations("common/x.h", '#include "psd/row_store.h"\n')
    assert ok == [], ok
    assert len(bad) == 1 and "x.cpp:2" in bad[0], bad
    assert len(launcher_bad) == 1, launcher_bad
    assert len(common_bad) == 1, common_bad
    layer_ok = common_violations("common/ps_client.cpp", '#include "common/wire.h"\n#include "common/result.h"\n')
    layer_bad = common_violations("common/wire.cpp", '#include "common/ps_client.h"\n')
    assert layer_ok == [], layer_ok
    assert len(layer_bad) == 1 and "library protocol" in layer_bad[0], layer_bad
    map_ok = cluster_map_violations("launcher/hostlist.cpp", '#include "common/result.h"\n#include "launcher/hostlist.h"\n')
    map_bad = cluster_map_violations("launcher/slurm_env.cpp", '#include "launcher/cmd_run.h"\n')
    assert map_ok == [], map_ok
    assert len(map_bad) == 1 and "cluster map" in map_bad[0], map_bad
    psd_ok = psd_transport_violations(PSD_DAEMON, '#include "psd/zmq_transport.h"\n')
    psd_bad = psd_transport_violations("psd/parameter_server_save.cpp", '#include "common/message_auth.h"\n')
    assert psd_ok == [], psd_ok
    assert len(psd_bad) == 1 and "psd/transport.h" in psd_bad[0], psd_bad


def main():
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    read_common_layers((root / "common" / "meson.build").read_text())
    read_cluster_map((root / "launcher" / "meson.build").read_text())
    self_test()
    found, files = [], 0
    for top in sorted(TOP):
        for p in sorted((root / top).rglob("*")):
            if p.suffix not in (".h", ".cpp") or not p.is_file():
                continue
            files += 1
            rel, text = p.relative_to(root).as_posix(), p.read_text(errors="replace")
            found += (violations(rel, text) + common_violations(rel, text) + cluster_map_violations(rel, text) +
                      psd_transport_violations(rel, text))
    for v in found:
        print(v)
    print(f"{files} files, {len(found)} includes across layers")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
