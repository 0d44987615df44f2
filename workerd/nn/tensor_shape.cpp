#include "workerd/nn/tensor_shape.h"

#include "workerd/nn/shape.h"

namespace psrun::nn {

const char* to_string(ElementType type) { return type == ElementType::kInt ? "int" : "float"; }

std::string Dim::to_string() const {
    if (!batch) return std::to_string(value);
    return value == 1 ? "N" : std::to_string(value) + "N";
}

std::string to_string(const Dims& dims) {
    if (dims.empty()) return "scalar";
    std::string out;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (i) out += " x ";
        out += dims[i].to_string();
    }
    return out;
}

std::vector<std::int64_t> concrete(const Dims& dims, std::int64_t n) {
    std::vector<std::int64_t> out;
    out.reserve(dims.size());
    for (const auto& d : dims) out.push_back(d.at(n));
    return out;
}

std::optional<std::int64_t> elements_per_example(const Dims& dims) {
    std::int64_t product = 1;
    for (const auto& d : dims) {
        const auto p = checked_product({product, d.value});
        if (!p) return std::nullopt;
        product = *p;
    }
    return product;
}

bool has_batch(const Dims& dims) {
    for (const auto& d : dims)
        if (d.batch) return true;
    return false;
}

Dims constant_dims(const std::vector<std::int64_t>& dims) {
    Dims out;
    out.reserve(dims.size());
    for (const auto d : dims) out.push_back(Dim::of(d));
    return out;
}

}  // namespace psrun::nn
