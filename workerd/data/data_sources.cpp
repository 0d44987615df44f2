#include "workerd/data/data_sources.h"

#include "common/utf8.h"

#include <glob.h>
#include <sched.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <thread>

#include "workerd/data/decode_all.h"
#include "workerd/data/example_decoder.h"
#include "workerd/data/image_folder.h"
#include "workerd/data/reader_common.h"
#include "workerd/data/record_producer.h"
#include "workerd/data/stream_source.h"
#include "workerd/data/table_reader.h"

namespace psrun::worker {
namespace {

// The class names: the folder names, as valid UTF-8 (they go into JSON; a byte that is not
// becomes U+FFFD).
std::vector<std::string> class_names_of(const ImageFolder& folder) {
    std::vector<std::string> names;
    for (const auto& c : folder.classes) names.push_back(valid_utf8(c));
    return names;
}

namespace fs = std::filesystem;

int usable_cores() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
}

enum class FileKind { kTfrecord, kNpz, kCsv, kUnknown };

// By content: the zip magic is .npz, a well-framed first record TFRecord (through gzip), a
// .csv/.tsv/.txt name or printable first bytes CSV.
FileKind sniff_file(const std::string& path, std::string& problem) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) {
        problem = "cannot open it";
        return FileKind::kUnknown;
    }
    std::vector<std::uint8_t> head(64);
    const int n = gzread(f, head.data(), static_cast<unsigned>(head.size()));
    gzclose(f);
    head.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    if (head.size() >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4) return FileKind::kNpz;
    if (looks_like_tfrecord(head)) return FileKind::kTfrecord;
    std::string ext = fs::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (ext == ".csv" || ext == ".tsv" || ext == ".txt") return FileKind::kCsv;
    problem = head.empty() ? "it is empty"
                           : "it starts with " + first_bytes_hex(head, 8) +
                                 ": not a TFRecord file (its first record is not well framed), an .npz archive or a "
                                 ".csv table";
    return FileKind::kUnknown;
}

PipelineConfig base_config(const DataOptions& o, const ExampleLayout& layout, const Normalization& normalization,
                           const RecordKeys& keys) {
    PipelineConfig c;
    c.layout = layout;
    c.keys = keys;
    c.resize = o.resize;
    c.normalization = normalization;
    c.corrupt = o.corrupt;
    c.shuffle_buffer = o.shuffle_buffer;
    c.prefetch = o.prefetch;
    c.threads = o.threads > 0 ? o.threads : auto_data_threads();
    return c;
}

RecordKeys record_keys(const DataOptions& o) {
    RecordKeys k;
    if (!o.inputs.empty()) k.inputs = o.inputs;
    if (!o.targets.empty()) k.targets = o.targets;
    return k;
}

std::string count_text(std::size_t n, const char* what) { return std::to_string(n) + " " + what; }

