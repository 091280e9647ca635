#include "tests/bridge/nats_client.h"

#include <nats/nats.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <memory>

#include "bridge/nats_link.h"
#include "tests/bridge/bridge_node.h"

namespace walbus::testing {

using tools::ConnectToNats;

bool PublishRaw(const std::string& url, const std::string& subject, const std::map<std::string, std::string>& headers,
                const std::string& data, bool* duplicate) {
  auto link = ConnectToNats(url);
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

bool CreateStream(const std::string& url, const std::string& stream, const std::vector<std::string>& subjects) {
  auto link = ConnectToNats(url);
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

bool ConsumerSavedAll(const tools::NatsServer& server, const std::string& stream, const std::string& durable) {
  auto link = ConnectToNats(server.url());
  if (link == nullptr) return false;
  jsStreamInfo* si = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  if (js_GetStreamInfo(&si, link->js(), stream.c_str(), nullptr, &err) != NATS_OK) return false;
  const uint64_t last = si->State.LastSeq;
  jsStreamInfo_Destroy(si);
  const auto saved = server.SavedConsumerState(stream, durable);
  return saved && saved->ack_floor == last && saved->delivered == last && saved->pending == 0;
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
