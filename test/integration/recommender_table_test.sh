#!/usr/bin/env bash
# Issue 36, the data side: a recommender's table as users keep it, one CSV feeding four model
# inputs by column (docs/data.md "Recommender tables"): 13 dense columns (10% empty), 26
# categorical columns of hex strings (5% empty; C26 integers written with and without leading
# zeros, "7" and "007" one value), and a multi-valued tags column ("tag3|tag17", 0 to 8 values
# into bags of 5: the rest truncated and counted). Labels come from a planted logistic model of
# what the table shows. Written by NumPy; trained through psrun local --ps 1 --workers 1 with
# the categorical values hashed on the worker (XXH3) into two embeddings and the bag summed by
# its weights input (embedding [B,5,4] x weights [B,5,1], reduce_sum over the 5):
#  A. the test AUC is clearly above chance (>= 0.70) and within 0.02 of the planted model's own
#     AUC on the same test rows (the best any model can do), and the log counts the truncated
#     tag values as NumPy counted them;
#  C. the same tables tab-separated without a header line (Criteo's day files), read with
#     --column-names and --delimiter tab, give the same test AUC;
#  D. two workers and two psd shards with emb_cat sparse on psd: the same AUC bound;
#  E. psrun eval on the test table (same options) gives training's own test AUC (summary.json);
#  F. psrun predict on it gives scores whose AUC is eval's, and 5 rows alone score as in the whole;
#  G. bad table options of psrun eval/predict exit 2 naming them;
#  T. the same rows as TFRecord files of tf.train.Example (features by name, the test file
#     gzipped) give the CSV run's test AUC, and psrun eval on them too; two refusals;
#  B. bad specs exit 2 with the message naming the column or input (workerd --standalone).
# Usage: recommender_table_test.sh <psrun> (from the source root)
set -u
psrun=$1
workerd=$(dirname "$psrun")/../workerd/workerd
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/psrun-rec-table-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check()
"$py" -c 'import numpy' 2>/dev/null || { echo "no numpy for $py: skipping"; exit 77; }

"$py" - "$tmp" <<'PY' >"$tmp/planted.txt" || { echo "FAILED: could not write the tables"; exit 1; }
import csv, sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(36)
F, L, TAGS = 26, 5, 30
vocab = [[f"{v:08x}" for v in rng.integers(0, 2**32, 40)] for _ in range(F - 1)] + [[str(v) for v in range(40)]]
zipf = 1.0 / np.arange(1, 41) ** 1.1
zipf /= zipf.sum()
w_dense = rng.normal(0, 0.35, 13)
w_cat = rng.normal(0, 0.5, (F, 41))  # index 40: the empty cell, a value of its own
w_tag = rng.normal(0, 0.5, TAGS)

def split(name, n):
    dense = rng.normal(0, 1, (n, 13))
    dense_missing = rng.random((n, 13)) < 0.10
    cats = np.array([rng.choice(40, n, p=zipf) for _ in range(F)]).T
    cats[rng.random((n, F)) < 0.05] = 40
    ntags = rng.integers(0, 9, n)
    logit = np.where(dense_missing, 0.0, dense) @ w_dense + w_cat[np.arange(F), cats].sum(axis=1) - 0.3
    truncated = 0
    rows = []
    for i in range(n):
        tags = list(rng.choice(TAGS, ntags[i], replace=False))
        logit[i] += w_tag[tags[:L]].sum()  # what a bag of L keeps: the first L values
        truncated += max(0, len(tags) - L)
        cells = [""] * 13
        for j in range(13):
            if not dense_missing[i, j]:
                cells[j] = f"{dense[i, j]:.4f}"
        for c in range(F):
            v = "" if cats[i, c] == 40 else vocab[c][cats[i, c]]
            if c == F - 1 and v and rng.random() < 0.5:
                v = v.zfill(3)  # "007": the same value as "7"
            cells.append(v)
        cells.append("|".join(f"tag{t}" for t in tags))
        rows.append(cells)
    labels = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    with open(f"{out}/{name}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label"] + [f"I{j}" for j in range(1, 14)] + [f"C{c}" for c in range(1, F + 1)] + ["tags"])
        for y, cells in zip(labels, rows):
            w.writerow([y] + cells)
    return logit, labels, truncated

def auc(score, y):
    order = np.argsort(score, kind="stable")
    ranks = np.empty(len(score))
    ranks[order] = np.arange(1, len(score) + 1)
    pos = y == 1
    return (ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum())

