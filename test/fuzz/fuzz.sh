#!/usr/bin/env bash
# Builds one libFuzzer target with clang (-fsanitize=fuzzer,address,undefined) and runs it on
# its seed corpus (test/fuzz/corpus/TARGET, dictionary test/fuzz/TARGET.dict when present).
# Usage: test/fuzz/fuzz.sh TARGET [RUNS [libFuzzer options...]]
#        test/fuzz/fuzz.sh list
#   RUNS  inputs to execute (default 50000); e.g. `fuzz.sh hostlist 1000000 -max_total_time=900`
# Environment:
#   PSRUN_FUZZ_DIR   binaries, grown corpora and crash inputs (default <repo>/build/fuzz)
#   PSRUN_FUZZ_KEEP  1: grow the corpus in $PSRUN_FUZZ_DIR/corpus/TARGET across runs
#                    (default: a throw-away copy of the seeds, so CI runs are reproducible)
# Exit: 0 no crash; 1 crash/leak/timeout (the input is saved as $PSRUN_FUZZ_DIR/crash-TARGET-*;
# replay it with `$PSRUN_FUZZ_DIR/TARGET_fuzz FILE`); 2 usage; 77 (meson: skipped) when clang
# or libFuzzer is unusable here.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)

# target -> "sources|libraries|max input length"
# The description library: the graph, its parser and every operator kind's schema (ops/*.cpp
# without the kernels and their oneDNN helpers, kernel_views.cpp, which need oneDNN).
nn_sources=$(echo "workerd/nn/field_reader.cpp workerd/nn/graph_builder.cpp workerd/nn/graph_loss.cpp workerd/nn/initializer.cpp
  workerd/nn/model_description.cpp workerd/nn/model_summary.cpp workerd/nn/op_registry.cpp workerd/nn/op_schema.cpp
  workerd/nn/recipe.cpp workerd/nn/shape.cpp workerd/nn/tensor_shape.cpp
  $(cd "$src" && ls workerd/nn/ops/*.cpp | grep -v -e _kernel.cpp -e kernel_views.cpp | tr '\n' ' ')
  common/optimizer.cpp common/lamb.cpp common/lr_schedule.cpp common/lr_schedule_text.cpp common/param_groups.cpp" | tr -s '\n ' '  ')

declare -A targets=(
  [wire]="common/wire.cpp common/finite.cpp common/wire_bodies.cpp common/wire_chunks.cpp common/wire_join.cpp common/shm_segment.cpp common/lr_schedule.cpp common/lr_schedule_text.cpp common/optimizer.cpp common/lamb.cpp common/param_groups.cpp|-lz -lfmt|4096"
  [hostlist]="launcher/hostlist.cpp|-lslurm -lfmt|256"
  [slurm_lists]="launcher/slurm_lists.cpp|-lfmt|256"
  [slurm_env]="launcher/slurm_env.cpp launcher/het_job.cpp launcher/hostlist.cpp launcher/slurm_lists.cpp launcher/env_map.cpp|-lslurm -lfmt|1024"
  [tf_config]="launcher/tf_cluster.cpp common/cluster_map.cpp|-lfmt|2048"
  [task_list]="launcher/role_assignment.cpp|-lfmt|256"
  [idx]="workerd/data/idx_reader.cpp workerd/data/cifar_reader.cpp workerd/data/reader_common.cpp workerd/data/labeled_images.cpp|-lz|8192"
  [npy]="workerd/data/npy_reader.cpp workerd/data/reader_common.cpp workerd/data/labeled_images.cpp|-lz|4096"
  [pgm]="workerd/data/pgm_reader.cpp workerd/data/reader_common.cpp workerd/data/labeled_images.cpp|-lz|2048"
  [tfrecord]="workerd/data/tfrecord_reader.cpp workerd/data/tfrecord_writer.cpp workerd/data/example_proto.cpp common/crc32c.cpp|-lz|8192"
  [example]="workerd/data/example_decoder.cpp workerd/data/example_proto.cpp workerd/data/image_decoder.cpp workerd/data/image_resize.cpp workerd/data/jpeg_reader.cpp workerd/data/png_reader.cpp workerd/data/pgm_reader.cpp workerd/data/reader_common.cpp workerd/data/labeled_images.cpp|-lturbojpeg -lpng -lz|4096"
  [csv]="common/utf8.cpp workerd/data/table_reader.cpp workerd/data/table_cells.cpp workerd/data/table_targets.cpp workerd/data/csv_reader.cpp workerd/data/npz_reader.cpp workerd/data/npy_reader.cpp workerd/data/npy_values.cpp workerd/data/reader_common.cpp workerd/data/labeled_images.cpp|-lz|4096"
  [columns]="common/utf8.cpp workerd/data/column_table.cpp workerd/data/column_spec.cpp workerd/data/categorical_hash.cpp workerd/data/table_cells.cpp workerd/data/table_targets.cpp workerd/data/csv_reader.cpp workerd/data/reader_common.cpp workerd/data/labeled_images.cpp|-lxxhash -lz|4096"
  [example_table]="common/utf8.cpp common/crc32c.cpp workerd/data/example_table.cpp workerd/data/example_proto.cpp workerd/data/tfrecord_reader.cpp workerd/data/column_table.cpp workerd/data/column_spec.cpp workerd/data/categorical_hash.cpp workerd/data/table_cells.cpp workerd/data/table_targets.cpp workerd/data/csv_reader.cpp workerd/data/reader_common.cpp workerd/data/labeled_images.cpp|-lxxhash -lz|4096"
  [npz]="common/utf8.cpp workerd/data/table_reader.cpp workerd/data/table_cells.cpp workerd/data/table_targets.cpp workerd/data/csv_reader.cpp workerd/data/npz_reader.cpp workerd/data/npy_reader.cpp workerd/data/npy_values.cpp workerd/data/reader_common.cpp workerd/data/labeled_images.cpp|-lz|8192"
  [image]="workerd/data/image_decoder.cpp workerd/data/image_resize.cpp workerd/data/jpeg_reader.cpp workerd/data/png_reader.cpp workerd/data/pgm_reader.cpp workerd/data/reader_common.cpp workerd/data/labeled_images.cpp|-lturbojpeg -lpng -lz|16384"
    [checkpoint]="common/utf8.cpp common/tensor_file.cpp common/tensor_file_stream.cpp common/crc32c.cpp common/checkpoint_store.cpp common/wire.cpp common/finite.cpp common/wire_bodies.cpp common/shm_segment.cpp common/lr_schedule.cpp common/lr_schedule_text.cpp|-lz|4096"
  [data_chunks]="psd/data_chunks.cpp psd/data_chunks_file.cpp common/utf8.cpp common/tensor_file.cpp common/tensor_file_stream.cpp common/crc32c.cpp common/checkpoint_store.cpp common/wire.cpp common/finite.cpp common/wire_bodies.cpp common/shm_segment.cpp common/lr_schedule.cpp common/lr_schedule_text.cpp|-lz -lfmt|8192"
  [row_frames]="psd/row_frames.cpp common/payload_codec.cpp common/wire.cpp common/finite.cpp common/wire_bodies.cpp common/wire_precision.cpp common/zmq_util.cpp common/tensor_layout.cpp common/shm_segment.cpp common/lr_schedule.cpp common/lr_schedule_text.cpp|-lz -lzmq|4096"
  [job_keys]="common/job_keys.cpp|-lzmq|1024"
  [mac_trailer]="common/message_auth.cpp common/gmac.cpp common/thread_team.cpp common/wire.cpp common/finite.cpp common/wire_bodies.cpp common/shm_segment.cpp common/lr_schedule.cpp common/lr_schedule_text.cpp|-lcrypto -lz -lpthread|4096"
  [model]="$nn_sources|-lcrypto -lfmt|4096"
  [einsum]="workerd/nn/ops/einsum_equation.cpp workerd/nn/ops/einsum_plan.cpp workerd/nn/tensor_shape.cpp workerd/nn/shape.cpp||1024"
  [recipe]="workerd/nn/recipe.cpp workerd/nn/field_reader.cpp workerd/nn/shape.cpp common/optimizer.cpp common/lamb.cpp common/lr_schedule.cpp common/lr_schedule_text.cpp common/param_groups.cpp|-lfmt|4096"
  [onnx]="common/utf8.cpp workerd/onnx/onnx_consts.cpp workerd/onnx/onnx_consts_layout.cpp workerd/onnx/onnx_consts_reduce.cpp workerd/onnx/onnx_export.cpp workerd/onnx/onnx_graph.cpp workerd/onnx/onnx_graph_digest.cpp workerd/onnx/onnx_import.cpp workerd/onnx/onnx_importer.cpp workerd/onnx/onnx_lowerings.cpp workerd/onnx/onnx_lowerings_reduce.cpp workerd/onnx/onnx_node_view.cpp workerd/onnx/onnx_patterns.cpp workerd/onnx/onnx_patterns_norm.cpp workerd/onnx/onnx_proto.cpp workerd/onnx/onnx_rnn_weights.cpp $nn_sources|-lonnx -lonnx_proto -lprotobuf -lcrypto -lfmt|65536"
)

target=${1:-}
if [ "$target" = list ]; then printf '%s\n' "${!targets[@]}" | sort; exit 0; fi
if [ -z "$target" ] || [ -z "${targets[$target]:-}" ]; then
  echo "usage: $0 TARGET [RUNS [libFuzzer options...]]; TARGET is one of: $(printf '%s ' "${!targets[@]}")" >&2
  exit 2
fi
runs=${2:-50000}
shift $(( $# >= 2 ? 2 : 1 ))
IFS='|' read -r sources libs max_len <<<"${targets[$target]}"

out_dir=${PSRUN_FUZZ_DIR:-$src/build/fuzz}
mkdir -p "$out_dir"
exe=$out_dir/${target}_fuzz

cxx=$(command -v clang++ || command -v clang++-14 || true)
[ -n "$cxx" ] || { echo "clang++ not found: skipping (apt-get install clang libclang-rt-dev)"; exit 77; }

# fresh OUTPUT: OUTPUT and its depfile OUTPUT.d exist, and OUTPUT is newer than this script and
# than every file the depfile lists.
fresh() {
  [ -f "$1" ] && [ -f "$1.d" ] && [ "$1" -nt "$0" ] || return 1
  for f in $(sed -e 's/\\$//' -e 's/^[^:]*://' "$1.d"); do
    [ "$f" -nt "$1" ] && return 1
  done
  return 0
}

# Rebuild when the binary is missing or older than this script or any file its depfile lists.
if ! fresh "$exe"; then
  probe=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' > "$probe/p.cpp"
  if ! "$cxx" -fsanitize=fuzzer,address "$probe/p.cpp" -o "$probe/p" 2>/dev/null; then
    rm -rf "$probe"
    echo "clang++ cannot link libFuzzer targets here (libclang-rt-dev missing?): skipping"
    exit 77
  fi
  rm -rf "$probe"
  echo "building $exe"
  # Objects are shared between targets (model and onnx both compile the whole description
  # library): one per source in $out_dir/obj, rebuilt when its depfile names a newer file, and
  # locked while compiled so that two targets built at once compile each source once. A first
  # pass skips the objects another build is compiling (so two builds split the shared sources
  # between them instead of waiting for each other), a second waits for those.
  mkdir -p "$out_dir/obj"
  object_of() { echo "$out_dir/obj/$(echo "$1" | tr / _ | sed 's/\.cpp$//').o"; }
  compile() {  # compile SOURCE [-n]: -n gives up (status 1) when another build holds the lock
    local obj
    obj=$(object_of "$1")
    (
      flock ${2:-} 9 || exit 1
      if ! fresh "$obj"; then
        "$cxx" -std=c++20 -O1 -gline-tables-only -march=x86-64-v3 -fsanitize=fuzzer,address,undefined \
            -fno-sanitize-recover=undefined -I"$src" -MMD -MF "$obj.d.tmp" -c "$src/$1" -o "$obj.tmp"
        mv "$obj.d.tmp" "$obj.d"
        mv "$obj.tmp" "$obj"
      fi
    ) 9>"$obj.lock"
  }
  objs=()
  busy=()
  for s in test/fuzz/${target}_fuzz.cpp $sources; do
    objs+=("$(object_of "$s")")
    compile "$s" -n || busy+=("$s")
  done
  for s in "${busy[@]}"; do compile "$s"; done
  "$cxx" -fsanitize=fuzzer,address,undefined "${objs[@]}" $libs -o "$exe.tmp"
  cat "${objs[@]/%/.d}" > "$exe.d"
  mv "$exe.tmp" "$exe"
fi

if [ "${PSRUN_FUZZ_KEEP:-0}" = 1 ]; then
  corpus=$out_dir/corpus/$target
  mkdir -p "$corpus"
else
  corpus=$(mktemp -d)
  trap 'rm -rf "$corpus"' EXIT
fi
cp "$src/test/fuzz/corpus/$target"/* "$corpus"/
dict=()
[ -f "$src/test/fuzz/$target.dict" ] && dict=(-dict="$src/test/fuzz/$target.dict")
echo "fuzzing $target for $runs runs"
timeout "${PSRUN_FUZZ_TIMEOUT:-3600}" "$exe" -runs="$runs" -max_len="$max_len" -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out_dir/crash-$target-" \
  "${dict[@]}" "$@" "$corpus" && exit 0
# libFuzzer's own exit code for a crash is 77, which meson reads as "skipped": say 1.
rc=$?
echo "fuzz target $target failed (exit $rc): crash, leak, timeout or out-of-memory; the input is in $out_dir/crash-$target-*" >&2
exit 1