Result<LoadedSplit> folder_split(const ImageFolder& folder, const DataOptions& o, const ModelInput& model,
                                 const Normalization& normalization, const std::string& label) {
    if (model.input != InputKind::kImage)
        return invalid_argument(label + " " + folder.root + ": an image folder, but the model " + model.name +
                                " takes " + model.input_text());
    if (model.target != TargetKind::kClass)
        return invalid_argument(label + " " + folder.root + ": an image folder gives class labels, but the model " +
                                model.name + " predicts a vector of " + std::to_string(model.target_length) +
                                " values");
    if (static_cast<std::int64_t>(folder.classes.size()) > model.classes)
        return invalid_argument(label + " " + folder.root + ": " + std::to_string(folder.classes.size()) +
                                " class folders but the model " + model.name + " has " + std::to_string(model.classes) +
                                " classes");
    const ExampleLayout layout{model, PixelType::kUint8};
    PipelineConfig config = base_config(o, layout, normalization, {});
    LoadedSplit s;
    s.size = folder.files.size();
    s.class_names = class_names_of(folder);
    const std::uint64_t bytes = std::uint64_t{folder.files.size()} * static_cast<std::uint64_t>(model.input_size());
    const bool stream = o.stream == StreamMode::kOn ||
                        (o.stream == StreamMode::kAuto && bytes > std::uint64_t{o.stream_memory_mb} << 20);
    s.description = "image folder " + folder.root + ": " + count_text(folder.classes.size(), "classes") + ", " +
                    count_text(folder.files.size(), "images");
    if (stream) {
        auto plan = std::make_shared<StreamPlan>();
        plan->config = config;
        plan->folder = true;
        plan->files = std::make_shared<const std::vector<std::string>>(folder.files);
        plan->labels = std::make_shared<const std::vector<std::int32_t>>(folder.labels);
        s.stream = plan;
        s.description += ", streamed (" + std::to_string(config.threads) + " decoding threads)";
        return s;
    }
    FolderProducer producer(std::make_shared<const std::vector<std::string>>(folder.files),
                            std::make_shared<const std::vector<std::int32_t>>(folder.labels), false, 0, {}, 0);
    std::uint64_t skipped = 0;
    PSRUN_TRY_ASSIGN(auto memory, decode_all(producer, config, usable_cores(), skipped));
    s.memory = memory;
    s.memory->class_names = class_names_of(folder);
    s.size = s.memory->size();
    s.description += ", decoded into memory";
    if (skipped) s.description += " (" + std::to_string(skipped) + " undecodable images skipped)";
    return s;
}

Result<LoadedSplit> tfrecord_split(const std::vector<std::string>& files, const DataOptions& o, const ModelInput& model,
                                   const Normalization& normalization, bool training) {
    const RecordKeys keys = record_keys(o);
    // The first record fixes the layout and checks the keys before any thread starts.
    PSRUN_TRY_ASSIGN(auto reader, TfrecordReader::open(files.front(), o.corrupt));
    std::vector<std::uint8_t> first;
    PSRUN_TRY_ASSIGN(auto got, reader->next(first));
    if (!got) return invalid_argument(files.front() + ": no records (an empty TFRecord file)");
    PSRUN_TRY_ASSIGN(auto layout, probe_example_layout(first, keys, model,
                                                       files.front() + ": record 0 at offset " +
                                                           std::to_string(reader->record_offset())));
    PipelineConfig config = base_config(o, layout, normalization, keys);
    LoadedSplit s;
    s.description = count_text(files.size(), files.size() == 1 ? "TFRecord file" : "TFRecord files") + " (" +
                    files.front() + (files.size() > 1 ? ", ..." : "") + ")";
    if (o.stream != StreamMode::kOff) {
        auto plan = std::make_shared<StreamPlan>();
        plan->config = config;
        plan->files = std::make_shared<const std::vector<std::string>>(files);
        s.stream = plan;
        s.description += ", streamed (" + std::to_string(config.threads) + " decoding threads" +
                         (training ? ", shuffle buffer " + std::to_string(config.shuffle_buffer) : std::string()) + ")";
        return s;
    }
    TfrecordProducer producer(share_files(files, {}), {}, false, 0, 0, o.corrupt);
    std::uint64_t skipped = 0;
    PSRUN_TRY_ASSIGN(auto memory, decode_all(producer, config, usable_cores(), skipped));
    s.memory = memory;
    s.size = s.memory->size();
    s.description += ", " + count_text(s.size, "records") + " decoded into memory";
    if (skipped) s.description += " (" + std::to_string(skipped) + " corrupt records skipped)";
    return s;
}