_, _, train_truncated = split("train", 40000)
logit, labels, test_truncated = split("test", 10000)
print(f"{auc(logit, labels):.4f} {train_truncated} {test_truncated} {labels.mean():.3f}")
PY
read -r planted train_truncated test_truncated positives <"$tmp/planted.txt"
echo "planted model's test AUC $planted; tag values beyond 5: train $train_truncated, test $test_truncated; positives $positives"

cat >"$tmp/rec.json" <<'JSON'
{"name": "rec_table",
 "inputs": [{"name": "num", "dims": [13], "type": "float"},
            {"name": "cat", "dims": [26], "type": "int"},
            {"name": "tags", "dims": [5], "type": "int"},
            {"name": "tags_w", "dims": [5, 1], "type": "float"}],
 "targets": 1,
 "layers": [
  {"kind": "embedding", "name": "emb_cat", "inputs": ["cat"], "vocabulary": 4096, "dim": 4,
   "init": {"kind": "normal", "stddev": 0.05}},
  {"kind": "flatten", "name": "cat_flat"},
  {"kind": "embedding", "name": "emb_tags", "inputs": ["tags"], "vocabulary": 256, "dim": 4,
   "init": {"kind": "normal", "stddev": 0.05}},
  {"kind": "mul", "name": "tags_weighted", "inputs": ["emb_tags", "tags_w"]},
  {"kind": "reduce_sum", "name": "tags_bag", "axes": [1], "keepdims": false},
  {"kind": "concat", "name": "joined", "inputs": ["num", "cat_flat", "tags_bag"], "axis": 1},
  {"kind": "dense", "name": "out", "units": 1}
 ],
 "loss": {"kind": "sigmoid_cross_entropy", "reduction": "mean"}}
JSON
dense_cols=$(printf 'I%d,' $(seq 1 13)); dense_cols=${dense_cols%,}
cat_cols=$(printf 'C%d,' $(seq 1 26)); cat_cols=${cat_cols%,}
columns=(--input-columns "num=$dense_cols" --input-columns "cat=$cat_cols" --input-columns tags=tags
         --bag-weights tags_w=tags --value-separator '|')

start=$(date +%s)
timeout 600 "$psrun" local --ps 1 --workers 1 -- --model "$tmp/rec.json" --train-data "$tmp/train.csv" \
    --test-data "$tmp/test.csv" "${columns[@]}" --optimizer adam --learning-rate 0.01 --batch-size 128 \
    --steps 1500 --eval-every 0 --model-dir "$tmp/a" >"$tmp/a.log" 2>&1
code=$?
echo "A: trained in $(( $(date +%s) - start )) s"
check "A: the recommender table trains through psd (rc=$code)" test "$code" -eq 0
[ "$code" -eq 0 ] || tail -20 "$tmp/a.log"
grep -m2 "data: CSV table" "$tmp/a.log"
auc=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1] + "/summary.json"))["test_auc"])' "$tmp/a" 2>/dev/null || echo 0)
echo "A: test AUC $auc against the planted model's $planted"
check "A: test AUC $auc >= 0.70 and within 0.02 of the planted model's $planted" \
    "$py" -c "import sys; sys.exit(0 if float('$auc') >= 0.70 and float('$auc') >= float('$planted') - 0.02 else 1)"
check "A: the log counts the $train_truncated train tag values beyond the bag's 5 slots" \
    grep -q "train data: CSV table $tmp/train.csv: 40000 rows;.* $train_truncated values beyond a bag's slots dropped" "$tmp/a.log"
check "A: ... and the $test_truncated test values" \
    grep -q "test data: CSV table $tmp/test.csv: 10000 rows;.* $test_truncated values beyond a bag's slots dropped" "$tmp/a.log"

# E. psrun eval on the same test table with the same options: the checkpoint's test AUC equals
# the training run's own evaluation (summary.json) of the same parameters on the same rows.
timeout 300 "$psrun" eval --model-dir "$tmp/a" --test-data "$tmp/test.csv" "${columns[@]}" -o "$tmp/e" >"$tmp/e.log" 2>&1
code=$?
check "E: psrun eval reads the table by --input-columns (rc=$code)" test "$code" -eq 0
[ "$code" -eq 0 ] || tail -5 "$tmp/e.log"
auc_e=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1] + "/eval.json"))["test_auc"])' "$tmp/e" 2>/dev/null || echo -1)
echo "E: psrun eval's test AUC $auc_e, training's $auc"
check "E: psrun eval's test AUC $auc_e equals training's $auc (within 1e-6)" \
    "$py" -c "import sys; sys.exit(0 if abs(float('$auc_e') - float('$auc')) <= 1e-6 else 1)"
