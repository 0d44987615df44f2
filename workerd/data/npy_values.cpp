#include "workerd/data/npy_values.h"

#include <bit>
#include <cmath>

#include "workerd/data/reader_common.h"

namespace psrun::worker {
namespace {

std::uint64_t load(const std::uint8_t* p, std::size_t n, bool big_endian) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t{p[big_endian ? n - 1 - i : i]} << (8 * i);
    return v;
}

bool supported(const NpyHeader& h) {
    const std::size_t n = h.item_bytes;
    if (h.kind == 'b') return n == 1;
    if (h.kind == 'u' || h.kind == 'i') return n == 1 || n == 2 || n == 4 || n == 8;
    if (h.kind == 'f') return n == 4 || n == 8;
    return false;
}

std::int64_t as_int(const std::uint8_t* p, const NpyHeader& h) {
    const std::uint64_t raw = load(p, h.item_bytes, h.big_endian);
    if (h.kind != 'i' || h.item_bytes == 8) return static_cast<std::int64_t>(raw);
    const unsigned shift = static_cast<unsigned>(64 - 8 * h.item_bytes);  // sign-extend
    return static_cast<std::int64_t>(raw << shift) >> shift;
}

}  // namespace

Result<NpyRows> npy_rows(std::span<const std::uint8_t> bytes, const NpyHeader& h, const std::string& path) {
    if (!supported(h))
        return bad_file(
            path, "dtype '" + h.descr + "' is not supported (bool, integers or float32/float64: x.astype(np.float32))");
    if (h.shape.empty()) return bad_file(path, "a 0-dimensional array: give one row per example, shape (N, ...)");
    NpyRows r;
    r.rows = static_cast<std::size_t>(h.shape[0]);
    r.cols = 1;
    r.integral = h.kind != 'f';
    for (std::size_t i = 1; i < h.shape.size(); ++i)
        if (!multiply_checked(r.cols, h.shape[i])) return bad_file(path, "bad dimensions: the size overflows");
    if (r.cols == 0 || r.cols > (std::size_t{1} << 28))
        return bad_file(path, "rows of " + std::to_string(r.cols) + " values (1 to 2^28 per example)");
    PSRUN_TRY(check_label_payload(r.rows * r.cols, h.item_bytes, bytes.size() - h.data_offset, path));
    if (r.rows > kMaxExamples) return bad_file(path, "more than 2^32 examples");
    return r;
}

Result<std::vector<float>> npy_as_floats(std::span<const std::uint8_t> bytes, const NpyHeader& h,
                                         const std::string& path) {
    PSRUN_TRY_ASSIGN(auto r, npy_rows(bytes, h, path));
    const std::size_t n = r.rows * r.cols, item = h.item_bytes;
    std::vector<float> out(n);
    const std::uint8_t* data = bytes.data() + h.data_offset;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t* p = data + i * item;
        float v = 0;
        if (h.kind == 'f')
            v = item == 4 ? std::bit_cast<float>(static_cast<std::uint32_t>(load(p, 4, h.big_endian)))
                          : static_cast<float>(std::bit_cast<double>(load(p, 8, h.big_endian)));
        else if (h.kind == 'u' || h.kind == 'b') v = static_cast<float>(load(p, item, h.big_endian));
        else v = static_cast<float>(as_int(p, h));
        if (!std::isfinite(v))
            return bad_file(path, "value at index " + std::to_string(i) +
                                      " is not finite (NaN or infinity, or too large for float32)");
        out[i] = v;
    }
    return out;
}

Result<std::vector<std::int32_t>> npy_as_int32(std::span<const std::uint8_t> bytes, const NpyHeader& h,
                                               const std::string& path) {
    PSRUN_TRY_ASSIGN(auto r, npy_rows(bytes, h, path));
    if (!r.integral)
        return bad_file(path, "dtype '" + h.descr + "' is not an integer type (ids and labels: x.astype(np.int64))");
    const std::size_t n = r.rows * r.cols;
    std::vector<std::int32_t> out(n);
    const std::uint8_t* data = bytes.data() + h.data_offset;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t* p = data + i * h.item_bytes;
        const bool unsigned_kind = h.kind != 'i';
        const std::uint64_t raw = load(p, h.item_bytes, h.big_endian);
        const std::int64_t v = unsigned_kind ? static_cast<std::int64_t>(raw) : as_int(p, h);
        if ((unsigned_kind && raw > INT32_MAX) || v < INT32_MIN || v > INT32_MAX)
            return bad_file(path, "value at index " + std::to_string(i) + " does not fit int32");
        out[i] = static_cast<std::int32_t>(v);
    }
    return out;
}

Result<std::vector<std::uint64_t>> npy_as_raw_ids(std::span<const std::uint8_t> bytes, const NpyHeader& h,
                                                  const std::string& path) {
    PSRUN_TRY_ASSIGN(auto r, npy_rows(bytes, h, path));
    if (!r.integral || h.kind == 'b')
        return bad_file(path, "dtype '" + h.descr + "' for raw ids (--raw-ids): give integers (x.astype(np.int64))");
    std::vector<std::uint64_t> out(r.rows * r.cols);
    const std::uint8_t* data = bytes.data() + h.data_offset;
    for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<std::uint64_t>(as_int(data + i * h.item_bytes, h));
    return out;
}

}  // namespace psrun::worker
