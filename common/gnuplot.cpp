#include "common/gnuplot.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "common/text_file.h"

namespace psrun {

Result<std::string> run_gnuplot(const std::string& script, const std::string& png_path) {
    const std::string log_path = png_path + ".gnuplot.log";
    int to_gnuplot[2];
    if (::pipe2(to_gnuplot, O_CLOEXEC) != 0) return make_error(ErrorCode::kIo, "pipe for gnuplot failed");
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(to_gnuplot[0], STDIN_FILENO);
        const int err = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (err >= 0) ::dup2(err, STDERR_FILENO);  // gnuplot's warnings: returned, not in the caller's log
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
    const std::string said = read_text_file(log_path);
    std::error_code ec;
    std::filesystem::remove(log_path, ec);
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return make_error(ErrorCode::kIo, "gnuplot failed to draw " + png_path +
                                              " (is gnuplot installed? jobs/setup.sh installs it)" +
                                              (said.empty() ? "" : ": " + said));
    return said;
}

std::string gnuplot_quoted(const std::string& text) {
    std::string out;
    for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out;
}

}  // namespace psrun
