// psrun model freeze (cmd_model_freeze.h): read the file, list the tensors, import the result to
// check that it still trains, then write it atomically.
#include "launcher/cmd_model_freeze.h"

#include <climits>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "common/checkpoint_store.h"
#include "common/result.h"
#include "workerd/onnx/onnx_freeze.h"
#include "workerd/onnx/onnx_model.h"

namespace psrun::launcher {

namespace {

struct FreezeOptions {
    std::string model;
    std::vector<std::string> tensors;
    std::string output;
};

Result<std::string> frozen_file(const FreezeOptions& o) {
    std::ifstream in(o.model, std::ios::binary);
    if (!in) return make_error(ErrorCode::kIo, o.model + ": cannot open");
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    onnx::ModelProto proto;
    if (bytes.size() > INT_MAX || !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
        return make_error(ErrorCode::kInvalidArgument, o.model + ": not an ONNX model (the protobuf does not parse)");
    auto frozen = onnx_io::freeze_initializers(proto, o.tensors);
    if (!frozen) return make_error(ErrorCode::kInvalidArgument, o.model + ": " + frozen.error().message);
    std::string out;
    if (!proto.SerializeToString(&out)) return make_error(ErrorCode::kIo, o.model + ": cannot serialize the result");
    PSRUN_TRY_ASSIGN(auto model, onnx_io::import_onnx(out, o.output));
    std::int64_t state = 0;
    for (const auto& t : model.tensors)
        if (t.cls == nn::TensorClass::kState) state += t.size;
    std::cout << "frozen: " << frozen->size() << " initializer" << (frozen->size() == 1 ? "" : "s") << " (";
    for (std::size_t i = 0; i < frozen->size(); ++i) std::cout << (i ? ", " : "") << (*frozen)[i];
    std::cout << "); the model trains " << model.parameter_count - state << " values, " << state
              << " are state or frozen\n";
    return out;
}

}  // namespace

void add_model_freeze_command(CLI::App& model, int& exit_code) {
    auto options = std::make_shared<FreezeOptions>();
    CLI::App* freeze = model.add_subcommand(
        "freeze",
        "list a file's buffers (initializers that are constants) so they do not train: an ONNX file "
        "from a plain torch.onnx.export lists none");
    freeze->add_option("model", options->model, "the FILE.onnx")->required();
    freeze->add_option("--tensors", options->tensors, "the initializers to freeze, as the file names them (a,b)")
        ->delimiter(',')
        ->required();
    freeze->add_option("-o,--output", options->output, "the file to write (may be the model itself)")->required();
    freeze->callback([options, &exit_code] {
        auto bytes = frozen_file(*options);
        if (!bytes) {
            std::cerr << "psrun model freeze: " << bytes.error().message << "\n";
            exit_code = kExitUsage;
            return;
        }
        // Absolute: write_file_atomically fsyncs the file's directory, which a bare name lacks.
        const std::string path = std::filesystem::absolute(options->output).string();
        if (auto wrote = write_file_atomically(path, *bytes); !wrote) {
            std::cerr << "psrun model freeze: --output " << options->output << ": " << wrote.error().message << "\n";
            exit_code = kExitUsage;
            return;
        }
        exit_code = kExitOk;
    });
}

}  // namespace psrun::launcher