// One split given by a path or list. `label` ("train data", "test data") prefixes messages.
Result<LoadedSplit> load_one(const std::string& spec, const DataOptions& o, const ModelInput& model,
                             const Normalization& normalization, const std::string& label,
                             const ImageFolder* train_folder, ImageFolder* folder_out) {
    std::error_code ec;
    if (spec.find(',') == std::string::npos && fs::is_directory(spec, ec)) {
        PSRUN_TRY_ASSIGN(auto folder, scan_image_folder(spec));
        if (train_folder != nullptr) PSRUN_TRY(check_same_classes(*train_folder, folder));
        if (folder_out != nullptr) *folder_out = folder;
        if (o.validation_split > 0) return LoadedSplit{};  // the caller splits the folder
        return folder_split(folder, o, model, normalization, label);
    }
    PSRUN_TRY_ASSIGN(auto files, expand_file_list(spec));
    FileKind kind = FileKind::kUnknown;
    for (const auto& f : files) {
        std::string problem;
        const FileKind k = sniff_file(f, problem);
        if (k == FileKind::kUnknown) return invalid_argument(label + " " + f + ": " + problem);
        if (kind != FileKind::kUnknown && k != kind)
            return invalid_argument(label + " " + spec +
                                    ": mixes TFRecord, .npz and CSV files; give one kind per split");
        kind = k;
    }
    if (kind == FileKind::kTfrecord) return tfrecord_split(files, o, model, normalization, label == "train data");
    if (files.size() != 1)
        return invalid_argument(label + " " + spec + ": give one " + (kind == FileKind::kNpz ? ".npz" : "CSV") +
                                " file per split");
    PSRUN_TRY_ASSIGN(auto table,
                     load_table(files.front(), kind == FileKind::kNpz ? TableFormat::kNpz : TableFormat::kCsv,
                                {o.inputs, o.targets}, model));
    LoadedSplit s;
    s.memory = std::make_shared<LabeledImages>(std::move(table.data));
    s.memory->normalization = normalization;
    s.class_names = s.memory->class_names;
    s.size = s.memory->size();
    s.description = table.description;
    return s;
}

}  // namespace

Result<StreamMode> parse_stream_mode(std::string_view text) {
    if (text == "auto") return StreamMode::kAuto;
    if (text == "on") return StreamMode::kOn;
    if (text == "off") return StreamMode::kOff;
    return invalid_argument("--stream '" + std::string(text) + "': expected auto, on or off");
}

std::vector<std::string> split_list(std::string_view text) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        if (comma > start) out.emplace_back(text.substr(start, comma - start));
        start = comma + 1;
    }
    return out;
}

int auto_data_threads() { return std::max(1, usable_cores() / 4); }

Result<std::vector<std::string>> expand_file_list(const std::string& text) {
    std::vector<std::string> out;
    for (const std::string& item : split_list(text)) {
        if (item.find_first_of("*?[") == std::string::npos) {
            std::error_code ec;
            if (!fs::exists(item, ec)) return invalid_argument(item + ": no such file");
            if (fs::is_directory(item, ec))
                return invalid_argument(item + ": a directory in a list of files (an image folder is given alone)");
            out.push_back(item);
            continue;
        }
        glob_t g{};
        const int rc = ::glob(item.c_str(), 0, nullptr, &g);
        if (rc != 0) {
            globfree(&g);
            return invalid_argument(item + ": the pattern matches no file");
        }
        std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);
        globfree(&g);
        std::sort(matches.begin(), matches.end());
        out.insert(out.end(), matches.begin(), matches.end());
    }
    if (out.empty()) return invalid_argument("'" + text + "': no files given");
    return out;
}

