// walbus outbox ls|show, export, event and inbox check: the events in the
// outbox and where one stands.
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bus/util/escape.h"
#include "tools/walbus/commands.h"
#include "tools/walbus/inspect.h"
#include "tools/walbus/inspect_util.h"

namespace walbus::tools {
namespace {

namespace wi = walbus::internal;

// How outbox ls and export print entries.
enum class Listing : uint8_t { kTable, kJson, kCloudEvents, kCloudEventsDataJson };

int RunOutboxLs(const std::string& command, const std::string& dir, const wi::OutboxFilter& filter, size_t limit,
                Listing listing) {
  std::vector<wi::OutboxEntry> entries;
  if (Status s = wi::ListOutbox(dir, filter, &entries, ReadLimit(limit)); !s.ok()) return Fail(command, s);
  const bool truncated = Truncate(&entries, limit);
  if (listing == Listing::kCloudEvents || listing == Listing::kCloudEventsDataJson) {
    for (const auto& e : entries) {
      if (e.event_ok) {
        std::cout << wi::CloudEventJson(e.event, e.payload, listing == Listing::kCloudEventsDataJson) << "\n";
      } else {
        std::cerr << "walbus " << command << ": seq " << e.seq << " skipped, unreadable: " << e.error << "\n";
      }
    }
  } else if (listing == Listing::kJson) {
    for (const auto& e : entries) std::cout << wi::OutboxJson(e) << "\n";
  } else {
    std::cout << wi::OutboxTable(entries);
  }
  if (truncated) NoteTruncated(command, limit);
  return 0;
}

int RunOutboxShow(const std::string& dir, uint64_t seq, bool json) {
  wi::OutboxFilter filter;
  filter.from_seq = seq;
  filter.to_seq = seq;
  std::vector<wi::OutboxEntry> entries;
  if (Status s = wi::ListOutbox(dir, filter, &entries, 1); !s.ok()) return Fail("outbox show", s);
  if (entries.empty()) {
    std::cerr << "walbus outbox show: no outbox entry at seq " << seq << " (trimmed, or not committed yet)\n";
    return 1;
  }
  std::cout << (json ? wi::OutboxJson(entries[0]) + "\n" : wi::OutboxText(entries[0]));
  return 0;
}

int RunEvent(const std::string& dir, const std::string& id_text, bool json) {
  auto id = ParseEventId("event", id_text);
  if (!id) return 2;
  wi::EventStory story;
  bool found = false;
  if (Status s = wi::FindEventStory(dir, *id, &story, &found); !s.ok()) return Fail("event", s);
  if (!found) {
    std::cerr << "walbus event: no record of event " << id_text << "\n";
    // A dropped event leaves no record: say that it may be one.
    std::map<std::string, uint64_t> dropped;
    if (wi::ReadDroppedCounts(dir, &dropped).ok()) {
      for (const auto& [type, n] : dropped) {
        std::cerr << "walbus event: the disk budget dropped " << n << " events of " << wi::TextSafe(type)
                  << " (drop oldest); it may have been one of them\n";
      }
    }
    return 1;
  }
  std::cout << (json ? wi::EventStoryJson(story) + "\n" : wi::EventStoryText(story));
  return 0;
}

int RunInboxCheck(const std::string& dir, const std::string& subscriber, const std::string& id_text, bool json) {
  auto id = ParseEventId("inbox check", id_text);
  if (!id) return 2;
  bool handled = false;
  uint64_t seq = 0;
  int64_t at_ms = 0;
  if (Status s = wi::CheckInbox(dir, subscriber, *id, &handled, &seq, &at_ms); !s.ok()) return Fail("inbox check", s);
  // Without an inbox record the subscriber may still have passed the
  // event (a type it does not take): the word `walbus event` uses.
  bool passed = false;
  if (!handled) {
    wi::EventStory story;
    bool found = false;
    if (Status s = wi::FindEventStory(dir, *id, &story, &found); !s.ok()) return Fail("inbox check", s);
    for (const wi::DeliveryReport& d : story.deliveries) passed |= d.subscriber == subscriber && d.state == "passed";
    seq = story.seq;
  }
  const char* state = handled ? "handled" : passed ? "passed" : "none";
  if (json) {
    std::cout << "{\"subscriber\":" << wi::JsonString(subscriber) << ",\"event\":\"" << id->ToString()
              << "\",\"state\":\"" << state << "\",\"handled\":" << (handled ? "true" : "false");
    if (handled || passed) std::cout << ",\"seq\":" << seq;
    if (handled) std::cout << ",\"handled_at_ms\":" << at_ms;
    std::cout << "}\n";
  } else if (handled) {
    std::cout << subscriber << " completed event " << id->ToString() << " (seq " << seq << ") at "
              << wi::inspect_util::IsoTimeMs(at_ms) << "\n";
  } else if (passed) {
    std::cout << subscriber << " passed event " << id->ToString() << " (seq " << seq
              << "): not a type it takes, so it has no inbox record\n";
  } else {
    std::cout << subscriber << " has no record of event " << id->ToString() << "\n";
  }
  return handled || passed ? 0 : 1;
}

struct Values {
  std::string dir;
  bool json = false;
  size_t limit = kDefaultLimit;
  uint64_t seq = 0;
  bool data_json = false;
  std::string subscriber, event_id, since, until, format;
  wi::OutboxFilter filter;
};

// The filters outbox ls and export share.
void AddFilters(CLI::App* cmd, Values* v) {
  cmd->add_option("dir", v->dir, "Database directory")->required();
  cmd->add_option("--type", v->filter.type, "Only events of this type");
  cmd->add_option("--subject", v->filter.subject, "Only events of this subject");
  cmd->add_option("--from-seq", v->filter.from_seq, "Only from this sequence number on");
  cmd->add_option("--to-seq", v->filter.to_seq, "Only up to this sequence number");
  cmd->add_option("--since", v->since, "Only events at or after this RFC 3339 time");
  cmd->add_option("--until", v->until, "Only events before this RFC 3339 time");
  cmd->add_option("--limit", v->limit, "Show at most N entries; 0 for all")->capture_default_str();
}

int RunListing(const std::string& command, Values& v, Listing listing) {
  if (!ParseTimeOption(v.since, &v.filter.since) || !ParseTimeOption(v.until, &v.filter.until)) {
    std::cerr << "walbus " << command << ": --since and --until take RFC 3339 times, e.g. 2026-11-29T23:00:00Z\n";
    return 2;
  }
  return RunOutboxLs(command, v.dir, v.filter, v.limit, listing);
}

}  // namespace

void AddEventCommands(CLI::App* app, Runners* runners) {
  auto v = std::make_shared<Values>();
  CLI::App* outbox = app->add_subcommand("outbox", "Events still in the outbox (not yet passed by every subscriber)");
  outbox->require_subcommand(1);
  CLI::App* outbox_ls = outbox->add_subcommand("ls", "List outbox entries in order, with filters");
  AddFilters(outbox_ls, v.get());
  outbox_ls->add_flag("--json", v->json, "Print JSON Lines: one object per entry, with every field");
  CLI::App* outbox_show = outbox->add_subcommand("show", "Every field of one outbox entry");
  outbox_show->add_option("dir", v->dir, "Database directory")->required();
  outbox_show->add_option("--seq", v->seq, "Sequence number")->required();
  outbox_show->add_flag("--json", v->json, "Print one JSON object");

  CLI::App* event = app->add_subcommand(
      "event",
      "One event's story: the event, where it stands for each subscriber (handled when, retrying, dead "
      "letter), and its follow-ups");
  event->add_option("dir", v->dir, "Database directory")->required();
  event->add_option("id", v->event_id, "Event id")->required();
  event->add_flag("--json", v->json, "Print one JSON object");

  CLI::App* inbox = app->add_subcommand("inbox", "The subscribers' records of completed events");
  inbox->require_subcommand(1);
  CLI::App* inbox_check = inbox->add_subcommand(
      "check",
      "Whether a subscriber completed an event or passed it (a type it does not take) (exit 0), or has no "
      "record of it (exit 1)");
  inbox_check->add_option("dir", v->dir, "Database directory")->required();
  inbox_check->add_option("--subscriber", v->subscriber, "Subscriber name")->required();
  inbox_check->add_option("--event", v->event_id, "Event id")->required();
  inbox_check->add_flag("--json", v->json, "Print one JSON object");

  CLI::App* export_cmd = app->add_subcommand(
      "export",
      "Outbox events in the CloudEvents JSON event format, one per line (binary data as data_base64; the "
      "dataschema of a type with a schema)");
  AddFilters(export_cmd, v.get());
  export_cmd->add_option("--format", v->format, "Output format")
      ->required()
      ->check(CLI::IsMember({"cloudevents-json"}));
  export_cmd->add_flag("--data-json", v->data_json,
                       "Write the data of a type with a schema as JSON (datacontenttype application/json), not bytes");

  runners->push_back([=]() -> std::optional<int> {
    if (outbox_ls->parsed()) return RunListing("outbox ls", *v, v->json ? Listing::kJson : Listing::kTable);
    if (export_cmd->parsed()) {
      return RunListing("export", *v, v->data_json ? Listing::kCloudEventsDataJson : Listing::kCloudEvents);
    }
    if (outbox_show->parsed()) return RunOutboxShow(v->dir, v->seq, v->json);
    if (event->parsed()) return RunEvent(v->dir, v->event_id, v->json);
    if (inbox_check->parsed()) return RunInboxCheck(v->dir, v->subscriber, v->event_id, v->json);
    return std::nullopt;
  });
}

}  // namespace walbus::tools
