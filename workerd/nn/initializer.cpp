#include "workerd/nn/initializer.h"

#include <array>
#include <sstream>
#include <string_view>

#include "workerd/nn/field_reader.h"

namespace psrun::nn {

namespace {

struct InitInfo {
    InitKind kind;
    std::string_view name;
    std::string_view parameter;  // "" when parameterless
};

constexpr std::array<InitInfo, 7> kInits = {{
    {InitKind::kTruncatedNormal, "truncated_normal", "stddev"},
    {InitKind::kNormal, "normal", "stddev"},
    {InitKind::kUniform, "uniform", "limit"},
    {InitKind::kGlorotUniform, "glorot_uniform", ""},
    {InitKind::kHeNormal, "he_normal", ""},
    {InitKind::kZeros, "zeros", ""},
    {InitKind::kConstant, "constant", "value"},
}};

const InitInfo& info(InitKind kind) {
    for (const auto& i : kInits)
        if (i.kind == kind) return i;
    return kInits.back();
}

std::vector<std::string_view> init_names() {
    std::vector<std::string_view> names;
    for (const auto& i : kInits) names.push_back(i.name);
    return names;
}

Error init_error(const std::string& where, const std::string& what) {
    return Error{ErrorCode::kInvalidArgument, where + ": " + what};
}

}  // namespace

Result<Initializer> parse_initializer(const nlohmann::json& value, const std::string& where) {
    const nlohmann::json* kind_value = &value;
    if (value.is_object()) {
        if (!value.contains("kind"))
            return tl::unexpected(
                init_error(where, "an initializer object needs \"kind\" (one of " + join_names(init_names()) + ")"));
        kind_value = &value.at("kind");
    }
    if (!kind_value->is_string())
        return tl::unexpected(
            init_error(where, "expected an initializer (a name or {\"kind\": ...}), got " + describe_value(value)));
    const auto& name = kind_value->get_ref<const std::string&>();
    const InitInfo* found = nullptr;
    for (const auto& i : kInits)
        if (i.name == name) found = &i;
    if (found == nullptr)
        return tl::unexpected(init_error(where, "unknown initializer \"" + describe_value(name).substr(1) +
                                                    " (did you mean \"" + closest_name(name, init_names()) +
                                                    "\"? known: " + join_names(init_names()) + ")"));
    Initializer init{found->kind, 0.0};
    if (found->parameter.empty()) {
        if (value.is_object()) {
            FieldReader reader(value, where);
            reader.allow("kind");
            PSRUN_TRY(reader.finish());
        }
        return init;
    }
    if (!value.is_object())
        return tl::unexpected(init_error(where, "initializer " + name + " needs \"" + std::string(found->parameter) +
                                                    "\": write {\"kind\": \"" + name + "\", \"" +
                                                    std::string(found->parameter) + "\": ...}"));
    FieldReader reader(value, where + " (" + name + ")");
    reader.allow("kind");
    PSRUN_TRY_ASSIGN(auto v, reader.number(found->parameter, std::nullopt));
    if (found->kind != InitKind::kConstant && !(v > 0.0))
        return tl::unexpected(reader.fail(found->parameter, "expected a positive number, got " + describe_value(v)));
    PSRUN_TRY(reader.finish());
    init.value = v;
    return init;
}

nlohmann::json to_json(const Initializer& init) {
    const auto& i = info(init.kind);
    nlohmann::json out = {{"kind", i.name}};
    if (!i.parameter.empty()) out[std::string(i.parameter)] = init.value;
    return out;
}

std::string to_string(const Initializer& init) {
    const auto& i = info(init.kind);
    if (i.parameter.empty()) return std::string(i.name);
    std::ostringstream out;
    out << i.name << '(' << i.parameter << '=' << init.value << ')';
    return out.str();
}

}  // namespace psrun::nn
