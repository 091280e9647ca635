#include "tools/stream_reader.h"

#include <nats/nats.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

namespace walbus::tools {

std::unique_ptr<bridge::NatsLink> ConnectToNats(const std::string& url) {
  jetstream::ConnectionOptions options;
  options.url = url;
  options.request_timeout = std::chrono::seconds(5);
  std::unique_ptr<bridge::NatsLink> link;
  if (!bridge::NatsLink::Open(options, &link).ok() || !link->connected()) return nullptr;
  return link;
}

std::vector<StoredMessage> ReadStream(const std::string& url, const std::string& stream,
                                      const std::string& filter_subject) {
  std::vector<StoredMessage> out;
  auto link = ConnectToNats(url);
  if (link == nullptr) return out;
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream.c_str();
  so.Config.AckPolicy = js_AckNone;
  so.Config.DeliverPolicy = js_DeliverAll;
  natsSubscription* sub = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  static int reader = 0;
  const std::string durable = "walbus-reader-" + std::to_string(::getpid()) + "-" + std::to_string(reader++);
  if (js_PullSubscribe(&sub, link->js(), filter_subject.c_str(), durable.c_str(), nullptr, &so, &err) != NATS_OK)
    return out;
  for (;;) {
    natsMsgList list{};
    const natsStatus s = natsSubscription_Fetch(&list, sub, 256, 1000, &err);
    if (s != NATS_OK) break;
    for (int i = 0; i < list.Count; ++i) {
      natsMsg* m = list.Msgs[i];
      StoredMessage stored;
      stored.subject = natsMsg_GetSubject(m);
      const char* data = natsMsg_GetData(m);
      stored.data.assign(data == nullptr ? "" : data, static_cast<size_t>(natsMsg_GetDataLength(m)));
      jsMsgMetaData* meta = nullptr;
      if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
        stored.stored_ns = meta->Timestamp;
        jsMsgMetaData_Destroy(meta);
      }
      const char** keys = nullptr;
      int count = 0;
      if (natsMsgHeader_Keys(m, &keys, &count) == NATS_OK) {
        for (int k = 0; k < count; ++k) {
          const char* v = nullptr;
          if (natsMsgHeader_Get(m, keys[k], &v) == NATS_OK && v != nullptr) stored.headers[keys[k]] = v;
        }
        free(static_cast<void*>(keys));
      }
      out.push_back(std::move(stored));
    }
    natsMsgList_Destroy(&list);
  }
  natsSubscription_Unsubscribe(sub);  // a reader of its own: delete its consumer
  natsSubscription_Destroy(sub);
  return out;
}

}  // namespace walbus::tools