check "E: eval.json counts the 10000 test rows" \
    "$py" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1] + "/eval.json"))["examples"] == 10000 else 1)' "$tmp/e"

# F. psrun predict on the same table: the AUC of its scores against the table's labels equals
# eval's; the same rows predicted from a 5-row table score as within the whole table.
timeout 300 "$psrun" predict --model-dir "$tmp/a" --data "$tmp/test.csv" "${columns[@]}" --output "$tmp/p.npy" \
    >"$tmp/p.log" 2>&1
code=$?
check "F: psrun predict reads the table by --input-columns (rc=$code)" test "$code" -eq 0
[ "$code" -eq 0 ] || tail -5 "$tmp/p.log"
head -6 "$tmp/test.csv" >"$tmp/few.csv"
timeout 300 "$psrun" predict --model-dir "$tmp/a" --data "$tmp/few.csv" "${columns[@]}" --output "$tmp/few.npy" \
    >"$tmp/few.log" 2>&1
check "F: psrun predict on 5 rows (rc=$?)" test -s "$tmp/few.npy"
cut -d, -f2- "$tmp/few.csv" >"$tmp/nolabel.csv"  # new rows: no label column
timeout 300 "$psrun" predict --model-dir "$tmp/a" --data "$tmp/nolabel.csv" "${columns[@]}" --output "$tmp/nolabel.npy" \
    >"$tmp/nolabel.log" 2>&1
check "F: psrun predict on rows without a label column (rc=$?) scores them as with one" \
    "$py" -c 'import numpy as np, sys; a, b = (np.load(f"{sys.argv[1]}/{n}.npy") for n in ("few", "nolabel")); sys.exit(0 if a.shape == b.shape and np.abs(a - b).max() <= 1e-6 else 1)' "$tmp"
auc_p=$("$py" - "$tmp" <<'PY3' 2>"$tmp/p.err" || echo -1
import csv, sys
import numpy as np
t = sys.argv[1]
p = np.load(f"{t}/p.npy").reshape(-1)
y = np.array([int(r["label"]) for r in csv.DictReader(open(f"{t}/test.csv", newline=""))])
assert len(p) == len(y), (len(p), len(y))
order = np.argsort(p, kind="stable")
ranks = np.empty(len(p))
ranks[order] = np.arange(1, len(p) + 1)
for v in np.unique(p):  # ties share their mean rank, as roc_auc counts them
    tie = p == v
    ranks[tie] = ranks[tie].mean()
pos = y == 1
few = np.load(f"{t}/few.npy").reshape(-1)
assert np.abs(few - p[:5]).max() <= 1e-6, (few, p[:5])
print(f"{(ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum()):.6f}")
PY3
)
[ "$auc_p" = -1 ] && cat "$tmp/p.err"
echo "F: AUC of psrun predict's scores $auc_p, psrun eval's $auc_e"
check "F: predict's scores give eval's AUC (within 1e-5) and 5 rows alone score as in the whole table" \
    "$py" -c "import sys; sys.exit(0 if float('$auc_p') >= 0 and abs(float('$auc_p') - float('$auc_e')) <= 1e-5 else 1)"

# G. Bad table options of psrun eval/predict exit 2 naming them.
bad_cmd() {  # bad_cmd <what> <message grep> <psrun args...>
    local what=$1 want=$2; shift 2
    timeout 60 "$psrun" "$@" >"$tmp/badc.log" 2>&1
    local rc=$?
    check "G: $what exits 2 (rc=$rc) saying '$want'" bash -c "test $rc -eq 2 && grep -qF -- \"\$1\" '$tmp/badc.log'" _ "$want"
    [ "$rc" -eq 2 ] && grep -qF -- "$want" "$tmp/badc.log" || tail -3 "$tmp/badc.log"
}
bad_cmd "eval --input-columns without --test-data" "give --test-data F.csv" eval --model-dir "$tmp/a" "${columns[@]}" -o "$tmp/g"
bad_cmd "eval --bag-weights alone" "--bag-weights reads a table fed by --input-columns" eval --model-dir "$tmp/a" \
    --test-data "$tmp/test.csv" --bag-weights tags_w=tags -o "$tmp/g"
