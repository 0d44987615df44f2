#!/usr/bin/python3
"""Writes an MNIST-format dataset (IDX files, raw or .gz) out in the formats psrun reads, for the
data benchmarks and tests (docs/data.md, docs/benchmarks.md):

  folder-png, folder-jpeg   OUT/<split>/<class>/<index>.png|.jpg (one subfolder per class, named by
                            the label or, with --names, LABEL_NAME)
  tfrecord-png, tfrecord-jpeg, tfrecord-raw
                            OUT/<split>-SSSSS-of-NNNNN.tfrecord[.gz]: tf.train.Example records with
                            image/encoded (PNG or JPEG bytes) or image/raw (float_list of pixels in
                            [0, 1]) and image/class/label (int64), in IDX order
  csv                       OUT/<split>.csv: columns label, p0 ... p783 (integers 0-255)
  npz                       OUT/<split>.npz: x (uint8 N x 28 x 28), y (int64)

Splits: train and test (IDX prefixes train and t10k). The TFRecord framing and the Example
protobuf are written here by hand (no TensorFlow), with a CRC-32C of its own (table-driven), so
that psrun's reader is checked against an independent writer.

Usage: idx_to_formats.py IDX_DIR OUT FORMAT [--quality 95] [--shards 4] [--gzip] [--limit N] [--names A,B,...]
"""
import argparse
import gzip
import os
import struct
import sys

import numpy as np


def read_idx(path):
    opener = gzip.open if os.path.exists(path + ".gz") and not os.path.exists(path) else open
    name = path if os.path.exists(path) else path + ".gz"
    with opener(name, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    rank = magic & 0xFF
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    t = TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(record):
    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", masked_crc(length)) + record + struct.pack("<I", masked_crc(record))


def varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(number, payload):  # a length-delimited field
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def feature_entry(key, list_field, list_payload):
    feature = field(list_field, list_payload)
    return field(1, field(1, key.encode()) + field(2, feature))


def example(features):
    """features: [(key, kind, values)], kind 'bytes' | 'float' | 'int64'."""
    entries = b""
    for key, kind, values in features:
        if kind == "bytes":
            entries += feature_entry(key, 1, b"".join(field(1, v) for v in values))
        elif kind == "float":
            entries += feature_entry(key, 2, field(1, struct.pack("<%df" % len(values), *values)))
        else:
            entries += feature_entry(key, 3, field(1, b"".join(varint(int(v)) for v in values)))
    return field(1, entries)


def encode(image, ext, quality):
    import cv2
    params = [cv2.IMWRITE_JPEG_QUALITY, quality] if ext == ".jpg" else [cv2.IMWRITE_PNG_COMPRESSION, 3]
    ok, buf = cv2.imencode(ext, image, params)
    assert ok
    return buf.tobytes()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("idx_dir")
    ap.add_argument("out")
    ap.add_argument("format", choices=["folder-png", "folder-jpeg", "tfrecord-png", "tfrecord-jpeg", "tfrecord-raw",
                                       "csv", "npz"])
    ap.add_argument("--quality", type=int, default=95)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--limit", type=int, default=0, help="only the first N images of each split")
    ap.add_argument("--names", default="", help="comma list of class names: folders are named I_NAME (sorted as "
                    "the labels), e.g. Fashion-MNIST's")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for split, prefix in (("train", "train"), ("test", "t10k")):
        x = read_idx(os.path.join(a.idx_dir, prefix + "-images-idx3-ubyte"))
        y = read_idx(os.path.join(a.idx_dir, prefix + "-labels-idx1-ubyte"))
        if a.limit:
            x, y = x[:a.limit], y[:a.limit]
        if a.format.startswith("folder-"):
            ext = ".png" if a.format == "folder-png" else ".jpg"
            names = a.names.split(",") if a.names else []
            for i, (img, label) in enumerate(zip(x, y)):
                folder = "%d_%s" % (label, names[label]) if names else str(int(label))
                d = os.path.join(a.out, split, folder)
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, "%05d%s" % (i, ext)), "wb") as f:
                    f.write(encode(img, ext, a.quality))
        elif a.format.startswith("tfrecord-"):
            shards = a.shards if split == "train" else 1
            suffix = ".tfrecord.gz" if a.gzip else ".tfrecord"
            files = [os.path.join(a.out, "%s-%05d-of-%05d%s" % (split, s, shards, suffix)) for s in range(shards)]
            outs = [(gzip.open if a.gzip else open)(f, "wb") for f in files]
            per = (len(x) + shards - 1) // shards
            for i, (img, label) in enumerate(zip(x, y)):
                if a.format == "tfrecord-raw":
                    feats = [("image/raw", "float", (img.astype(np.float32) / 255).ravel().tolist())]
                else:
                    ext = ".png" if a.format == "tfrecord-png" else ".jpg"
                    feats = [("image/encoded", "bytes", [encode(img, ext, a.quality)])]
                feats.append(("image/class/label", "int64", [int(label)]))
                outs[i // per].write(frame(example(feats)))
            for f in outs:
                f.close()
        elif a.format == "csv":
            flat = x.reshape(len(x), -1)
            with open(os.path.join(a.out, split + ".csv"), "w") as f:
                f.write("label," + ",".join("p%d" % k for k in range(flat.shape[1])) + "\n")
                for label, row in zip(y, flat):
                    f.write(str(int(label)) + "," + ",".join(map(str, row.tolist())) + "\n")
        else:
            np.savez(os.path.join(a.out, split + ".npz"), x=x, y=y.astype(np.int64))
        print("%s: %d images of %s written to %s" % (split, len(x), a.format, a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
