#include "tools/nats_server.h"

#include <nats/nats.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "bridge/nats_link.h"

namespace walbus::tools {
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

bool JetStreamAnswers(const std::string& url) {
  jetstream::ConnectionOptions options;
  options.url = url;
  std::unique_ptr<bridge::NatsLink> link;
  if (!bridge::NatsLink::Open(options, &link).ok() || !link->connected()) return false;
  jsAccountInfo* info = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  if (js_GetAccountInfo(&info, link->js(), nullptr, &err) != NATS_OK) return false;
  jsAccountInfo_Destroy(info);
  return true;
}

std::string ServerBinary() {
  if (const char* env = std::getenv("WALBUS_NATS_SERVER"); env != nullptr && *env != '\0') return env;
  for (const char* candidate : {"/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  return "nats-server";  // from PATH
}

// The server's version as major * 100 + minor (209 for 2.9.10); 0 when
// it cannot be told.
int ServerVersion(const std::string& binary) {
  FILE* p = ::popen((binary + " --version 2>&1").c_str(), "r");
  if (p == nullptr) return 0;
  char line[256] = {};
  const bool read = std::fgets(line, sizeof line, p) != nullptr;
  ::pclose(p);
  if (!read) return 0;
  const char* v = std::strstr(line, "v");
  int major = 0, minor = 0;
  if (v == nullptr || std::sscanf(v, "v%d.%d", &major, &minor) != 2) return 0;
  return major * 100 + minor;
}

// $WALBUS_NATS_SETTINGS: "defaults" runs the server as users do; anything
// else (the default) with the most durable settings its version offers.
bool MostDurable() {
  const char* env = std::getenv("WALBUS_NATS_SETTINGS");
  return env == nullptr || std::string(env) != "defaults";
}

}  // namespace

NatsServer::NatsServer(std::string dir) : dir_(std::move(dir)), port_(FreeLoopbackPort()) {}

NatsServer::~NatsServer() { Stop(); }

bool NatsServer::Start() {
  if (pid_ > 0) return true;
  const std::string binary = ServerBinary();
  const std::string port = std::to_string(port_);
  const std::string store = dir_ + "/store";
  const std::string log = dir_ + "/nats-server.log";
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  // 2.10 and later can fsync before every PubAck; 2.9 has no such setting
  // (it acknowledges before writing out and syncs every 2 minutes).
  std::string config;
  static const int version = ServerVersion(binary);
  if (MostDurable() && version >= 210) {
    config = dir_ + "/nats-server.conf";
    std::FILE* f = std::fopen(config.c_str(), "w");
    if (f == nullptr) return false;
    std::fprintf(f, "jetstream {\n  store_dir: \"%s\"\n  sync_interval: always\n}\n", store.c_str());
    std::fclose(f);
  }
  std::fflush(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (config.empty()) {
      ::execlp(binary.c_str(), binary.c_str(), "-js", "-a", "127.0.0.1", "-p", port.c_str(), "-sd", store.c_str(),
               static_cast<char*>(nullptr));
    } else {
      ::execlp(binary.c_str(), binary.c_str(), "-c", config.c_str(), "-a", "127.0.0.1", "-p", port.c_str(),
               static_cast<char*>(nullptr));
    }
    std::perror("exec nats-server");
    ::_exit(127);
  }
  if (pid_ < 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (Accepts(port_)) {
      // JetStream is ready a moment after the listener.
      if (JetStreamAnswers(url())) {
        NoteBlockSizes();
        return true;
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

void NatsServer::NoteBlockSizes() {
  namespace fs = std::filesystem;
  block_sizes_at_start_.clear();
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(fs::path(dir_) / "store", ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".blk") block_sizes_at_start_[it->path().string()] = fs::file_size(it->path(), ec);
  }
}

uint64_t NatsServer::DropStreamTail(const std::string& stream, uint64_t max_bytes) {
  assert(!running());
  namespace fs = std::filesystem;
  const fs::path msgs = fs::path(StreamDir(stream)) / "msgs";
  std::error_code ec;
  long newest = -1;
  for (const auto& entry : fs::directory_iterator(msgs, ec)) {
    if (entry.path().extension() != ".blk") continue;
    const long n = std::strtol(entry.path().stem().c_str(), nullptr, 10);
    newest = std::max(newest, n);
  }
  if (newest < 0) return 0;
  const fs::path block = msgs / (std::to_string(newest) + ".blk");
  const uint64_t size = fs::file_size(block, ec);
  if (ec || size == 0) return 0;
  auto at_start = block_sizes_at_start_.find(block.string());
  const uint64_t written_since = size - std::min(size, at_start == block_sizes_at_start_.end() ? 0 : at_start->second);
  const uint64_t cut = std::min(written_since, max_bytes);
  if (cut == 0) return 0;
  fs::resize_file(block, size - cut, ec);
  if (ec) return 0;
  for (const char* ext : {".idx", ".fss"}) fs::remove(msgs / (std::to_string(newest) + ext), ec);
  return cut;
}

std::string NatsServer::StreamDir(const std::string& stream) const {
  return dir_ + "/store/jetstream/$G/streams/" + stream;
}

namespace {

// A little-endian base-128 varint at data[*at], as the server writes it.
std::optional<uint64_t> ReadUvarint(const std::string& data, size_t* at) {
  uint64_t value = 0;
  for (int shift = 0; shift < 64 && *at < data.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(data[(*at)++]);
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80u) == 0) return value;
  }
  return std::nullopt;
}

// The whole file at `path`; empty when it cannot be read.
std::string ReadWholeFile(const std::string& path) {
  std::string data;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return data;
  char chunk[4096];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) data.append(chunk, n);
  std::fclose(f);
  return data;
}

// A consumer's state file: a magic byte and version 2, then the ack floor
// (consumer, stream), the delivered (consumer, stream) and the number
// pending, as varints; then what is pending (not read here).
std::optional<NatsServer::SavedConsumer> ParseConsumerState(const std::string& data) {
  constexpr uint8_t kMagic = 22, kVersion = 2;
  if (data.size() < 2 || static_cast<uint8_t>(data[0]) != kMagic || static_cast<uint8_t>(data[1]) != kVersion) {
    return std::nullopt;
  }
  size_t at = 2;
  uint64_t fields[5] = {};
  for (uint64_t& field : fields) {
    const std::optional<uint64_t> v = ReadUvarint(data, &at);
    if (!v) return std::nullopt;
    field = *v;
  }
  return NatsServer::SavedConsumer{fields[1], fields[3], fields[4]};
}

}  // namespace

std::string NatsServer::ConsumerStateFile(const std::string& stream, const std::string& durable) const {
  return StreamDir(stream) + "/obs/" + durable + "/o.dat";
}

std::optional<NatsServer::SavedConsumer> NatsServer::SavedConsumerState(const std::string& stream,
                                                                        const std::string& durable) const {
  return ParseConsumerState(ReadWholeFile(ConsumerStateFile(stream, durable)));
}

bool NatsServer::StopKeepingConsumerState(const std::string& stream, const std::string& durable) {
  const std::string path = ConsumerStateFile(stream, durable);
  std::string kept = ReadWholeFile(path);
  // A read may meet a write under way (the file truncated, not yet written).
  for (int i = 0; i < 1000 && !ParseConsumerState(kept); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    kept = ReadWholeFile(path);
  }
  Stop();
  if (!ParseConsumerState(kept)) return false;
  if (ReadWholeFile(path) == kept) return true;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool written = std::fwrite(kept.data(), 1, kept.size(), f) == kept.size();
  return std::fclose(f) == 0 && written;
}

void NatsServer::ForgetStream(const std::string& stream) {
  assert(!running());
  std::error_code ec;
  std::filesystem::remove_all(StreamDir(stream), ec);
}

void NatsServer::Kill() { Signal(SIGKILL); }
void NatsServer::Stop() { Signal(SIGTERM); }

}  // namespace walbus::tools