Result<LoadedData> load_data(const DataOptions& o, const ModelInput& model, const Normalization& normalization) {
    if (o.train_data.empty()) return invalid_argument("--test-data needs --train-data (the training split)");
    if (o.validation_split < 0 || o.validation_split >= 1)
        return invalid_argument("--validation-split " + std::to_string(o.validation_split) +
                                ": give a fraction in (0, 1)");
    if (o.validation_split > 0 && !o.test_data.empty())
        return invalid_argument(
            "--validation-split and --test-data exclude each other: the test split is one or the other");
    if (o.validation_split == 0 && o.test_data.empty())
        return invalid_argument(
            "--train-data " + o.train_data +
            " needs --test-data D (or, for an image folder, --validation-split F to hold a fraction out)");
    LoadedData d;
    ImageFolder folder;
    PSRUN_TRY_ASSIGN(auto train, load_one(o.train_data, o, model, normalization, "train data", nullptr, &folder));
    if (o.validation_split > 0) {
        if (folder.root.empty())
            return invalid_argument("--validation-split holds out a part of an image folder; --train-data " +
                                    o.train_data + " is not one: give --test-data");
        ImageFolder train_part, validation;
        PSRUN_TRY(split_validation(folder, o.validation_split, train_part, validation));
        PSRUN_TRY_ASSIGN(auto tr, folder_split(train_part, o, model, normalization, "train data"));
        PSRUN_TRY_ASSIGN(auto te, folder_split(validation, o, model, normalization, "validation split of"));
        tr.description += " (--validation-split " + std::to_string(o.validation_split) + " held out)";
        te.description = "validation split of " + te.description;
        d.train = std::move(tr);
        d.test = std::move(te);
        return d;
    }
    PSRUN_TRY_ASSIGN(auto test, load_one(o.test_data, o, model, normalization, "test data",
                                         folder.root.empty() ? nullptr : &folder, nullptr));
    d.train = std::move(train);
    d.test = std::move(test);
    if (d.test.class_names.empty()) d.test.class_names = d.train.class_names;
    return d;
}

Result<LoadedSplit> load_test_split(const DataOptions& o, const ModelInput& model, const Normalization& normalization) {
    return load_one(o.test_data, o, model, normalization, "test data", nullptr, nullptr);
}

std::unique_ptr<BatchSource> make_stream_source(const StreamPlan& plan, std::size_t batch_size, std::uint64_t seed,
                                                ShardSpec shard) {
    const StreamPlan p = plan;
    const std::uint64_t shard_seed = seed ^ (std::uint64_t{static_cast<std::uint32_t>(shard.index)} << 40);
    std::size_t shard_size = 0;
    if (p.folder) {
        shard_size = p.files->size() / static_cast<std::size_t>(shard.count) +
                     (static_cast<std::size_t>(shard.index) < p.files->size() % static_cast<std::size_t>(shard.count));
        if (shard_size == 0)
            throw UsageError("--shard " + std::to_string(shard.index) + "/" + std::to_string(shard.count) +
                             ": the shard of a " + std::to_string(p.files->size()) + "-image folder is empty");
    }
    auto factory = [p, seed, shard, shard_seed](std::uint64_t start, std::size_t batch) {
        PipelineConfig c = p.config;
        c.batch_size = batch;
        std::unique_ptr<RecordProducer> producer;
        if (p.folder) {
            c.shuffle_buffer = 0;  // the Sampler's permutation of the files is the shuffle
            producer = std::make_unique<FolderProducer>(p.files, p.labels, true, seed, shard, start);
        } else {
            c.shuffle_seed = shard_seed ^ (start * 0xD1B54A32D192ED03ull);
            producer =
                std::make_unique<TfrecordProducer>(share_files(*p.files, shard), shard, true, seed, start, c.corrupt);
        }
        return std::make_unique<StreamPipeline>(std::move(c), std::move(producer));
    };
    return std::make_unique<StreamSource>(factory, batch_size, shard_size);
}

std::unique_ptr<EvalSource> make_stream_eval_source(const StreamPlan& plan) {
    const StreamPlan p = plan;
    auto factory = [p](std::uint64_t, std::size_t batch) {
        PipelineConfig c = p.config;
        c.batch_size = batch;
        c.shuffle_buffer = 0;
        std::unique_ptr<RecordProducer> producer;
        if (p.folder) producer = std::make_unique<FolderProducer>(p.files, p.labels, false, 0, ShardSpec{}, 0);
        else
            producer =
                std::make_unique<TfrecordProducer>(share_files(*p.files, {}), ShardSpec{}, false, 0, 0, c.corrupt);
        return std::make_unique<StreamPipeline>(std::move(c), std::move(producer));
    };
    return std::make_unique<StreamEvalSource>(factory);
}

}  // namespace psrun::worker
