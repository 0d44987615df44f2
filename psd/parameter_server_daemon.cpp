// The daemon's ParameterServer: the shard's logic over the ZeroMQ transport. The only file of the
// server that knows which transport it runs on (test/layering_test.py holds the others to
// psd/transport.h).
#include "psd/parameter_server.h"
#include "psd/zmq_transport.h"

namespace psrun::psd {

ParameterServer::ParameterServer(ServerOptions options) : ParameterServer(std::move(options), nullptr) {
    auto zmq = std::make_unique<ZmqTransport>(options_, team_.get());  // after the options were checked
    endpoint_ = zmq->endpoint();
    transport_ = std::move(zmq);
}

}  // namespace psrun::psd
