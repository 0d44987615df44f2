#include "launcher/confusion_plot.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace psrun::launcher {
namespace {

// A gnuplot single-quoted string's body: a quote is written twice.
std::string quoted(const std::string& text) {
    std::string out;
    for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out;
}

}  // namespace

Result<void> plot_confusion(const worker::ClassificationReport& r, const std::string& title,
                            const std::string& png_path) {
    const std::string data_path = png_path + ".dat", log_path = png_path + ".gnuplot.log";
    {
        std::ofstream data(data_path);
        for (int t = 0; t < r.classes; ++t) {
            const auto& row = r.confusion[static_cast<std::size_t>(t)];
            const std::int64_t support = r.support[static_cast<std::size_t>(t)];
            for (int p = 0; p < r.classes; ++p) {
                const std::int64_t n = row[static_cast<std::size_t>(p)];
                data << p << ' ' << t << ' ' << (support ? double(n) / double(support) : 0.0) << ' ' << n << '\n';
            }
        }
        if (!data) return make_error(ErrorCode::kIo, "cannot write " + data_path);
    }
    const int side = std::max(500, 60 * r.classes + 160);
    // Counts in white on the dark cells, black elsewhere; the true classes run down the y axis.
    const std::string script = fmt::format(
        "set terminal pngcairo size {0},{1}\nset output '{2}'\nset title '{3}' noenhanced\n"
        "set xlabel 'predicted class'\nset ylabel 'true class'\nset xrange [-0.5:{4}.5]\n"
        "set yrange [{4}.5:-0.5]\nset xtics 1 out nomirror\nset ytics 1 out nomirror\nset size ratio -1\n"
        "set palette defined (0 '#ffffff', 1 '#08306b')\nset cbrange [0:1]\n"
        "set cblabel 'share of the true class'\n"
        "plot '{5}' using 1:2:3 with image notitle, "
        "'{5}' using 1:2:(sprintf('%d', $4)):($3 > 0.5 ? 0xffffff : 0) with labels tc rgb variable notitle\n",
        side, side - 60, quoted(png_path), quoted(title), r.classes - 1, quoted(data_path));

    auto cleanup = [&] {
        std::error_code ec;
        std::filesystem::remove(data_path, ec);
        std::filesystem::remove(log_path, ec);
    };
    int to_gnuplot[2];
    if (::pipe2(to_gnuplot, O_CLOEXEC) != 0) {
        cleanup();
        return make_error(ErrorCode::kIo, "pipe for gnuplot failed");
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(to_gnuplot[0], STDIN_FILENO);
        const int err = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (err >= 0) ::dup2(err, STDERR_FILENO);
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
    std::string said;
    {
        std::ifstream log(log_path);
        std::ostringstream text;
        text << log.rdbuf();
        said = text.str();
    }
    cleanup();
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return make_error(ErrorCode::kIo, "gnuplot failed to draw " + png_path +
                                              " (is gnuplot installed? jobs/setup.sh installs it)" +
                                              (said.empty() ? "" : ": " + said));
    return {};
}

}  // namespace psrun::launcher
