#include "common/metrics_log.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "common/gnuplot.h"
#include "common/utf8.h"

namespace psrun {

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("cannot open metrics file " + path + ": " + std::strerror(errno));
}

MetricsLog::~MetricsLog() {
    if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::write(std::int64_t step, nlohmann::json record) {
    using namespace std::chrono;
    record["step"] = step;
    record["time"] = duration<double>(system_clock::now().time_since_epoch()).count();
    const std::string line = json_text(record) + "\n";
    const off_t before = ::lseek(fd_, 0, SEEK_END);
    ssize_t n = -1;
    do n = ::write(fd_, line.data(), line.size());
    while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(line.size())) {
        if (dropping_) spdlog::warn("{}: writing again ({} records lost in all)", path_, dropped_);
        dropping_ = false;
        return;
    }
    const int err = n < 0 ? errno : ENOSPC;
    if (n > 0 && before >= 0 && ::ftruncate(fd_, before) != 0)  // no half line: readers need whole records
        spdlog::warn("{}: cannot cut a partial record off: {}", path_, std::strerror(errno));
    ++dropped_;
    dropping_ = true;
    if ((dropped_ & (dropped_ - 1)) == 0)  // the first loss, then at 2, 4, 8, ...
        spdlog::warn("{}: a record for step {} was lost ({}; {} lost in all); later records are tried as usual", path_,
                     step, std::strerror(err), dropped_);
}

namespace {

// gnuplot commands that keep one-point or flat series from an "empty range" warning: a range
// around the value (`axis` "y" or "y2"), or nothing when the data spans one.
std::string range_around(const char* axis, double lo, double hi, bool log_scale) {
    if (hi > lo) return "";
    const double a = log_scale ? lo / 2 : lo - 0.01, b = log_scale ? hi * 2 : hi + 0.01;
    return fmt::format("set {}range [{}:{}]\n", axis, a, b);
}

}  // namespace

Result<void> plot_curves(const std::string& metrics_path, const std::string& png_path, std::string* messages) {
    std::ifstream in(metrics_path);
    if (!in) return make_error(ErrorCode::kNotFound, metrics_path + ": cannot open");
    // gnuplot reads two plain data files; JSON parsing stays here.
    const std::string loss_path = png_path + ".loss.dat", acc_path = png_path + ".acc.dat";
    std::ofstream loss(loss_path), acc(acc_path);
    std::size_t loss_rows = 0, acc_rows = 0;
    double loss_lo = 0, loss_hi = 0, acc_lo = 0, acc_hi = 0, best = 0;
    std::int64_t best_step = 0, last_step = 0;
    for (std::string line; std::getline(in, line);) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.contains("step")) continue;
        const auto step = j["step"].get<std::int64_t>();
        last_step = std::max(last_step, step);
        if (j.contains("loss") && j["loss"].is_number()) {
            const double v = j["loss"].get<double>();
            loss << step << ' ' << v << '\n';
            loss_lo = loss_rows ? std::min(loss_lo, v) : v;
            loss_hi = loss_rows ? std::max(loss_hi, v) : v;
            ++loss_rows;
        }
        if (j.contains("test_accuracy") && j["test_accuracy"].is_number()) {
            const double v = j["test_accuracy"].get<double>();
            acc << step << ' ' << v << '\n';
            acc_lo = acc_rows ? std::min(acc_lo, v) : v;
            acc_hi = acc_rows ? std::max(acc_hi, v) : v;
            if (acc_rows == 0 || v > best) best = v, best_step = step;
            ++acc_rows;
        }
    }
    loss.close();
    acc.close();
    auto cleanup = [&] {
        std::error_code ec;
        for (const auto& p : {loss_path, acc_path}) std::filesystem::remove(p, ec);
    };
    if (loss_rows == 0 && acc_rows == 0) {
        cleanup();
        return make_error(ErrorCode::kNotFound, metrics_path + ": no loss or accuracy records to plot");
    }
    // The loss falls by orders of magnitude: a log axis keeps the later steps readable.
    const bool log_loss = loss_rows > 0 && loss_lo > 0;
    std::string script = "set terminal pngcairo size 900,500\nset output '" + png_path +
                         "'\nset xlabel 'global step'\nset ylabel 'training loss" + (log_loss ? " (log scale)" : "") +
                         "'\nset y2label 'test accuracy'\nset ytics nomirror\nset y2tics\n"
                         "set key center right\nset grid\n";
    if (log_loss) script += "set logscale y\n";
    if (loss_rows) script += range_around("y", loss_lo, loss_hi, log_loss);
    if (acc_rows) {
        script += range_around("y2", acc_lo, acc_hi, false);
        // The text goes to the side with more room, so that it stays inside the plot.
        const bool right_half = 2 * best_step > last_step;
        script += fmt::format(
            "set label 1 'best {:.2f}% (step {})' at first {}, second {} {} point pt 7 ps 1.5 "
            "offset {},-1\n",
            best * 100, best_step, best_step, best, right_half ? "right" : "left", right_half ? -1 : 1);
    }
    script += "plot ";
    if (loss_rows) script += "'" + loss_path + "' using 1:2 with lines title 'loss' axes x1y1";
    if (loss_rows && acc_rows) script += ", ";
    if (acc_rows) script += "'" + acc_path + "' using 1:2 with linespoints title 'test accuracy' axes x1y2";
    script += "\n";

    auto said = run_gnuplot(script, png_path);
    cleanup();
    if (!said) return tl::unexpected(said.error());
    if (messages) *messages = *said;
    else if (!said->empty()) spdlog::warn("gnuplot, drawing {}: {}", png_path, *said);
    return {};
}

}  // namespace psrun
