// The inbound consumer: a durable pull consumer feeding Bus::IngestEvent.
#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "bridge/cloudevents.h"
#include "bridge/nats_link.h"
#include "bus/log_limiter.h"
#include "bus/metrics.h"
#include "walbus/jetstream.h"

namespace walbus::jetstream {
namespace {

using bridge::NatsLink;
using namespace std::chrono_literals;

bool TypeAllowed(const std::vector<std::string>& allowed, const std::string& type) {
  for (const std::string& a : allowed) {
    if (a == type) return true;
    if (a.size() >= 2 && a.ends_with(".*") && type.starts_with(std::string_view(a).substr(0, a.size() - 1))) {
      return true;
    }
  }
  return false;
}

class InboundImpl final : public Inbound {
 public:
  InboundImpl(Bus* bus, InboundOptions options, std::unique_ptr<NatsLink> link)
      : bus_(bus), options_(std::move(options)), link_(std::move(link)),
        source_label_("jetstream:" + options_.stream + "/" + options_.durable) {
    thread_ = std::thread([this] { Run(); });
  }
  ~InboundImpl() override { Stop(); }

  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    // Destroy, never Unsubscribe: that would delete the durable consumer.
    if (sub_ != nullptr) natsSubscription_Destroy(sub_);
    sub_ = nullptr;
    link_.reset();
  }

  InboundStats Stats() const override {
    InboundStats s;
    s.connected = connected_.load(std::memory_order_relaxed);
    s.received = received_.load(std::memory_order_relaxed);
    s.ingested = ingested_.load(std::memory_order_relaxed);
    s.duplicates = duplicates_.load(std::memory_order_relaxed);
    s.skipped = skipped_.load(std::memory_order_relaxed);
    s.quarantined = quarantined_.load(std::memory_order_relaxed);
    s.naks = naks_.load(std::memory_order_relaxed);
    return s;
  }

  std::string MetricsText() const override {
    const InboundStats s = Stats();
    const std::string label = internal::MetricsWriter::Label("consumer", options_.durable);
    internal::MetricsWriter w;
    w.Family("walbus_inbound_connected", "gauge", "1 while the consumer is connected to NATS.");
    w.Sample("walbus_inbound_connected", label, s.connected ? 1 : 0);
    const struct {
      const char* name;
      const char* help;
      uint64_t value;
    } counters[] = {
        {"walbus_inbound_received_total", "Messages fetched.", s.received},
        {"walbus_inbound_ingested_total", "Messages committed into the bus.", s.ingested},
        {"walbus_inbound_duplicates_total", "Messages already taken, acknowledged without effect.", s.duplicates},
        {"walbus_inbound_skipped_total", "The bus's own events, acknowledged without effect.", s.skipped},
        {"walbus_inbound_quarantined_total", "Messages refused, quarantined and terminated.", s.quarantined},
        {"walbus_inbound_naks_total", "Local failures; the message comes again later.", s.naks},
    };
    for (const auto& c : counters) {
      w.Family(c.name, "counter", c.help);
      w.Sample(c.name, label, static_cast<double>(c.value));
    }
    return w.text();
  }

