#include "tools/walbus/admin_client.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <sstream>

#include "bus/ops/admin_server.h"
#include "bus/ops/socket_server.h"
#include "bus/util/escape.h"
#include "bus/util/utf8.h"
#include "tools/walbus/inspect_util.h"

namespace walbus::internal {
namespace {

// Largest reply the client reads: a dry run over a large dead-letter
// store lists every seq it selected.
constexpr size_t kMaxReplyBytes = 64u << 20;
// How long the client waits for a reply: the process runs the request
// before it answers (a dry run reads every dead letter it selects).
constexpr std::chrono::seconds kAdminReplyTimeout{60};

// The inverse of the server's unescaping: '%', '\n' and '\r' as %25, %0A
// and %0D.
std::string Escape(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (char c : in) {
    switch (c) {
      case '%': out += "%25"; break;
      case '\n': out += "%0A"; break;
      case '\r': out += "%0D"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

Status StatusOf(std::string_view name, std::string message) {
  using C = Status::Code;
  for (C code : {C::kInvalidArgument, C::kNotFound, C::kConflict, C::kBusy, C::kIOError, C::kCorruption,
                 C::kNotSupported, C::kClosed, C::kTimedOut, C::kResourceExhausted}) {
    if (name != CodeName(code)) continue;
    switch (code) {
      case C::kInvalidArgument: return Status::InvalidArgument(std::move(message));
      case C::kNotFound: return Status::NotFound(std::move(message));
      case C::kConflict: return Status::Conflict(std::move(message));
      case C::kBusy: return Status::Busy(std::move(message));
      case C::kIOError: return Status::IOError(std::move(message));
      case C::kCorruption: return Status::Corruption(std::move(message));
      case C::kNotSupported: return Status::NotSupported(std::move(message));
      case C::kClosed: return Status::Closed(std::move(message));
      case C::kTimedOut: return Status::TimedOut(std::move(message));
      default: return Status::ResourceExhausted(std::move(message));
    }
  }
  return Status::OK();  // not a code name
}

// Reads the flat JSON objects this file writes (string, number, boolean
// and null values, and arrays of them) for AdminReplyText.
class FlatJson {
 public:
  explicit FlatJson(std::string_view s) : s_(s) {}

  // One "label  value" line per member; false when `s` is not such an
  // object.
  bool Render(std::ostringstream& o) {
    if (!Take('{')) return false;
    if (!Take('}')) {
      do {
        std::string key, value;
        if (!String(&key) || !Take(':') || !Value(&value)) return false;
        std::replace(key.begin(), key.end(), '_', ' ');
        inspect_util::Field(o, TextSafe(key), value);
      } while (Take(','));
      if (!Take('}')) return false;
    }
    Space();
    return i_ == s_.size();
  }

 private:
  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool Take(char c) {
    Space();
    if (i_ >= s_.size() || s_[i_] != c) return false;
    ++i_;
    return true;
  }
  bool String(std::string* out) {
    if (!Take('"')) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] != '\\') {
        out->push_back(s_[i_++]);
        continue;
      }
      if (++i_ >= s_.size()) return false;
      const char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/': out->push_back(e); break;
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'u': {
          uint32_t cp = 0;
          if (s_.size() - i_ < 4) return false;
          auto [end, ec] = std::from_chars(s_.data() + i_, s_.data() + i_ + 4, cp, 16);
          if (ec != std::errc() || end != s_.data() + i_ + 4) return false;
          i_ += 4;
          AppendUtf8(cp, out);  // a lone surrogate becomes U+FFFD
          break;
        }
        default: return false;
      }
    }
    return Take('"');
  }
  bool Scalar(std::string* out) {
    Space();
    if (i_ < s_.size() && s_[i_] == '"') {
      std::string text;
      if (!String(&text)) return false;
      *out = text.empty() ? "-" : TextSafe(text);
      return true;
    }
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != '\0' && std::strchr("0123456789+-.eEtruefalsn", s_[i_]) != nullptr) ++i_;
    const std::string_view token = s_.substr(start, i_ - start);
    if (token.empty()) return false;
    *out = token == "null" ? "-" : std::string(token);
    return true;
  }
  bool Value(std::string* out) {
    if (!Take('[')) return Scalar(out);
    if (Take(']')) {
      *out = "none";
      return true;
    }
    do {
      std::string item;
      if (!Scalar(&item)) return false;
      if (!out->empty()) *out += ", ";
      *out += item;
    } while (Take(','));
    return Take(']');
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::string FormatAdminRequest(std::string_view verb, const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out(verb);
  out += "\n";
  for (const auto& [key, value] : fields) out += key + "=" + Escape(value) + "\n";
  return out + "\n";
}

Status ParseAdminReply(std::string_view text, AdminReply* out) {
  *out = AdminReply{};
  const size_t nl = text.find('\n');
  if (nl == std::string_view::npos || text.back() != '\n')
    return Status::InvalidArgument("not an admin reply (no line end)");
  const std::string_view first = text.substr(0, nl);
  std::string_view rest = text.substr(nl + 1);
  if (!rest.empty()) rest.remove_suffix(1);  // the final '\n'
  std::string body(rest);
  if (first == "ok") {
    out->body = std::move(body);
    return Status::OK();
  }
  if (first.starts_with("error ")) {
    Status s = StatusOf(first.substr(6), body);
    if (!s.ok()) {
      out->status = std::move(s);
      out->body = std::move(body);
      return Status::OK();
    }
  }
  return Status::InvalidArgument("not an admin reply: it starts with " + QuotedForMessage(first));
}

std::string AdminReplyText(std::string_view json) {
  std::ostringstream o;
  FlatJson reader(json);
  if (!reader.Render(o)) return TextSafe(json) + "\n";
  return o.str();
}

Status CallAdminSocket(const std::string& dir, std::string_view request, std::string* reply, bool* listening) {
  reply->clear();
  *listening = false;
  const std::string path = AdminSocketPath(dir);
  sockaddr_un addr;
  if (!UnixSocketAddress(path, &addr)) return Status::OK();  // no server can listen there
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("admin socket");
  // The send timeout bounds connect() too (a listener with a full backlog).
  timeval send_timeout{static_cast<time_t>(SocketServer::kIoTimeout.count()), 0};
  timeval reply_timeout{static_cast<time_t>(kAdminReplyTimeout.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &reply_timeout, sizeof reply_timeout);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == ENOENT || err == ECONNREFUSED || err == ENOTDIR) return Status::OK();
    errno = err;
    if (err == EACCES || err == EPERM) {
      return ErrnoStatus("cannot connect to " + path + " (it is for the user the process runs as)");
    }
    return ErrnoStatus("cannot connect to " + path);
  }
  *listening = true;
  std::string_view left = request;
  while (!left.empty()) {
    const ssize_t n = ::send(fd, left.data(), left.size(), MSG_NOSIGNAL);
    if (n <= 0) break;  // the process may have answered already (a refusal): read it
    left.remove_prefix(static_cast<size_t>(n));
  }
  char buf[16384];
  Status s;
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      // The process answered and closed without reading all we sent (it
      // refused an oversized request): its reply is whole.
      if (errno == ECONNRESET && !reply->empty()) break;
      s = errno == EAGAIN || errno == EWOULDBLOCK ? Status::IOError("no reply from " + path + " within " +
                                                                    std::to_string(kAdminReplyTimeout.count()) + " s")
                                                  : ErrnoStatus("reading the reply from " + path);
      break;
    }
    reply->append(buf, static_cast<size_t>(n));
    if (reply->size() > kMaxReplyBytes) {
      s = Status::IOError("the reply from " + path + " is larger than " + std::to_string(kMaxReplyBytes) + " bytes");
      break;
    }
  }
  ::close(fd);
  if (s.ok() && reply->empty())
    s = Status::IOError("the process on " + path + " closed the connection without a reply");
  if (!s.ok()) reply->clear();
  return s;
}

}  // namespace walbus::internal
