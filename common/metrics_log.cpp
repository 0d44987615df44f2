#include "common/metrics_log.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace psrun {

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "a");
    if (file_ == nullptr) throw std::runtime_error("cannot open metrics file " + path);
}

MetricsLog::~MetricsLog() {
    if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::write(std::int64_t step, nlohmann::json record) {
    using namespace std::chrono;
    record["step"] = step;
    record["time"] = duration<double>(system_clock::now().time_since_epoch()).count();
    const std::string line = record.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), file_);
    std::fflush(file_);
}

Result<void> plot_curves(const std::string& metrics_path, const std::string& png_path) {
    std::ifstream in(metrics_path);
    if (!in) return make_error(ErrorCode::kNotFound, metrics_path + ": cannot open");
    // gnuplot reads two plain data files; JSON parsing stays here.
    const std::string loss_path = png_path + ".loss.dat", acc_path = png_path + ".acc.dat";
    std::ofstream loss(loss_path), acc(acc_path);
    std::size_t loss_rows = 0, acc_rows = 0;
    for (std::string line; std::getline(in, line);) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.contains("step")) continue;
        if (j.contains("loss") && j["loss"].is_number()) {
            loss << j["step"].get<std::int64_t>() << ' ' << j["loss"].get<double>() << '\n';
            ++loss_rows;
        }
        if (j.contains("test_accuracy") && j["test_accuracy"].is_number()) {
            acc << j["step"].get<std::int64_t>() << ' ' << j["test_accuracy"].get<double>() << '\n';
            ++acc_rows;
        }
    }
    loss.close();
    acc.close();
    auto cleanup = [&] {
        std::error_code ec;
        std::filesystem::remove(loss_path, ec);
        std::filesystem::remove(acc_path, ec);
    };
    if (loss_rows == 0 && acc_rows == 0) {
        cleanup();
        return make_error(ErrorCode::kNotFound, metrics_path + ": no loss or accuracy records to plot");
    }
    std::string script = "set terminal pngcairo size 900,500\nset output '" + png_path +
                         "'\nset xlabel 'global step'\nset ylabel 'training loss'\n"
                         "set y2label 'test accuracy'\nset ytics nomirror\nset y2tics\n"
                         "set key center right\nset grid\nplot ";
    if (loss_rows) script += "'" + loss_path + "' using 1:2 with lines title 'loss' axes x1y1";
    if (loss_rows && acc_rows) script += ", ";
    if (acc_rows)
        script += "'" + acc_path + "' using 1:2 with linespoints title 'test accuracy' axes x1y2";
    script += "\n";

    int to_gnuplot[2];
    if (::pipe2(to_gnuplot, O_CLOEXEC) != 0) {
        cleanup();
        return make_error(ErrorCode::kIo, "pipe for gnuplot failed");
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(to_gnuplot[0], STDIN_FILENO);
        ::execlp("gnuplot", "gnuplot", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(to_gnuplot[0]);
    if (pid > 0) {
        [[maybe_unused]] ssize_t n = ::write(to_gnuplot[1], script.data(), script.size());
    }
    ::close(to_gnuplot[1]);
    int status = 0;
    if (pid > 0) ::waitpid(pid, &status, 0);
    cleanup();
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return make_error(ErrorCode::kIo, "gnuplot failed to draw " + png_path +
                                              " (is gnuplot installed? jobs/setup.sh installs it)");
    return {};
}

}  // namespace psrun