bad_cmd "eval with a column the table lacks" "no column 'C99'" eval --model-dir "$tmp/a" --test-data "$tmp/test.csv" \
    --input-columns "num=$dense_cols" --input-columns "cat=${cat_cols%,C26},C99" --input-columns tags=tags \
    --bag-weights tags_w=tags --value-separator '|' -o "$tmp/g"
bad_cmd "eval with an input left unfed" "give --input-columns tags_w=" eval --model-dir "$tmp/a" \
    --test-data "$tmp/test.csv" --input-columns "num=$dense_cols" --input-columns "cat=$cat_cols" \
    --input-columns tags=tags --value-separator '|' -o "$tmp/g"
bad_cmd "predict --data without --input-columns" "give --input-columns NAME=COL" predict --model-dir "$tmp/a" \
    --data "$tmp/test.csv"
bad_cmd "predict --input-columns with --images" "drop --images and --input" predict --model-dir "$tmp/a" \
    --data "$tmp/test.csv" --images "$tmp/p.npy" "${columns[@]}"
bad_cmd "predict --input-columns without --data" "give --data F.csv" predict --model-dir "$tmp/a" "${columns[@]}"

# The same tables as Criteo keeps its day files: tab-separated, no header line (--column-names,
# --delimiter tab): the same ids, so the same run.
"$py" - "$tmp" <<'PY2' || echo "FAILED: could not write the headerless tables"
import csv, sys
for split in ("train", "test"):
    rows = list(csv.reader(open(f"{sys.argv[1]}/{split}.csv", newline="")))
    open(f"{sys.argv[1]}/names.txt", "w").write(",".join(rows[0]))
    with open(f"{sys.argv[1]}/{split}_day.txt", "w") as f:
        f.writelines("\t".join(r) + "\n" for r in rows[1:])
PY2
timeout 600 "$psrun" local --ps 1 --workers 1 -- --model "$tmp/rec.json" --train-data "$tmp/train_day.txt" \
    --test-data "$tmp/test_day.txt" --column-names "$(cat "$tmp/names.txt")" --delimiter tab "${columns[@]}" \
    --optimizer adam --learning-rate 0.01 --batch-size 128 --steps 1500 --eval-every 0 --model-dir "$tmp/c" >"$tmp/c.log" 2>&1
code=$?
check "C: the headerless tab-separated tables train (rc=$code)" test "$code" -eq 0
[ "$code" -eq 0 ] || tail -5 "$tmp/c.log"
auc_c=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1] + "/summary.json"))["test_auc"])' "$tmp/c" 2>/dev/null || echo 0)
check "C: their test AUC $auc_c equals the CSV run's $auc (within 0.002)" \
    "$py" -c "import sys; sys.exit(0 if abs(float('$auc_c') - float('$auc')) <= 0.002 else 1)"

timeout 300 "$psrun" eval --model-dir "$tmp/c" --test-data "$tmp/test_day.txt" --column-names "$(cat "$tmp/names.txt")" \
    --delimiter tab "${columns[@]}" -o "$tmp/ce" >"$tmp/ce.log" 2>&1
code=$?
auc_ce=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1] + "/eval.json"))["test_auc"])' "$tmp/ce" 2>/dev/null || echo -1)
check "C: psrun eval of the headerless tables (rc=$code, --column-names, --delimiter tab): AUC $auc_ce equals training's $auc_c" \
    "$py" -c "import sys; sys.exit(0 if abs(float('$auc_ce') - float('$auc_c')) <= 1e-6 else 1)"

bad_data=(--train-data "$tmp/test.csv" --test-data "$tmp/test.csv")
bad() {  # bad <what> <message grep> <options...>: workerd --standalone exits 2 with the message
    local what=$1 want=$2; shift 2
    timeout 60 "$workerd" --standalone --model "$tmp/rec.json" "${bad_data[@]}" --steps 1 "$@" >"$tmp/bad.log" 2>&1
    local rc=$?
    check "B: $what exits 2 (rc=$rc) saying '$want'" bash -c "test $rc -eq 2 && grep -qF -- \"\$1\" '$tmp/bad.log'" _ "$want"
    [ "$rc" -eq 2 ] && grep -qF -- "$want" "$tmp/bad.log" || tail -3 "$tmp/bad.log"
}

