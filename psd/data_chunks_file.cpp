#include "psd/data_chunks_file.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/checkpoint_store.h"
#include "common/tensor_file.h"

namespace psrun::psd {
namespace {

constexpr std::uint64_t kVersion = 1;
constexpr std::size_t kHeaderWords = 9, kWordDigits = 4, kDigitBits = 16;
constexpr const char* kHeader = "data_chunks/header";
constexpr const char* kClosed = "data_chunks/closed";
constexpr const char* kOpen = "data_chunks/open";

void put_word(std::vector<float>& out, std::uint64_t word) {
    for (std::size_t k = 0; k < kWordDigits; ++k)
        out.push_back(static_cast<float>((word >> (kDigitBits * k)) & 0xFFFF));
}

std::size_t bitmap_digits(std::uint32_t chunks) { return (chunks + kDigitBits - 1) / kDigitBits; }

// Reads digits off a tensor's floats; every digit must be an integral float in [0, 65535].
struct DigitReader {
    const std::vector<float>& in;
    std::size_t pos = 0;
    bool ok = true;
    std::uint32_t digit() {
        const float f = pos < in.size() ? in[pos] : -1.0f;
        ++pos;
        if (!(std::isfinite(f) && f >= 0.0f && f <= 65535.0f && f == std::floor(f))) ok = false;
        return ok ? static_cast<std::uint32_t>(f) : 0;
    }
    std::uint64_t word() {
        std::uint64_t w = 0;
        for (std::size_t k = 0; k < kWordDigits; ++k) w |= std::uint64_t{digit()} << (kDigitBits * k);
        return w;
    }
};

}  // namespace

std::vector<NamedTensor> data_chunks_tensors(const DataChunks::State& s) {
    std::vector<float> header, closed, open;
    for (std::uint64_t w : {kVersion, s.plan.examples, std::uint64_t{s.plan.chunks}, s.plan.seed, s.next_epoch,
                            s.epochs_complete, s.epochs_inexact, s.stale_reports, s.leased_total})
        put_word(header, w);
    for (const EpochCount& c : s.closed) {
        put_word(closed, c.epoch);
        put_word(closed, c.examples);
        put_word(closed, c.chunks_done);
    }
    const std::size_t digits = bitmap_digits(s.plan.chunks);
    for (const auto& o : s.open) {
        put_word(open, o.epoch);
        const std::size_t at = open.size();
        open.resize(at + digits, 0.0f);
        std::vector<std::uint32_t> bits(digits, 0);
        for (std::uint32_t c : o.done)
            if (c / kDigitBits < digits) bits[c / kDigitBits] |= 1u << (c % kDigitBits);
        for (std::size_t k = 0; k < digits; ++k) open[at + k] = static_cast<float>(bits[k]);
    }
    std::vector<NamedTensor> out;
    out.push_back({kHeader, {kHeaderWords, kWordDigits}, std::move(header)});
    out.push_back({kClosed, {s.closed.size(), 3 * kWordDigits}, std::move(closed)});
    out.push_back({kOpen, {s.open.size(), kWordDigits + digits}, std::move(open)});
    return out;
}

bool is_data_chunks_header(std::string_view name) { return name == kHeader; }

std::string encode_data_chunks(const DataChunks::State& s) {
    const std::vector<NamedTensor> tensors = data_chunks_tensors(s);
    std::vector<TensorView> views;
    for (const NamedTensor& t : tensors) views.push_back({t.name, t.shape, t.data});
    return encode_tensor_file(views);
}

Result<DataChunks::State> decode_data_chunks_tensors(std::span<const NamedTensor> tensors, const std::string& path) {
    auto bad = [&path](const std::string& why) {
        return invalid_argument(path + ": not a valid data chunk state (" + why + ")");
    };
    if (tensors.size() != kDataChunksTensors || tensors[0].name != kHeader || tensors[1].name != kClosed ||
        tensors[2].name != kOpen)
        return bad(fmt::format("expected the tensors {}, {} and {}", kHeader, kClosed, kOpen));
    const NamedTensor &header = tensors[0], &closed = tensors[1], &open = tensors[2];
    if (header.shape != std::vector<std::uint64_t>{kHeaderWords, kWordDigits}) return bad("header shape");
    DataChunks::State s;
    DigitReader h{header.data};
    const std::uint64_t version = h.word();
    s.plan.examples = h.word();
    const std::uint64_t chunks = h.word();
    s.plan.seed = h.word();
    s.next_epoch = h.word();
    s.epochs_complete = h.word();
    s.epochs_inexact = h.word();
    s.stale_reports = h.word();
    s.leased_total = h.word();
    if (!h.ok) return bad("header digits");
    if (version != kVersion) return bad(fmt::format("version {}, this build reads {}", version, kVersion));
    if (chunks == 0 || chunks > DataChunks::kMaxChunks) return bad(fmt::format("{} chunks", chunks));
    s.plan.chunks = static_cast<std::uint32_t>(chunks);
    if (closed.shape.size() != 2 || closed.shape[1] != 3 * kWordDigits || closed.shape[0] > DataChunks::kKeptEpochs)
        return bad("shape of the complete epochs");
    DigitReader c{closed.data};
    for (std::uint64_t i = 0; i < closed.shape[0]; ++i) {
        EpochCount e;
        e.epoch = c.word();
        e.examples = c.word();
        e.complete = true;
        const std::uint64_t done = c.word();
        if (done > DataChunks::kMaxChunks) return bad(fmt::format("complete epoch {}: {} chunks", e.epoch, done));
        e.chunks_done = static_cast<std::uint32_t>(done);
        s.closed.push_back(e);
    }
    if (!c.ok) return bad("digits of the complete epochs");
    const std::size_t digits = bitmap_digits(s.plan.chunks);
    if (open.shape.size() != 2 || open.shape[1] != kWordDigits + digits || open.shape[0] > s.plan.chunks + 1ull)
        return bad("shape of the open epochs");
    DigitReader o{open.data};
    for (std::uint64_t i = 0; i < open.shape[0] && o.ok; ++i) {
        DataChunks::OpenState e{o.word(), {}};
        for (std::size_t k = 0; k < digits; ++k) {
            const std::uint32_t bits = o.digit();
            for (std::uint32_t b = 0; b < kDigitBits; ++b)
                if (bits & (1u << b)) e.done.push_back(static_cast<std::uint32_t>(k * kDigitBits + b));
        }
        s.open.push_back(std::move(e));
    }
    if (!o.ok) return bad("digits of the open epochs");
    // The plan, the counters, and every epoch against them (chunks beyond the plan, order, totals).
    if (auto checked = DataChunks::restore(s); !checked) return bad(checked.error().message);
    return s;
}

Result<DataChunks::State> decode_data_chunks(std::string_view bytes, const std::string& path) {
    PSRUN_TRY_ASSIGN(auto tensors, parse_tensor_file(bytes, path));
    auto state = decode_data_chunks_tensors(tensors, path);
    if (!state)
        return invalid_argument(state.error().message + ": move this checkpoint away to resume from an older one");
    return state;
}

Result<void> save_data_chunks(const DataChunks& chunks, const std::string& dir) {
    return write_file_atomically(dir + "/" + kDataChunksFile, encode_data_chunks(chunks.state()));
}

Result<std::optional<DataChunks>> load_data_chunks(const std::string& dir) {
    const std::string path = dir + "/" + kDataChunksFile;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return std::optional<DataChunks>();
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(ErrorCode::kIo, path + ": cannot be read");
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    PSRUN_TRY_ASSIGN(auto state, decode_data_chunks(bytes, path));
    PSRUN_TRY_ASSIGN(auto restored, DataChunks::restore(state));
    return std::optional<DataChunks>(std::move(restored));
}

}  // namespace psrun::psd
