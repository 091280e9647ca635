// What the bridge's tests and tools read back from JetStream: every
// message of a stream, with its headers and when the server stored it.
//
// Threading: each call opens a connection of its own; calls may run on
// any threads.
#ifndef WALBUS_TOOLS_STREAM_READER_H_
#define WALBUS_TOOLS_STREAM_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bridge/nats_link.h"

namespace walbus::tools {

// One message of a stream, as read back.
struct StoredMessage {
  std::string subject;
  std::map<std::string, std::string> headers;
  std::string data;
  int64_t stored_ns = 0;  // when the server stored it (unix ns)
};

// A link connected to `url` (requests wait up to 5 s), or nullptr when
// no server answers.
std::unique_ptr<bridge::NatsLink> ConnectToNats(const std::string& url);

// Every message of `stream` under `filter_subject`, in stream order,
// through a consumer of its own that is deleted afterwards; empty on
// failure.
std::vector<StoredMessage> ReadStream(const std::string& url, const std::string& stream,
                                      const std::string& filter_subject);

}  // namespace walbus::tools

#endif  // WALBUS_TOOLS_STREAM_READER_H_