# T. The same rows as TFRecord files of tf.train.Example (written by hand, bench/idx_to_formats.py's
# framing and protobuf): num one float_list of 13 (an empty cell 0.0), C1..C25 bytes_list, C26
# int64_list (so "007" is 7), an empty categorical cell an absent feature, tags one bytes_list of
# every tag, label int64; the test file gzipped. The same --input-columns naming features gives
# the same ids, so the same run: the test AUC equals the CSV run's, eval's too, and the truncated
# tag values are counted as in the CSV.
"$py" - "$tmp" <<'PY4' || echo "FAILED: could not write the TFRecord files"
import csv, gzip, struct, sys
sys.path.insert(0, "bench")
from idx_to_formats import example, frame
t = sys.argv[1]
for split, opener, name in (("train", open, "train.tfrecord"), ("test", gzip.open, "test.tfrecord.gz")):
    with opener(f"{t}/{name}", "wb") as out:
        for r in csv.DictReader(open(f"{t}/{split}.csv", newline="")):
            feats = [("label", "int64", [int(r["label"])]),
                     ("num", "float", [float(r[f"I{j}"]) if r[f"I{j}"] else 0.0 for j in range(1, 14)])]
            for c in range(1, 27):
                v = r[f"C{c}"]
                if v:
                    feats.append((f"C{c}", "int64", [int(v)]) if c == 26 else (f"C{c}", "bytes", [v.encode()]))
            feats.append(("tags", "bytes", [x.encode() for x in r["tags"].split("|") if x]))
            out.write(frame(example(feats)))
    bad = [("label", "int64", [1]), ("num", "float", [0.0] * 13), ("tags", "bytes", [b"tag1"])]
    bad += [(f"C{c}", "float" if c == 3 else "bytes", [1.5] if c == 3 else [b"x"]) for c in range(1, 27)]
    open(f"{t}/bad.tfrecord", "wb").write(frame(example(bad)))
    if split == "test":  # the first 5 test rows as new rows: no label feature
        rows = list(csv.DictReader(open(f"{t}/test.csv", newline="")))[:5]
        with open(f"{t}/nolabel.tfrecord", "wb") as out:
            for r in rows:
                feats = [("num", "float", [float(r[f"I{j}"]) if r[f"I{j}"] else 0.0 for j in range(1, 14)])]
                for c in range(1, 27):
                    v = r[f"C{c}"]
                    if v:
                        feats.append((f"C{c}", "int64", [int(v)]) if c == 26 else (f"C{c}", "bytes", [v.encode()]))
                feats.append(("tags", "bytes", [x.encode() for x in r["tags"].split("|") if x]))
                out.write(frame(example(feats)))
PY4
tf_columns=(--input-columns num=num --input-columns "cat=$cat_cols" --input-columns tags=tags --bag-weights tags_w=tags)
timeout 600 "$psrun" local --ps 1 --workers 1 -- --model "$tmp/rec.json" --train-data "$tmp/train.tfrecord" \
    --test-data "$tmp/test.tfrecord.gz" "${tf_columns[@]}" --optimizer adam --learning-rate 0.01 --batch-size 128 \
    --steps 1500 --eval-every 0 --model-dir "$tmp/t" >"$tmp/t.log" 2>&1
code=$?
check "T: the TFRecord Examples train by feature name (rc=$code)" test "$code" -eq 0
[ "$code" -eq 0 ] || tail -5 "$tmp/t.log"
grep -m1 "train data: TFRecord Examples" "$tmp/t.log"
auc_t=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1] + "/summary.json"))["test_auc"])' "$tmp/t" 2>/dev/null || echo 0)
check "T: their test AUC $auc_t equals the CSV run's $auc (within 1e-6: the same ids)" \
    "$py" -c "import sys; sys.exit(0 if abs(float('$auc_t') - float('$auc')) <= 1e-6 else 1)"
check "T: the log counts the $train_truncated train tag values beyond the bag's 5 slots" \
    grep -q "train data: TFRecord Examples $tmp/train.tfrecord: 40000 rows;.* $train_truncated values beyond a bag's slots dropped" "$tmp/t.log"
timeout 300 "$psrun" eval --model-dir "$tmp/t" --test-data "$tmp/test.tfrecord.gz" "${tf_columns[@]}" -o "$tmp/te" \
    >"$tmp/te.log" 2>&1
