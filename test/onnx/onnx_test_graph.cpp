#include "test/onnx/onnx_test_graph.h"

#include <catch2/catch.hpp>

namespace psrun::onnx_io::test {

namespace {

std::vector<float> ramp(std::size_t n, float scale) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = (static_cast<float>(i % 97) - 48.0f) * scale;
    return v;
}

onnx::NodeProto* add(onnx::GraphProto& g, const std::string& op, const std::string& name,
                     std::vector<std::string> inputs, const std::string& output) {
    auto* n = g.add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : inputs) n->add_input(i);
    n->add_output(output);
    return n;
}

}  // namespace

onnx::NodeProto* TestGraph::node(const std::string& name) {
    for (auto& n : *model.mutable_graph()->mutable_node())
        if (n.name() == name) return &n;
    FAIL("no node " << name);
    return nullptr;
}

onnx::NodeProto* TestGraph::add_node(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                                     const std::string& output) {
    return add(*model.mutable_graph(), op, name, std::move(inputs), output);
}

void TestGraph::add_input(onnx::NodeProto& node, const std::string& input) { node.add_input(input); }

std::string TestGraph::bytes() const { return model.SerializeAsString(); }

void TestGraph::add_int64_tensor(const std::string& name, const std::vector<std::int64_t>& dims,
                                 const std::vector<std::int64_t>& values) {
    onnx::TensorProto* t = model.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (const auto d : dims) t->add_dims(d);
    for (const auto v : values) t->add_int64_data(v);
}

void TestGraph::order(const std::vector<std::string>& names) {
    std::vector<onnx::NodeProto> ordered;
    for (const auto& name : names) ordered.push_back(*node(name));
    REQUIRE(static_cast<int>(ordered.size()) == model.graph().node_size());
    model.mutable_graph()->clear_node();
    for (const auto& n : ordered) *model.mutable_graph()->add_node() = n;
}

TestGraph small_cnn(std::int64_t opset) {
    TestGraph t;
    t.model.set_ir_version(7);
    t.model.set_producer_name("pytorch");
    auto* o = t.model.add_opset_import();
    o->set_version(opset);
    auto& g = *t.model.mutable_graph();
    g.set_name("torch_jit");
    auto* in = g.add_input();
    in->set_name("input");
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("batch");
    for (int d : {1, 8, 8}) tt->mutable_shape()->add_dim()->set_dim_value(d);
    add_float_tensor(g, "0.weight", {2, 1, 3, 3}, ramp(18, 0.01f));
    add_float_tensor(g, "0.bias", {2}, ramp(2, 0.1f));
    add_float_tensor(g, "4.weight", {3, 32}, ramp(96, 0.003f));
    add_float_tensor(g, "4.bias", {3}, ramp(3, 0.2f));
    auto* conv = add(g, "Conv", "/0/Conv", {"input", "0.weight", "0.bias"}, "/0/Conv_output_0");
    set_ints(*conv, "dilations", {1, 1});
    set_int(*conv, "group", 1);
    set_ints(*conv, "kernel_shape", {3, 3});
    set_ints(*conv, "pads", {1, 1, 1, 1});
    set_ints(*conv, "strides", {1, 1});
    add(g, "Relu", "/1/Relu", {"/0/Conv_output_0"}, "/1/Relu_output_0");
    auto* pool = add(g, "MaxPool", "/2/MaxPool", {"/1/Relu_output_0"}, "/2/MaxPool_output_0");
    set_int(*pool, "ceil_mode", 0);
    set_ints(*pool, "kernel_shape", {2, 2});
    set_ints(*pool, "pads", {0, 0, 0, 0});
    set_ints(*pool, "strides", {2, 2});
    set_int(*add(g, "Flatten", "/3/Flatten", {"/2/MaxPool_output_0"}, "/3/Flatten_output_0"), "axis", 1);
    auto* gemm = add(g, "Gemm", "/4/Gemm", {"/3/Flatten_output_0", "4.weight", "4.bias"}, "/4/Gemm_output_0");
    set_float(*gemm, "alpha", 1.0f);
    set_float(*gemm, "beta", 1.0f);
    set_int(*gemm, "transB", 1);
    set_int(*add(g, "Softmax", "/5/Softmax", {"/4/Gemm_output_0"}, "output"), "axis", 1);
    auto* out = g.add_output();
    out->set_name("output");
    auto* ot = out->mutable_type()->mutable_tensor_type();
    ot->set_elem_type(onnx::TensorProto::FLOAT);
    ot->mutable_shape()->add_dim()->set_dim_param("batch");
    ot->mutable_shape()->add_dim()->set_dim_value(3);
    return t;
}

}  // namespace psrun::onnx_io::test
