// The relay: a subscriber whose effect is a JetStream publish.
#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "bridge/cloudevents.h"
#include "bridge/nats_link.h"
#include "bus/log_limiter.h"
#include "bus/metrics.h"
#include "walbus/jetstream.h"

namespace walbus::jetstream {
namespace {

using bridge::NatsLink;

// What the relay's handler needs; shared by the Relay and the subscriber's
// handler, so that either may go first.
class RelayCore {
 public:
  RelayCore(RelayOptions options, std::unique_ptr<NatsLink> link)
      : options_(std::move(options)), link_(std::move(link)) {}

  Outcome Handle(const Event& event) {
    if (!options_.only_source.empty() && event.source != options_.only_source) {
      skipped_.fetch_add(1, std::memory_order_relaxed);
      return Outcome::Done();
    }
    // Offline: wait with backoff rather than queue publishes in the client.
    if (!link_->connected()) return Outcome::RetryAfter(std::chrono::milliseconds(0));
    if (Status s = EnsureStreamOnce(); !s.ok()) return Failed(event, s);
    Status published = Publish(event);
    if (!published.ok()) return Failed(event, published);
    return Outcome::Done();
  }

  RelayStats Stats() const {
    RelayStats s;
    s.connected = link_->connected();
    s.published = published_.load(std::memory_order_relaxed);
    s.duplicates = duplicates_.load(std::memory_order_relaxed);
    s.skipped = skipped_.load(std::memory_order_relaxed);
    s.publish_errors = errors_.load(std::memory_order_relaxed);
    s.disconnects = link_->disconnects();
    s.offline_seconds = link_->offline_seconds();
    return s;
  }

  const RelayOptions& options() const { return options_; }

 private:
  Status EnsureStreamOnce() {
    if (stream_ready_.load(std::memory_order_acquire)) return Status::OK();
    std::lock_guard<std::mutex> lock(stream_mu_);
    if (stream_ready_.load(std::memory_order_relaxed)) return Status::OK();
    Status s = link_->EnsureStream(options_.stream);
    if (s.ok()) stream_ready_.store(true, std::memory_order_release);
    return s;
  }

  Status Publish(const Event& event) {
    const std::string subject =
        options_.subject_for ? options_.subject_for(event) : bridge::DefaultSubject(options_.subject_prefix, event);
    natsMsg* msg = nullptr;
    natsStatus s = natsMsg_Create(&msg, subject.c_str(), nullptr, event.data.data(), static_cast<int>(event.data.size()));
    if (s != NATS_OK) return bridge::FromNats(s, "make a message on " + subject);
    bridge::Headers headers = bridge::ToHeaders(event);
    if (!options_.signing.secret.empty()) {
      headers[std::string(bridge::kKeyIdHeader)] = options_.signing.key_id;
      headers[std::string(bridge::kSignatureHeader)] = bridge::Sign(event, options_.signing.secret);
    }
    for (const auto& [name, value] : headers) {
      if (s == NATS_OK) s = natsMsgHeader_Set(msg, name.c_str(), value.c_str());
    }
    jsPubOptions publish;
    jsPubOptions_Init(&publish);
    const std::string id = event.id.ToString();
    publish.MsgId = id.c_str();
    publish.MaxWait = options_.connection.request_timeout.count();
    jsPubAck* ack = nullptr;
    jsErrCode err = static_cast<jsErrCode>(0);
    if (s == NATS_OK) s = js_PublishMsg(&ack, link_->js(), msg, &publish, &err);
    natsMsg_Destroy(msg);
    if (s != NATS_OK) {
      if (err != 0) return Status::IOError("publish " + id + " to " + subject + ": JetStream error " + std::to_string(err));
      return bridge::FromNats(s, "publish " + id + " to " + subject);
    }
    published_.fetch_add(1, std::memory_order_relaxed);
    if (ack->Duplicate) duplicates_.fetch_add(1, std::memory_order_relaxed);
    jsPubAck_Destroy(ack);
    return Status::OK();
  }

  Outcome Failed(const Event& event, const Status& why) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    static internal::LogLimiter limiter(1);
    uint64_t held = 0;
    if (limiter.Allow(&held)) {
      spdlog::warn("walbus relay: event {} waits: {} ({} similar lines held back)", event.id.ToString(),
                   why.ToString(), held);
    }
    return Outcome::RetryAfter(std::chrono::milliseconds(0));
  }

  const RelayOptions options_;
  const std::unique_ptr<NatsLink> link_;
  std::mutex stream_mu_;
  std::atomic<bool> stream_ready_{false};
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> duplicates_{0};
  std::atomic<uint64_t> skipped_{0};
  std::atomic<uint64_t> errors_{0};
};

class RelayImpl final : public Relay {
 public:
  explicit RelayImpl(std::shared_ptr<RelayCore> core) : core_(std::move(core)) {}
  RelayStats Stats() const override { return core_->Stats(); }

  std::string MetricsText() const override {
    const RelayStats s = core_->Stats();
    const std::string label = internal::MetricsWriter::Label("relay", core_->options().subscriber_name);
    internal::MetricsWriter w;
    w.Family("walbus_relay_connected", "gauge", "1 while the relay is connected to NATS.");
    w.Sample("walbus_relay_connected", label, s.connected ? 1 : 0);
    w.Family("walbus_relay_published_total", "counter", "Events JetStream acknowledged.");
    w.Sample("walbus_relay_published_total", label, static_cast<double>(s.published));
    w.Family("walbus_relay_duplicates_total", "counter", "Republished events JetStream recognised by their id.");
    w.Sample("walbus_relay_duplicates_total", label, static_cast<double>(s.duplicates));
    w.Family("walbus_relay_publish_errors_total", "counter", "Publishes that failed and wait for a retry.");
    w.Sample("walbus_relay_publish_errors_total", label, static_cast<double>(s.publish_errors));
    w.Family("walbus_relay_disconnects_total", "counter", "Times the connection to NATS was lost.");
    w.Sample("walbus_relay_disconnects_total", label, static_cast<double>(s.disconnects));
    w.Family("walbus_relay_offline_seconds_total", "counter", "Time spent without a connection to NATS.");
    w.Sample("walbus_relay_offline_seconds_total", label, s.offline_seconds);
    return w.text();
  }

 private:
  std::shared_ptr<RelayCore> core_;
};

}  // namespace

Relay::~Relay() = default;

Status Relay::Attach(Bus* bus, RelayOptions options, std::unique_ptr<Relay>* out) {
  out->reset();
  if (bus == nullptr) return Status::InvalidArgument("no bus given");
  if (options.stream.name.empty()) return Status::InvalidArgument("no stream name given");
  if (options.subject_prefix.empty() && !options.subject_for) {
    return Status::InvalidArgument("no subject prefix and no subject mapping given");
  }
  std::unique_ptr<NatsLink> link;
  if (Status s = NatsLink::Open(options.connection, &link); !s.ok()) return s;
  auto core = std::make_shared<RelayCore>(options, std::move(link));
  SubscriberOptions subscriber;
  subscriber.name = options.subscriber_name;
  subscriber.types = options.types;
  subscriber.retry = options.retry;
  subscriber.handler = [core](const Event& event, HandlerContext&) { return core->Handle(event); };
  if (Status s = bus->Subscribe(std::move(subscriber)); !s.ok()) return s;
  *out = std::make_unique<RelayImpl>(std::move(core));
  return Status::OK();
}

}  // namespace walbus::jetstream