code=$?
auc_te=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1] + "/eval.json"))["test_auc"])' "$tmp/te" 2>/dev/null || echo -1)
check "T: psrun eval of the gzipped TFRecord test file (rc=$code): AUC $auc_te equals training's $auc_t" \
    "$py" -c "import sys; sys.exit(0 if abs(float('$auc_te') - float('$auc_t')) <= 1e-6 else 1)"
timeout 300 "$psrun" predict --model-dir "$tmp/a" --data "$tmp/nolabel.tfrecord" "${tf_columns[@]}" \
    --output "$tmp/nolabel_tf.npy" >"$tmp/nolabel_tf.log" 2>&1
check "T: psrun predict on 5 Examples without a label (rc=$?) scores them as the CSV rows" \
    "$py" -c 'import numpy as np, sys; a, b = (np.load(f"{sys.argv[1]}/{n}.npy") for n in ("few", "nolabel_tf")); sys.exit(0 if a.shape == b.shape and np.abs(a - b).max() <= 1e-6 else 1)' "$tmp"
bad_data=(--train-data "$tmp/train.tfrecord" --test-data "$tmp/test.tfrecord.gz")
bad "T: --value-separator with TFRecord Examples" "drop --value-separator, --column-names and --delimiter" \
    "${tf_columns[@]}" --value-separator '|'
bad_data=(--train-data "$tmp/bad.tfrecord" --test-data "$tmp/bad.tfrecord")
bad "T: a float_list feature for an id input" "feature 'C3' (float_list): the id input cat takes bytes_list or int64_list" \
    "${tf_columns[@]}"
bad_data=(--train-data "$tmp/test.csv" --test-data "$tmp/test.csv")

# D. Two workers and two psd shards, the categorical table sparse on psd (rows pulled per batch):
# the hashed ids are rows like any other, the AUC as close to the planted model's.
timeout 600 "$psrun" local --ps 2 --workers 2 -- --model "$tmp/rec.json" --train-data "$tmp/train.csv" \
    --test-data "$tmp/test.csv" "${columns[@]}" --sparse-embedding emb_cat --optimizer adam --learning-rate 0.01 \
    --batch-size 128 --steps 1500 --eval-every 0 --model-dir "$tmp/d" >"$tmp/d.log" 2>&1
code=$?
check "D: 2 workers, 2 psd shards, emb_cat sparse (rc=$code)" test "$code" -eq 0
[ "$code" -eq 0 ] || tail -5 "$tmp/d.log"
auc_d=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1] + "/summary.json"))["test_auc"])' "$tmp/d" 2>/dev/null || echo 0)
echo "D: test AUC $auc_d"
check "D: test AUC $auc_d within 0.02 of the planted model's $planted" \
    "$py" -c "import sys; sys.exit(0 if float('$auc_d') >= float('$planted') - 0.02 else 1)"
check "D: the workers pull emb_cat's rows from psd" grep -q "sparse table emb_cat/table \[4096 x 4\]" "$tmp/d.log"

bad "a column the table lacks" "no column 'C99'" --input-columns "num=$dense_cols" --input-columns "cat=${cat_cols%,C26},C99" \
    --input-columns tags=tags --bag-weights tags_w=tags --value-separator '|'
bad "12 columns for 13 floats" "the float input num [13] float takes 13 values per example: name 13 columns (given 12)" \
    --input-columns "num=${dense_cols%,I13}" --input-columns "cat=$cat_cols" --input-columns tags=tags --bag-weights tags_w=tags \
    --value-separator '|'
bad "a bag without --value-separator" "give --value-separator C for multi-valued cells" \
    --input-columns "num=$dense_cols" --input-columns "cat=$cat_cols" --input-columns tags=tags --bag-weights tags_w=tags
bad "an input left unfed" "model rec_table takes the input tags_w [5x1] float: give --input-columns tags_w=" \
    --input-columns "num=$dense_cols" --input-columns "cat=$cat_cols" --input-columns tags=tags --value-separator '|'
bad "a combiner psrun lacks" "combiner 'max' (give sum" "${columns[@]:0:6}" --bag-weights tags_w=tags:max --value-separator '|'
bad "an input the model lacks" "model rec_table has no input 'item'" "${columns[@]}" --input-columns item=C1
bad "--bag-weights alone" "--bag-weights reads a table fed by --input-columns" --bag-weights tags_w=tags
bad "a separator equal to the delimiter" "--delimiter and --value-separator are both '|'" "${columns[@]}" --delimiter '|'
exit $fail
