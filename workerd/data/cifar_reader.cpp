#include "workerd/data/cifar_reader.h"

#include <algorithm>

#include "workerd/data/reader_common.h"

namespace psrun::worker {
namespace {

constexpr int kSide = 32;
constexpr std::size_t kPixels = 3 * kSide * kSide;

const char* format_name(CifarFormat f) {
    switch (f) {
        case CifarFormat::kCifar10: return "CIFAR-10";
        case CifarFormat::kCifar100: return "CIFAR-100";
        case CifarFormat::kCifar100Coarse: return "CIFAR-100";
    }
    return "CIFAR";
}

}  // namespace

Result<CifarFormat> parse_cifar_format(std::string_view name) {
    if (name == "cifar10") return CifarFormat::kCifar10;
    if (name == "cifar100") return CifarFormat::kCifar100;
    if (name == "cifar100-coarse") return CifarFormat::kCifar100Coarse;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown data format '" + std::string(name) + "' (cifar10, cifar100 or cifar100-coarse)");
}

std::size_t cifar_record_bytes(CifarFormat format) {
    return format == CifarFormat::kCifar10 ? kPixels + 1 : kPixels + 2;
}

Result<void> parse_cifar(const std::vector<std::uint8_t>& bytes, const std::string& path, CifarFormat format,
                         LabeledImages& out) {
    const std::size_t record = cifar_record_bytes(format);
    const std::string name = format_name(format);
    if (bytes.empty())
        return bad_file(path, "is empty (expected " + name + " records of " + std::to_string(record) + " bytes)");
    if (bytes.size() % record != 0)
        return bad_file(path, "length " + std::to_string(bytes.size()) + " bytes is not a whole number of " +
                                  std::to_string(record) + "-byte " + name +
                                  " records (truncated, trailing bytes, "
                                  "or another format: " +
                                  (record == kPixels + 1 ? "CIFAR-100" : "CIFAR-10") + " records are " +
                                  std::to_string(record == kPixels + 1 ? kPixels + 2 : kPixels + 1) + " bytes)");
    const std::size_t records = bytes.size() / record;
    if (out.images.count + records > kMaxExamples) return bad_file(path, "too many records");
    const bool is100 = format != CifarFormat::kCifar10;
    const int coarse_limit = 20, fine_limit = is100 ? 100 : 10;
    const std::size_t first = out.images.count;
    out.images.type = PixelType::kUint8;
    out.images.channels = 3;
    out.images.height = kSide;
    out.images.width = kSide;
    out.images.u8.resize((first + records) * kPixels);
    out.labels.resize(first + records);
    for (std::size_t r = 0; r < records; ++r) {
        const std::uint8_t* rec = bytes.data() + r * record;
        const int fine = is100 ? rec[1] : rec[0];
        if (is100 && rec[0] >= coarse_limit)
            return bad_file(path, "record " + std::to_string(r) + ": coarse label " + std::to_string(rec[0]) +
                                      " is out of range 0-19 (not a CIFAR-100 file?)");
        if (fine >= fine_limit)
            return bad_file(path, "record " + std::to_string(r) + ": label " + std::to_string(fine) +
                                      " is out of range 0-" + std::to_string(fine_limit - 1) + " (not a " + name +
                                      " file?)");
        out.labels[first + r] = format == CifarFormat::kCifar100Coarse ? rec[0] : fine;
        std::copy(rec + (is100 ? 2 : 1), rec + record,
                  out.images.u8.begin() + static_cast<std::ptrdiff_t>((first + r) * kPixels));
    }
    out.images.count = first + records;
    return {};
}

Result<LabeledImages> read_cifar(const std::vector<std::string>& paths, CifarFormat format) {
    LabeledImages out;
    if (paths.empty()) return make_error(ErrorCode::kInvalidArgument, "no CIFAR files given");
    for (const std::string& path : paths) {
        PSRUN_TRY_ASSIGN(auto bytes, read_maybe_gzip(path));
        PSRUN_TRY(parse_cifar(bytes, path, format, out));
    }
    return out;
}

}  // namespace psrun::worker
