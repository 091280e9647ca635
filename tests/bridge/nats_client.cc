#include "tests/bridge/nats_client.h"

#include <nats/nats.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <memory>

#include "bridge/nats_link.h"
#include "tests/bridge/bridge_node.h"

namespace walbus::testing {
namespace {

// A connected link to `url`, or nullptr.
std::unique_ptr<bridge::NatsLink> Connect(const std::string& url) {
  jetstream::ConnectionOptions options;
  options.url = url;
  options.request_timeout = std::chrono::seconds(5);
  std::unique_ptr<bridge::NatsLink> link;
  if (!bridge::NatsLink::Open(options, &link).ok() || !link->connected()) return nullptr;
  return link;
}

}  // namespace

bool PublishRaw(const std::string& url, const std::string& subject, const std::map<std::string, std::string>& headers,
                const std::string& data, bool* duplicate) {
  auto link = Connect(url);
  if (link == nullptr) return false;
  natsMsg* msg = nullptr;
  if (natsMsg_Create(&msg, subject.c_str(), nullptr, data.data(), static_cast<int>(data.size())) != NATS_OK)
    return false;
  for (const auto& [k, v] : headers) natsMsgHeader_Set(msg, k.c_str(), v.c_str());
  jsPubAck* ack = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  const natsStatus s = js_PublishMsg(&ack, link->js(), msg, nullptr, &err);
  natsMsg_Destroy(msg);
  if (ack != nullptr) {
    if (duplicate != nullptr) *duplicate = ack->Duplicate;
    jsPubAck_Destroy(ack);
  }
  return s == NATS_OK;
}

std::vector<StoredMessage> ReadStream(const std::string& url, const std::string& stream,
                                      const std::string& filter_subject) {
  std::vector<StoredMessage> out;
  auto link = Connect(url);
  if (link == nullptr) return out;
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream.c_str();
  so.Config.AckPolicy = js_AckNone;
  so.Config.DeliverPolicy = js_DeliverAll;
  natsSubscription* sub = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  static int reader = 0;
  const std::string durable = "test-reader-" + std::to_string(::getpid()) + "-" + std::to_string(reader++);
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
  natsSubscription_Unsubscribe(sub);  // a test reader: delete its consumer
  natsSubscription_Destroy(sub);
  return out;
}

bool CreateStream(const std::string& url, const std::string& stream, const std::vector<std::string>& subjects) {
  auto link = Connect(url);
  if (link == nullptr) return false;
  std::vector<const char*> subs;
  for (const auto& s : subjects) subs.push_back(s.c_str());
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = stream.c_str();
  cfg.Subjects = subs.data();
  cfg.SubjectsLen = static_cast<int>(subs.size());
  cfg.Duplicates = int64_t{600} * 1000000000;
  jsStreamInfo* info = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  const natsStatus s = js_AddStream(&info, link->js(), &cfg, nullptr, &err);
  if (info != nullptr) jsStreamInfo_Destroy(info);
  return s == NATS_OK;
}

bool ConsumerAckedAll(const std::string& url, const std::string& stream, const std::string& durable) {
  auto link = Connect(url);
  if (link == nullptr) return false;
  jsConsumerInfo* ci = nullptr;
  jsStreamInfo* si = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  bool acked = false;
  if (js_GetConsumerInfo(&ci, link->js(), stream.c_str(), durable.c_str(), nullptr, &err) == NATS_OK &&
      js_GetStreamInfo(&si, link->js(), stream.c_str(), nullptr, &err) == NATS_OK) {
    acked = ci->NumAckPending == 0 && ci->NumPending == 0 && ci->AckFloor.Stream == si->State.LastSeq;
  }
  if (ci != nullptr) jsConsumerInfo_Destroy(ci);
  if (si != nullptr) jsStreamInfo_Destroy(si);
  return acked;
}

}  // namespace walbus::testing

namespace walbus::bridge_node {

pid_t StartNode(const std::string& mode, const std::string& dir, const std::string& url, int events) {
  const std::string count = std::to_string(events);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(WALBUS_BRIDGE_NODE, WALBUS_BRIDGE_NODE, mode.c_str(), dir.c_str(), url.c_str(), count.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

int WaitNode(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace walbus::bridge_node
