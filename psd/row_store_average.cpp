// RowStore's moving average of the rows (--ema-decay; the contract is in psd/row_store.h).
#include <cmath>
#include <cstring>

#include "psd/row_store.h"

namespace psrun::psd {

void RowStore::reset_average(std::size_t t) {
    auto& table = tables_[t];
    ema_started_ = false;
    table.ema = Floats();
    table.ema_at = ZeroPages<std::uint64_t>();
    if (!averaging()) return;
    const std::size_t width = table.spec.width;
    table.ema = Floats(table.local_rows * width);
    table.ema_at = ZeroPages<std::uint64_t>(table.local_rows);
    for (std::uint64_t i = 0; i < table.local_rows; ++i)  // created rows: a copy (rows created later copy themselves)
        if (table.created[i >> 6] >> (i & 63) & 1) {
            std::memcpy(table.ema.data() + i * width, table.values.data() + i * width, width * sizeof(float));
            table.ema_at.data()[i] = table.updates;
        }
}

void RowStore::start_average(std::size_t t, bool loaded) {
    auto& table = tables_[t];
    if (table.ema.empty()) return;
    if (!loaded) std::memcpy(table.ema.data(), table.values.data(), table.values.size() * sizeof(float));
    std::fill_n(table.ema_at.data(), table.local_rows, table.updates);
    ema_started_ = loaded;
}

RowStore::DecayPower RowStore::power_for(std::uint64_t k, DecayPower power) const {
    if (power.k == k) return power;
    return {k, std::pow(static_cast<double>(config_.ema_decay), static_cast<double>(k))};
}

void RowStore::decay_toward(const float* w, const float* ema, const DecayPower& power, std::size_t width, float* out) {
    // k updates of a constant w: ema_k = w + D^k (ema_0 - w), in double (one rounding to float).
    const double factor = power.factor;
    for (std::size_t j = 0; j < width; ++j)
        out[j] = static_cast<float>(static_cast<double>(w[j]) + factor * (static_cast<double>(ema[j]) - w[j]));
}

void RowStore::catch_up(Table& table, std::uint64_t i, std::uint64_t to, DecayPower& power) const {
    std::uint64_t& at = table.ema_at.data()[i];
    if (at >= to) return;
    power = power_for(to - at, power);
    const std::size_t width = table.spec.width;
    float* ema = table.ema.data() + i * width;
    decay_toward(table.values.data() + i * width, ema, power, width, ema);
    at = to;
}

void RowStore::catch_up_all() {
    DecayPower power;
    for (auto& table : tables_) {
        if (table.ema.empty()) continue;
        for (std::uint64_t i = 0; i < table.local_rows; ++i)
            if (table.created[i >> 6] >> (i & 63) & 1) catch_up(table, i, table.updates, power);
    }
}

void RowStore::fold(Table& table, std::uint64_t i) const {
    const std::size_t width = table.spec.width;
    float* ema = table.ema.data() + i * width;
    const float* p = table.values.data() + i * width;
    table.ema_at.data()[i] = table.updates;
    if (ema_copy_) {
        std::memcpy(ema, p, width * sizeof(float));
        return;
    }
    // As WeightAverage::update_range(): ema += (1 - D) (p - ema).
    const float rate = 1.0f - config_.ema_decay;
    for (std::size_t j = 0; j < width; ++j) ema[j] += rate * (p[j] - ema[j]);
}

}  // namespace psrun::psd
