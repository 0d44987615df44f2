// The Importer's ends (onnx_importer.h): the graph's inputs as the model's, the loss and heads
// among its outputs, and the initializers as the initial parameters.
#include <algorithm>

#include "workerd/onnx/onnx_importer.h"

namespace psrun::onnx_io {

namespace {

// The input: float [N, ...] or int64/int32 ids [N, ...], rank 1 (one value per example: a
// diffusion model's timestep, a label) to 5; fixed sizes past the batch dim.
Result<nn::ValueInfo> input_info(const onnx::ValueInfoProto& input) {
    const std::string where = "input '" + input.name() + "': ";
    if (!input.type().has_tensor_type()) return make_error(ErrorCode::kInvalidArgument, where + "not a tensor");
    const auto type = input.type().tensor_type().elem_type();
    nn::ValueInfo info;
    if (type == onnx::TensorProto::INT64 || type == onnx::TensorProto::INT32) info.type = nn::ElementType::kInt;
    else if (type != onnx::TensorProto::FLOAT)
        return make_error(ErrorCode::kInvalidArgument, where + "not a float32 or int64 tensor");
    const auto& shape = input.type().tensor_type().shape();
    const int rank = shape.dim_size();
    if (rank < 1 || rank > 5)
        return make_error(ErrorCode::kInvalidArgument,
                          where + "rank " + std::to_string(rank) +
                              ": the engine takes [N, ...] inputs of rank 1 to 5 (one value per example to 4 axes "
                              "after the batch)");
    info.dims.push_back(nn::Dim::batch_times(1));
    for (int i = 1; i < rank; ++i) {
        const auto& d = shape.dim(i);
        if (d.has_dim_param() && !d.has_dim_value())
            return make_error(ErrorCode::kInvalidArgument,
                              where + "dimension " + std::to_string(i) + " ('" + d.dim_param() +
                                  "') is symbolic: the engine trains inputs of one size past the batch, so export "
                                  "with dynamic_axes naming axis 0 alone (e.g. {'" +
                                  input.name() + "': {0: 'N'}}) and an example input of the size the data has " +
                                  "(pad or crop sequences to one length)");
        if (!d.has_dim_value() || d.dim_value() < 1 || d.dim_value() > nn::kMaxTensorElements)
            return make_error(ErrorCode::kInvalidArgument,
                              where + "dimension " + std::to_string(i) +
                                  " is not a fixed positive size (only the batch dimension may be symbolic)");
        info.dims.push_back(nn::Dim::of(d.dim_value()));
    }
    const auto elements = nn::elements_per_example(info.dims);
    if (!elements || *elements > nn::kMaxTensorElements)
        return make_error(ErrorCode::kInvalidArgument, where + "too large");
    return info;
}

}  // namespace

Result<void> Importer::add_inputs() {
    model_.inputs.clear();
    for (const auto* graph_input : graph_.inputs()) {
        PSRUN_TRY_ASSIGN(auto input, input_info(*graph_input));
        model_.inputs.push_back(nn::InputDef{unique_name(graph_input->name()), input});
        values_[graph_input->name()] = model_.inputs.back().name;
    }
    return {};
}

Result<std::string> Importer::loss_of_outputs(const std::vector<std::string>& outputs) const {
    std::string loss;
    std::string listed;
    for (const auto& o : outputs) {
        const nn::ValueInfo* v = info(o);
        if (v == nullptr)
            return make_error(ErrorCode::kInvalidArgument,
                              "the output '" + o + "' is not computed by the imported layers");
        listed += (listed.empty() ? "'" : ", '") + o + "' " + nn::to_string(v->dims);
        const bool scalar = v->type == nn::ElementType::kFloat && !nn::has_batch(v->dims) &&
                            nn::elements_per_example(v->dims).value_or(0) == 1;
        if (!scalar) continue;
        if (!loss.empty())
            return make_error(ErrorCode::kInvalidArgument,
                              "the graph has two float scalar outputs, '" + loss + "' and '" + o +
                                  "': a graph of several outputs returns one loss and its heads beside it");
        loss = o;
    }
    if (loss.empty())
        return make_error(ErrorCode::kInvalidArgument,
                          "the graph has " + std::to_string(outputs.size()) + " outputs (" + listed +
                              ") and none is a float scalar: a graph of several outputs returns its loss (as "
                              "forward(x, y, t) -> (loss, logits, tag_logits)) and its heads beside it");
    return loss;
}

Result<void> Importer::check_heads(const std::vector<std::string>& outputs, const std::string& loss) const {
    for (const auto& o : outputs) {
        if (outputs.size() == 1 || o == loss) continue;
        const std::string& value = values_.at(o);
        if (model_.head_index(value) >= 0) continue;
        return make_error(
            ErrorCode::kInvalidArgument,
            "output '" + o + "' (" + nn::to_string(model_.value(value).dims) +
                ") is not a head: no loss term of the graph reads it against a target input (scores "
                "a SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss reads with int labels, or logits "
                "of a binary cross-entropy against float targets as torch.onnx writes "
                "F.binary_cross_entropy_with_logits); an output beside the loss must be one of its heads");
    }
    return {};
}

Result<void> Importer::set_initial_parameters() {
    std::vector<float> params(static_cast<std::size_t>(model_.parameter_count), 0.0f);
    for (const auto& t : model_.tensors) {
        const auto it = initial_.find(t.name);
        if (it == initial_.end())
            return make_error(ErrorCode::kInvalidArgument, "tensor " + t.name + " has no initializer to start from");
        if (static_cast<std::int64_t>(it->second.size()) != t.size)
            return make_error(ErrorCode::kInvalidArgument, "initializer '" + t.name + "' holds " +
                                                               std::to_string(it->second.size()) + " values where " +
                                                               std::to_string(t.size) + " are needed");
        std::copy(it->second.begin(), it->second.end(), params.begin() + t.offset);
    }
    model_.initial_parameters = std::make_shared<const std::vector<float>>(std::move(params));
    return {};
}

}  // namespace psrun::onnx_io
