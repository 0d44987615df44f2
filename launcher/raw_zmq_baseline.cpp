#include "launcher/raw_zmq_baseline.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iterator>
#include <numeric>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/signals.h"

namespace psrun::launcher::ps_tools {
namespace {

void no_free(void*, void*) {}

void send_frames(zmq::socket_t& s, std::vector<float>& buffer, const std::vector<std::size_t>& frames) {
    std::size_t offset = 0;
    for (std::size_t k = 0; k < frames.size(); ++k) {
        s.send(zmq::message_t(buffer.data() + offset, frames[k] * sizeof(float), &no_free, nullptr),
               k + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
        offset += frames[k];
    }
}

}  // namespace

Result<std::vector<double>> raw_zmq_roundtrips(const std::string& endpoint,
                                               const std::vector<std::size_t>& frame_floats, int warmup, int rounds) {
    std::vector<float> buffer(std::accumulate(frame_floats.begin(), frame_floats.end(), std::size_t{0}), 0.5f);
    const int total = warmup + rounds;
    const pid_t pid = ::fork();
    if (pid < 0) return make_error(ErrorCode::kIo, "fork failed");
    if (pid == 0) {  // echo server: parameters back for every gradient message
        unblock_all_signals();
        zmq::context_t ctx(1);
        zmq::socket_t s(ctx, zmq::socket_type::router);
        s.set(zmq::sockopt::linger, 5000);  // deliver the last reply before exiting
        s.set(zmq::sockopt::rcvtimeo, 20000);
        s.bind(endpoint);
        for (int r = 0; r < total; ++r) {
            std::vector<zmq::message_t> parts;
            if (!zmq::recv_multipart(s, std::back_inserter(parts))) ::_exit(1);
            s.send(parts[0], zmq::send_flags::sndmore);
            send_frames(s, buffer, frame_floats);
        }
        s.close();
        ctx.close();  // waits (up to the linger) until the last reply is written
        ::_exit(0);
    }
    std::vector<double> times;
    {
        zmq::context_t ctx(1);
        zmq::socket_t s(ctx, zmq::socket_type::dealer);
        s.set(zmq::sockopt::linger, 0);
        s.set(zmq::sockopt::rcvtimeo, 20000);
        s.connect(endpoint);
        for (int r = 0; r < total; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            send_frames(s, buffer, frame_floats);
            std::vector<zmq::message_t> parts;
            if (!zmq::recv_multipart(s, std::back_inserter(parts))) break;
            if (r >= warmup)
                times.push_back(
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (static_cast<int>(times.size()) != rounds || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return make_error(ErrorCode::kIo, "raw ZeroMQ baseline failed on " + endpoint + " (" +
                                              std::to_string(times.size()) + " rounds, child status " +
                                              std::to_string(status) + ")");
    return times;
}

}  // namespace psrun::launcher::ps_tools
