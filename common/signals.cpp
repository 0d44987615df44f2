#include "common/signals.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace psrun {
namespace {

sigset_t termination_set() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGHUP, SIGPIPE}) sigaddset(&set, sig);
    return set;
}

}  // namespace

void block_termination_signals() {
    const sigset_t set = termination_set();
    if (int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0)
        throw std::system_error(rc, std::generic_category(), "pthread_sigmask");
}

void unblock_all_signals() {
    sigset_t set;
    sigemptyset(&set);
    pthread_sigmask(SIG_SETMASK, &set, nullptr);
}

SignalFd::SignalFd() {
    sigset_t set = termination_set();
    sigdelset(&set, SIGPIPE);  // SIGPIPE stays blocked and is never reported
    fd_.reset(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
    if (!fd_.valid()) throw std::system_error(errno, std::generic_category(), "signalfd");
}

std::optional<int> SignalFd::read_signal() {
    signalfd_siginfo info{};
    const ssize_t n = ::read(fd_.get(), &info, sizeof info);
    if (n != static_cast<ssize_t>(sizeof info)) return std::nullopt;
    return static_cast<int>(info.ssi_signo);
}

WakeFd::WakeFd() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (!fd_.valid()) throw std::system_error(errno, std::generic_category(), "eventfd");
}

void WakeFd::notify() {
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(fd_.get(), &one, sizeof one);
}

void WakeFd::drain() {
    std::uint64_t value = 0;
    [[maybe_unused]] ssize_t n = ::read(fd_.get(), &value, sizeof value);
}

}  // namespace psrun
