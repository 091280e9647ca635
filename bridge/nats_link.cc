#include "bridge/nats_link.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <vector>

#include "bus/util/bounds.h"

namespace walbus::bridge {

Status FromNats(natsStatus s, std::string_view what) {
  if (s == NATS_OK) return Status::OK();
  std::string msg(what);
  msg += ": ";
  msg += natsStatus_GetText(s);
  natsStatus ignored = NATS_OK;
  if (const char* last = nats_GetLastError(&ignored); last != nullptr && *last != '\0') {
    msg += " (";
    msg += last;
    msg += ")";
  }
  switch (s) {
    case NATS_TIMEOUT: return Status::TimedOut(msg);
    case NATS_NOT_FOUND: return Status::NotFound(msg);
    case NATS_INVALID_ARG: return Status::InvalidArgument(msg);
    case NATS_NO_MEMORY: return Status::ResourceExhausted(msg);
    default: return Status::IOError(msg);
  }
}

namespace {

// What the client buffers of this process's writes while it reconnects.
// Publishes and fetches are requests that wait for their answer, so a few
// are in flight at most; one that finds the buffer full fails and is
// retried, and the outbox holds everything else. The client's default
// allocates 8 MiB per connection at each disconnection (one per relay
// priority level, one per consumer): address space and commit charge a
// small device has better uses for.
constexpr int kReconnectBufferBytes = 64 << 10;

bool IsPort(std::string_view port) {
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) return false;
  const int number = std::stoi(std::string(port));
  return number >= 1 && number <= 65535;
}

// One server address of a URL list (see CheckNatsUrls).
bool IsNatsUrl(std::string_view url) {
  for (std::string_view scheme : {"nats://", "tls://"}) {
    if (url.starts_with(scheme)) {
      url.remove_prefix(scheme.size());
      break;
    }
  }
  if (const size_t at = url.rfind('@'); at != std::string_view::npos) url.remove_prefix(at + 1);
  if (url.starts_with('[')) {  // [IPv6]:port
    const size_t close = url.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    if (url.substr(1, close - 1).find_first_not_of("0123456789abcdefABCDEF:.") != std::string_view::npos) return false;
    const std::string_view rest = url.substr(close + 1);
    return rest.empty() || (rest.front() == ':' && IsPort(rest.substr(1)));
  }
  const size_t colon = url.find(':');
  const std::string_view host = url.substr(0, colon);
  const auto name_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
           c == '_';
  };
  if (host.empty() || !std::all_of(host.begin(), host.end(), name_char)) return false;
  return colon == std::string_view::npos || IsPort(url.substr(colon + 1));
}

