// What the bridge tests do with JetStream besides the bridge: publish raw
// messages, read a stream back, create a stream. The server itself is
// tools/nats_server.h.
#ifndef WALBUS_TESTS_BRIDGE_NATS_CLIENT_H_
#define WALBUS_TESTS_BRIDGE_NATS_CLIENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "tools/nats_server.h"
#include "tools/stream_reader.h"

namespace walbus::testing {

// Holds the temp dir of a LocalNatsServer; a base so that it is made first.
struct NatsScratchDir {
  TempDir dir;
};

// A nats-server whose store lives, and dies, with the test.
class LocalNatsServer : private NatsScratchDir, public tools::NatsServer {
 public:
  LocalNatsServer() : tools::NatsServer(dir.root()) {}
};

using tools::StoredMessage;

// Publishes one message with `headers` to JetStream at `url` (the stream
// must exist) and returns whether a PubAck came; *duplicate (optional) gets
// whether the stream recognised its Nats-Msg-Id and dropped it.
bool PublishRaw(const std::string& url, const std::string& subject, const std::map<std::string, std::string>& headers,
                const std::string& data, bool* duplicate = nullptr);
using tools::ReadStream;
// Creates `stream` on `subjects` when missing; true on success.
bool CreateStream(const std::string& url, const std::string& stream, const std::vector<std::string>& subjects);
// Whether `server` wrote to its store consumer `durable` of `stream` as
// having every message the stream holds delivered and acknowledged; false
// when it cannot tell. A consumer's state is written a while after it
// changes, and only that survives a stop.
bool ConsumerSavedAll(const tools::NatsServer& server, const std::string& stream, const std::string& durable);

}  // namespace walbus::testing

#endif  // WALBUS_TESTS_BRIDGE_NATS_CLIENT_H_