 private:
  bool Sleep(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu_);
    return !wake_.wait_for(lock, d, [this] { return stopping_; });
  }
  bool stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }

  // Owned thread: subscribes once connected, then fetches until Stop().
  void Run() {
    while (!stopping()) {
      connected_.store(link_->connected(), std::memory_order_relaxed);
      if (!link_->connected()) {
        Sleep(50ms);
        continue;
      }
      if (sub_ == nullptr) {
        if (Status s = Subscribe(); !s.ok()) {
          Warn("subscribe", s);
          Sleep(500ms);
          continue;
        }
      }
      natsMsgList list{};
      jsErrCode err = static_cast<jsErrCode>(0);
      natsStatus s = natsSubscription_Fetch(&list, sub_, options_.fetch_batch, options_.fetch_wait.count(), &err);
      if (s == NATS_TIMEOUT) continue;
      if (s != NATS_OK) {
        Warn("fetch", bridge::FromNats(s, "fetch from " + options_.durable));
        Sleep(100ms);
        continue;
      }
      for (int i = 0; i < list.Count; ++i) Process(list.Msgs[i]);
      natsMsgList_Destroy(&list);
    }
  }

  Status Subscribe() {
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = options_.stream.c_str();
    so.Config.Durable = options_.durable.c_str();
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.AckWait = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.ack_wait).count();
    so.Config.DeliverPolicy = js_DeliverAll;
    jsErrCode err = static_cast<jsErrCode>(0);
    natsStatus s = js_PullSubscribe(&sub_, link_->js(), options_.filter_subject.c_str(), options_.durable.c_str(),
                                    nullptr, &so, &err);
    if (s != NATS_OK) {
      sub_ = nullptr;
      return bridge::FromNats(s, "pull subscribe " + options_.durable + " on " + options_.stream);
    }
    return Status::OK();
  }

  // Why a message must not be trusted; empty when it may be.
  std::string Refusal(const bridge::Headers& headers, size_t bytes, const Event& event) const {
    if (bytes > options_.max_message_bytes) {
      return "message of " + std::to_string(bytes) + " bytes exceeds the cap of " +
             std::to_string(options_.max_message_bytes);
    }
    auto signature = headers.find(std::string(bridge::kSignatureHeader));
    if (signature == headers.end()) {
      if (options_.require_signature) return "unsigned message; a signature is required";
    } else {
      auto key_id = headers.find(std::string(bridge::kKeyIdHeader));
      if (key_id == headers.end()) return "signature without a key id";
      auto key = options_.keys.find(key_id->second);
      if (key == options_.keys.end()) return "signed with unknown key '" + key_id->second + "'";
      auto bound = options_.key_id_by_source.find(event.source);
      if (bound != options_.key_id_by_source.end() && bound->second != key_id->second) {
        return "key '" + key_id->second + "' may not sign for source '" + event.source + "'";
      }
      if (!bridge::SignatureMatches(event, key->second, signature->second)) return "signature does not match";
    }
    if (!options_.allowed_types_by_source.empty()) {
      auto allowed = options_.allowed_types_by_source.find(event.source);
      if (allowed == options_.allowed_types_by_source.end()) return "source '" + event.source + "' is not authorized";
      if (!TypeAllowed(allowed->second, event.type)) {
        return "source '" + event.source + "' may not publish type '" + event.type + "'";
      }
    }
    return {};
  }

  void Process(natsMsg* msg) {
    received_.fetch_add(1, std::memory_order_relaxed);
    const bridge::Headers headers = bridge::ReadHeaders(msg);
    const char* data = natsMsg_GetData(msg);
    const std::string body(data == nullptr ? "" : data, static_cast<size_t>(natsMsg_GetDataLength(msg)));
    size_t bytes = body.size();
    for (const auto& [name, value] : headers) bytes += name.size() + value.size() + 4;

    Event event;
    std::string refusal;
    if (bytes > options_.max_message_bytes) {
      refusal = Refusal(headers, bytes, event);
    } else if (Status parsed = bridge::FromHeaders(headers, body, &event); !parsed.ok()) {
      refusal = parsed.message();
    } else {
      refusal = Refusal(headers, bytes, event);
    }
    if (!refusal.empty()) {
      const std::string raw = bridge::MessageBytes(headers, body.substr(0, std::min(body.size(), size_t{64} << 10)));
      if (Status q = bus_->Quarantine(raw, source_label_, refusal); !q.ok()) {
        Nak(msg, q);  // Keep it on the server until it can be recorded.
        return;
      }
      quarantined_.fetch_add(1, std::memory_order_relaxed);
      natsMsg_Term(msg, nullptr);
      return;
    }
    if (!options_.skip_source.empty() && event.source == options_.skip_source) {
      skipped_.fetch_add(1, std::memory_order_relaxed);
      natsMsg_Ack(msg, nullptr);
      return;
    }
    IngestOptions ingest;
    ingest.source = source_label_;
    ingest.dedup_scope = options_.durable;
    Result<IngestResult> r = bus_->IngestEvent(event, ingest);
    if (r.ok()) {
      (r->duplicate ? duplicates_ : ingested_).fetch_add(1, std::memory_order_relaxed);
      // A lost ack only brings the message back, and the dedup record
      // makes that a duplicate.
      natsMsg_Ack(msg, nullptr);
    } else if (r.status().code() == Status::Code::kInvalidArgument) {
      quarantined_.fetch_add(1, std::memory_order_relaxed);  // the bus quarantined it
      natsMsg_Term(msg, nullptr);
    } else {
      Nak(msg, r.status());
    }
  }

  void Nak(natsMsg* msg, const Status& why) {
    naks_.fetch_add(1, std::memory_order_relaxed);
    Warn("take a message in", why);
    natsMsg_NakWithDelay(msg, options_.nak_delay.count(), nullptr);
  }

  void Warn(const char* what, const Status& why) {
    static internal::LogLimiter limiter(1);
    uint64_t held = 0;
    if (limiter.Allow(&held)) {
      spdlog::warn("walbus inbound {}: could not {}: {} ({} similar lines held back)", options_.durable, what,
                   why.ToString(), held);
    }
  }

  Bus* const bus_;
  const InboundOptions options_;
  std::unique_ptr<NatsLink> link_;
  const std::string source_label_;
  natsSubscription* sub_ = nullptr;  // used by thread_ alone, then by Stop()
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // GUARDED_BY(mu_)
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> received_{0}, ingested_{0}, duplicates_{0}, skipped_{0}, quarantined_{0}, naks_{0};
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace

Inbound::~Inbound() = default;

Status Inbound::Start(Bus* bus, InboundOptions options, std::unique_ptr<Inbound>* out) {
  out->reset();
  if (bus == nullptr) return Status::InvalidArgument("no bus given");
  if (options.stream.empty() || options.durable.empty()) {
    return Status::InvalidArgument("an inbound consumer needs a stream and a durable name");
  }
  if (options.filter_subject.empty()) return Status::InvalidArgument("an inbound consumer needs a filter subject");
  if (options.fetch_batch < 1 || options.fetch_wait.count() < 1) {
    return Status::InvalidArgument("fetch_batch and fetch_wait must be positive");
  }
  std::unique_ptr<NatsLink> link;
  if (Status s = NatsLink::Open(options.connection, &link); !s.ok()) return s;
  *out = std::make_unique<InboundImpl>(bus, std::move(options), std::move(link));
  return Status::OK();
}

}  // namespace walbus::jetstream