std::string_view Trimmed(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

Status CheckNatsUrls(std::string_view urls) {
  if (Trimmed(urls).empty()) return Status::InvalidArgument("ConnectionOptions::url is empty: give a NATS server");
  for (size_t start = 0; start <= urls.size();) {
    const size_t comma = std::min(urls.find(',', start), urls.size());
    const std::string_view url = Trimmed(urls.substr(start, comma - start));
    if (!IsNatsUrl(url)) {
      return Status::InvalidArgument("ConnectionOptions::url: '" + std::string(url) +
                                     "' is not a NATS server address (nats://host:port, tls://host:port; "
                                     "several separated by commas)");
    }
    start = comma + 1;
  }
  return Status::OK();
}

Status CheckConnection(const jetstream::ConnectionOptions& options) {
  if (Status s = CheckNatsUrls(options.url); !s.ok()) return s;
  using std::chrono::milliseconds;
  const milliseconds hour = std::chrono::hours(1);
  return internal::CheckBounds("ConnectionOptions", {},
                               {
                                   {"request_timeout", options.request_timeout, milliseconds(1), hour},
                                   {"reconnect_wait", options.reconnect_wait, milliseconds(1), hour},
                               });
}

NatsLink::NatsLink(jetstream::ConnectionOptions options)
    : options_(std::move(options)), offline_since_(std::chrono::steady_clock::now()) {}

Status NatsLink::Open(const jetstream::ConnectionOptions& options, std::unique_ptr<NatsLink>* out) {
  out->reset();
  if (Status s = CheckConnection(options); !s.ok()) return s;
  std::unique_ptr<NatsLink> link(new NatsLink(options));
  natsStatus s = natsOptions_Create(&link->nats_options_);
  if (s == NATS_OK) s = natsOptions_SetURL(link->nats_options_, options.url.c_str());
  if (s == NATS_OK && !options.name.empty()) s = natsOptions_SetName(link->nats_options_, options.name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(link->nats_options_, options.request_timeout.count());
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(link->nats_options_, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectBufSize(link->nats_options_, kReconnectBufferBytes);
  if (s == NATS_OK)
    s = natsOptions_SetReconnectWait(link->nats_options_, std::max<int64_t>(1, options.reconnect_wait.count()));
  if (s == NATS_OK) s = natsOptions_SetDisconnectedCB(link->nats_options_, &NatsLink::OnDisconnected, link.get());
  if (s == NATS_OK) s = natsOptions_SetReconnectedCB(link->nats_options_, &NatsLink::OnConnected, link.get());
  if (s == NATS_OK) s = natsOptions_SetClosedCB(link->nats_options_, &NatsLink::OnClosed, link.get());
  if (s == NATS_OK)
    s = natsOptions_SetRetryOnFailedConnect(link->nats_options_, true, &NatsLink::OnConnected, link.get());
  if (s != NATS_OK) return FromNats(s, "set up the NATS client options");
  s = natsConnection_Connect(&link->conn_, link->nats_options_);
  if (s == NATS_OK) {
    link->SetConnected(true, link->conn_);
  } else if (s != NATS_NOT_YET_CONNECTED) {
    return FromNats(s, "connect to " + options.url);
  } else {
    MutexLock lock(&link->mu_);
    link->QueueChange({LogLevel::kWarning, "no NATS server answers at " + options.url + " yet; trying every " +
                                               std::to_string(std::max<int64_t>(1, options.reconnect_wait.count())) +
                                               " ms in the background"});
  }
  jsOptions jso;
  jsOptions_Init(&jso);
  jso.Wait = options.request_timeout.count();
  s = natsConnection_JetStream(&link->js_, link->conn_, &jso);
  if (s != NATS_OK) return FromNats(s, "open a JetStream context");
  *out = std::move(link);
  return Status::OK();
}

NatsLink::~NatsLink() {
  if (js_ != nullptr) jsCtx_Destroy(js_);
  if (conn_ != nullptr) {
    natsConnection_Close(conn_);
    {
      MutexLock lock(&mu_);
      while (!closed_) closed_cv_.Wait(&lock);
    }
    natsConnection_Destroy(conn_);
  }
  if (nats_options_ != nullptr) natsOptions_Destroy(nats_options_);
}

std::string NatsLink::server_id() const {
  char id[128] = {0};
  if (conn_ == nullptr || natsConnection_GetConnectedServerId(conn_, id, sizeof(id)) != NATS_OK) return {};
  return id;
}

void NatsLink::SetConnected(bool up, natsConnection* nc) {
  {
    MutexLock lock(&mu_);
    const bool was = connected_.load(std::memory_order_relaxed);
    if (was == up) return;
    const auto now = std::chrono::steady_clock::now();
    if (!closed_) NoteChange(up, nc, now);
    if (up) {
      offline_total_ += now - offline_since_;
      epoch_.fetch_add(1, std::memory_order_acq_rel);
      ever_connected_ = true;
    } else {
      offline_since_ = now;
      disconnects_.fetch_add(1, std::memory_order_relaxed);
    }
    connected_.store(up, std::memory_order_release);
  }
  MutexLock lock(&listener_mu_);
  if (listener_) listener_(up);
}

void NatsLink::NoteChange(bool up, natsConnection* nc, std::chrono::steady_clock::time_point now) {
  if (!up) {
    QueueChange(
        {LogLevel::kWarning, "connection to " + (server_.empty() ? options_.url : server_) + " lost; reconnecting"});
    return;
  }
  char url[256] = {0};
  if (nc != nullptr && natsConnection_GetConnectedUrl(nc, url, sizeof(url)) == NATS_OK && url[0] != '\0') {
    server_ = url;
  }
  const std::string server = server_.empty() ? options_.url : server_;
  if (!ever_connected_) {
    QueueChange({LogLevel::kInfo, "connected to " + server});
    return;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", std::chrono::duration<double>(now - offline_since_).count());
  QueueChange({LogLevel::kInfo, "connected to " + server + " again, after " + seconds + " s offline"});
}

void NatsLink::QueueChange(LinkChange change) {
  if (changes_.size() >= kMaxChanges) {
    changes_.erase(changes_.begin());
    ++changes_dropped_;
  }
  changes_.push_back(std::move(change));
  has_changes_.store(true, std::memory_order_release);
}

std::vector<LinkChange> NatsLink::TakeChanges() {
  std::vector<LinkChange> taken;
  if (!has_changes_.load(std::memory_order_acquire)) return taken;
  MutexLock lock(&mu_);
  has_changes_.store(false, std::memory_order_relaxed);
  if (changes_dropped_ > 0) {
    taken.push_back({LogLevel::kWarning, std::to_string(changes_dropped_) +
                                             " earlier changes of the connection were not logged (too many)"});
    changes_dropped_ = 0;
  }
  taken.insert(taken.end(), std::make_move_iterator(changes_.begin()), std::make_move_iterator(changes_.end()));
  changes_.clear();
  return taken;
}

void NatsLink::SetChangeListener(std::function<void(bool)> listener) {
  MutexLock lock(&listener_mu_);
  listener_ = std::move(listener);
}

void NatsLink::OnConnected(natsConnection* nc, void* self) { static_cast<NatsLink*>(self)->SetConnected(true, nc); }
void NatsLink::OnDisconnected(natsConnection*, void* self) {
  static_cast<NatsLink*>(self)->SetConnected(false, nullptr);
}

void NatsLink::OnClosed(natsConnection*, void* self) {
  auto* link = static_cast<NatsLink*>(self);
  link->SetConnected(false, nullptr);
  MutexLock lock(&link->mu_);
  link->closed_ = true;
  link->closed_cv_.NotifyAll();  // under the lock: the destructor waits for it
}

double NatsLink::offline_seconds() const {
  MutexLock lock(&mu_);
  auto total = offline_total_;
  if (!connected_.load(std::memory_order_relaxed)) total += std::chrono::steady_clock::now() - offline_since_;
  return std::chrono::duration<double>(total).count();
}

namespace {

// The subject filters of the stream `info` describes; destroys `info`.
void TakeSubjects(jsStreamInfo* info, std::vector<std::string>* subjects) {
  if (subjects != nullptr) {
    subjects->clear();
    if (info->Config != nullptr) {
      for (int i = 0; i < info->Config->SubjectsLen; ++i) subjects->emplace_back(info->Config->Subjects[i]);
    }
  }
  jsStreamInfo_Destroy(info);
}

}  // namespace

Status NatsLink::EnsureStream(const jetstream::StreamOptions& stream, bool* created,
                              std::vector<std::string>* subjects) {
  assert(js_ != nullptr);
  if (created != nullptr) *created = false;
  jsStreamInfo* info = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&info, js_, stream.name.c_str(), nullptr, &err);
  if (s == NATS_OK) {
    TakeSubjects(info, subjects);
    return Status::OK();
  }
  if (s != NATS_NOT_FOUND) return FromNats(s, "look up stream " + stream.name);
  if (stream.subjects.empty())
    return Status::InvalidArgument("stream " + stream.name + " is missing and has no subjects to create it with");
  std::vector<const char*> filters;
  for (const std::string& subject : stream.subjects) filters.push_back(subject.c_str());
  jsStreamConfig config;
  jsStreamConfig_Init(&config);
  config.Name = stream.name.c_str();
  config.Subjects = filters.data();
  config.SubjectsLen = static_cast<int>(filters.size());
  config.Storage = stream.memory_storage ? js_MemoryStorage : js_FileStorage;
  config.Duplicates = std::chrono::duration_cast<std::chrono::nanoseconds>(stream.duplicate_window).count();
  s = js_AddStream(&info, js_, &config, nullptr, &err);
  if (s == NATS_OK) {
    TakeSubjects(info, subjects);
    if (created != nullptr) *created = true;
    return Status::OK();
  }
  // Created meanwhile by another client: fine.
  if (js_GetStreamInfo(&info, js_, stream.name.c_str(), nullptr, &err) == NATS_OK) {
    TakeSubjects(info, subjects);
    return Status::OK();
  }
  return FromNats(s, "create stream " + stream.name);
}

Headers ReadHeaders(natsMsg* msg) {
  Headers headers;
  const char** keys = nullptr;
  int count = 0;
  if (natsMsgHeader_Keys(msg, &keys, &count) != NATS_OK) return headers;
  for (int i = 0; i < count; ++i) {
    const char* value = nullptr;
    if (natsMsgHeader_Get(msg, keys[i], &value) == NATS_OK && value != nullptr) headers[keys[i]] = value;
  }
  free(static_cast<void*>(keys));
  return headers;
}

}  // namespace walbus::bridge
