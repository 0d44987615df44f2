// libFuzzer target for the job key file's text (common/job_keys.*: parse_job_keys, the part of
// read_job_key_file after the ownership and mode checks).
// Contract checked: never a crash; an accepted file has a non-zero token and four keys that
// libzmq decodes to 32 bytes each, and the keys written back in the documented format parse to
// the same values.
// Built and run by test/fuzz/fuzz.sh job_keys.
#include <zmq.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "common/job_keys.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun;
    const auto keys = parse_job_keys(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz-input");
    if (!keys) return 0;
    if (keys->token == 0) __builtin_trap();
    for (const std::string* k :
         {&keys->server_public, &keys->server_secret, &keys->client_public, &keys->client_secret}) {
        std::uint8_t bin[32];
        if (k->size() != 40 || zmq_z85_decode(bin, k->c_str()) == nullptr) __builtin_trap();
    }
    char token[17];
    std::snprintf(token, sizeof token, "%016llx", static_cast<unsigned long long>(keys->token));
    const std::string text = std::string("format=1\ntoken=") + token + "\nserver_public=" + keys->server_public +
                             "\nserver_secret=" + keys->server_secret + "\nclient_public=" + keys->client_public +
                             "\nclient_secret=" + keys->client_secret + "\n";
    const auto again = parse_job_keys(text, "fuzz-output");
    if (!again || again->token != keys->token || again->server_public != keys->server_public ||
        again->server_secret != keys->server_secret || again->client_public != keys->client_public ||
        again->client_secret != keys->client_secret)
        __builtin_trap();
    return 0;
}
