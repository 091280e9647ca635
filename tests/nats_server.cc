#include "tests/nats_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace walbus::testing {
namespace {

int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

bool Accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::string ServerBinary() {
  if (const char* env = std::getenv("WALBUS_NATS_SERVER"); env != nullptr && *env != '\0') return env;
  for (const char* candidate : {"/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  return "nats-server";  // from PATH
}

// A connection and JetStream context for the helpers below.
struct Client {
  natsConnection* conn = nullptr;
  jsCtx* js = nullptr;
  explicit Client(const std::string& url) {
    if (natsConnection_ConnectTo(&conn, url.c_str()) != NATS_OK) return;
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = 5000;
    if (natsConnection_JetStream(&js, conn, &o) != NATS_OK) js = nullptr;
  }
  ~Client() {
    if (js != nullptr) jsCtx_Destroy(js);
    if (conn != nullptr) natsConnection_Destroy(conn);
  }
};

}  // namespace

NatsServer::NatsServer() : port_(FreeLoopbackPort()) {}

NatsServer::~NatsServer() { Stop(); }

bool NatsServer::Start() {
  if (pid_ > 0) return true;
  const std::string binary = ServerBinary();
  const std::string port = std::to_string(port_);
  const std::string store = dir_.root() + "/store";
  const std::string log = dir_.root() + "/nats-server.log";
  std::fflush(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execlp(binary.c_str(), binary.c_str(), "-js", "-a", "127.0.0.1", "-p", port.c_str(), "-sd", store.c_str(),
             static_cast<char*>(nullptr));
    std::perror("exec nats-server");
    ::_exit(127);
  }
  if (pid_ < 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (Accepts(port_)) {
      // JetStream is ready a moment after the listener.
      Client probe(url());
      if (probe.js != nullptr) {
        jsAccountInfo* info = nullptr;
        jsErrCode err = static_cast<jsErrCode>(0);
        if (js_GetAccountInfo(&info, probe.js, nullptr, &err) == NATS_OK) {
          jsAccountInfo_Destroy(info);
          return true;
        }
      }
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      std::fprintf(stderr, "nats-server exited at start; see %s\n", log.c_str());
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::fprintf(stderr, "nats-server did not start in time; see %s\n", log.c_str());
  Kill();
  return false;
}

void NatsServer::Signal(int sig) {
  if (pid_ <= 0) return;
  ::kill(pid_, sig);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void NatsServer::Kill() { Signal(SIGKILL); }
void NatsServer::Stop() { Signal(SIGTERM); }

bool PublishRaw(const std::string& url, const std::string& subject, const std::map<std::string, std::string>& headers,
                const std::string& data) {
  Client c(url);
  if (c.js == nullptr) return false;
  natsMsg* msg = nullptr;
  if (natsMsg_Create(&msg, subject.c_str(), nullptr, data.data(), static_cast<int>(data.size())) != NATS_OK) return false;
  for (const auto& [k, v] : headers) natsMsgHeader_Set(msg, k.c_str(), v.c_str());
  jsPubAck* ack = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  const natsStatus s = js_PublishMsg(&ack, c.js, msg, nullptr, &err);
  natsMsg_Destroy(msg);
  if (ack != nullptr) jsPubAck_Destroy(ack);
  return s == NATS_OK;
}

std::vector<StoredMessage> ReadStream(const std::string& url, const std::string& stream,
                                      const std::string& filter_subject) {
  std::vector<StoredMessage> out;
  Client c(url);
  if (c.js == nullptr) return out;
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream.c_str();
  so.Config.AckPolicy = js_AckNone;
  so.Config.DeliverPolicy = js_DeliverAll;
  natsSubscription* sub = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  static int reader = 0;
  const std::string durable = "test-reader-" + std::to_string(::getpid()) + "-" + std::to_string(reader++);
  if (js_PullSubscribe(&sub, c.js, filter_subject.c_str(), durable.c_str(), nullptr, &so, &err) != NATS_OK) return out;
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
  Client c(url);
  if (c.js == nullptr) return false;
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
  const natsStatus s = js_AddStream(&info, c.js, &cfg, nullptr, &err);
  if (info != nullptr) jsStreamInfo_Destroy(info);
  return s == NATS_OK;
}

}  // namespace walbus::testing
