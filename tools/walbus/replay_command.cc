// walbus replay DIR: start a replay (a recorded operator action), or show
// (--status) or stop (--cancel) one, through the admin socket.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tools/walbus/admin_action.h"
#include "tools/walbus/commands.h"

namespace walbus::tools {
namespace {

// Every value is passed on as typed: the request check is the one place
// that reads numbers and times.
struct Values {
  std::string dir;
  bool json = false, dry_run = false;
  std::string subscriber, mode, from_seq, to_seq, since, until, subject, max, operator_name, reason, status_id,
      cancel_id;
  std::vector<std::string> types, ids, clear;
};

// The options that make a replay request, beside --status and --cancel.
struct RequestOptions {
  CLI::Option *subscriber, *mode, *from, *to, *since, *until, *types, *subject, *ids, *max, *clear, *operator_name,
      *reason, *dry_run, *status, *cancel;

  bool AnyRequestOption() const {
    const CLI::Option* request[] = {subscriber, mode, from, to, since, until, types, subject, ids, max, clear, dry_run};
    return std::any_of(std::begin(request), std::end(request), [](const CLI::Option* o) { return o->count() > 0; });
  }
};

int RunReplay(const RequestOptions& o, const Values& v) {
  AdminFields fields;
  if (o.status->count() > 0) {
    if (o.cancel->count() > 0 || o.AnyRequestOption() || o.operator_name->count() > 0 || o.reason->count() > 0) {
      std::cerr << "walbus replay: --status takes no other option but --json\n";
      return 2;
    }
    AddGiven(&fields, o.status, "replay", v.status_id);
    return RunAdmin("replay", v.dir, "replay-status", fields, v.json);
  }
  if (o.cancel->count() > 0) {
    if (o.AnyRequestOption()) {
      std::cerr << "walbus replay: --cancel takes only --operator, --reason and --json\n";
      return 2;
    }
    AddGiven(&fields, o.cancel, "replay", v.cancel_id);
    AddGiven(&fields, o.operator_name, "operator", v.operator_name);
    AddGiven(&fields, o.reason, "reason", v.reason);
    return RunAdmin("replay", v.dir, "replay-cancel", fields, v.json);
  }
  AddGiven(&fields, o.subscriber, "subscriber", v.subscriber);
  AddGiven(&fields, o.mode, "mode", v.mode);
  AddGiven(&fields, o.from, "from-seq", v.from_seq);
  AddGiven(&fields, o.to, "to-seq", v.to_seq);
  AddGiven(&fields, o.since, "since", v.since);
  AddGiven(&fields, o.until, "until", v.until);
  AddGiven(&fields, o.types, "type", v.types);
  AddGiven(&fields, o.subject, "subject", v.subject);
  AddGiven(&fields, o.ids, "id", v.ids);
  AddGiven(&fields, o.max, "max", v.max);
  AddGiven(&fields, o.clear, "clear", v.clear);
  AddGiven(&fields, o.operator_name, "operator", v.operator_name);
  AddGiven(&fields, o.reason, "reason", v.reason);
  if (v.dry_run) fields.emplace_back("dry-run", "true");
  return RunAdmin("replay", v.dir, "replay", fields, v.json);
}

}  // namespace

void AddReplayCommand(CLI::App* app, Runners* runners) {
  auto v = std::make_shared<Values>();
  CLI::App* replay = app->add_subcommand(
      "replay",
      "Run retained events through one subscriber again, as a recorded operator action: in the running "
      "process (through its admin socket), or, on a stopped database, once the application next runs the "
      "subscriber. Or show (--status) or stop (--cancel) a replay.");
  replay->add_option("dir", v->dir, "Database directory")->required();
  RequestOptions o;
  o.subscriber = replay->add_option("--subscriber", v->subscriber, "The subscriber to replay to");
  o.mode = replay->add_option("--mode", v->mode,
                              "same-inbox (default: events it handled are skipped) or "
                              "fresh-scope (all run again; side-effect-safe handlers)");
  o.from = replay->add_option("--from-seq", v->from_seq, "From this sequence number on");
  o.to = replay->add_option("--to-seq", v->to_seq, "Up to this sequence number");
  o.since = replay->add_option("--since", v->since, "Events at or after this RFC 3339 time");
  o.until = replay->add_option("--until", v->until, "Events before this RFC 3339 time");
  o.types = replay->add_option("--type", v->types, "Events of this type; repeat for more")
                ->allow_extra_args(false)
                ->take_all();
  o.subject = replay->add_option("--subject", v->subject, "Events of this subject");
  o.ids = replay->add_option("--id", v->ids, "This event; repeat for more")->allow_extra_args(false)->take_all();
  o.max = replay->add_option("--max", v->max, "At most this many events");
  o.clear = replay
                ->add_option("--clear", v->clear,
                             "A rebuild: clear this column family (the projection) in the commit that records the "
                             "replay; repeat for more. Needs --mode fresh-scope, no filters, the whole history "
                             "kept, and the subscriber not running")
                ->allow_extra_args(false)
                ->take_all();
  o.operator_name = replay->add_option("--operator", v->operator_name, "Who acts (recorded)");
  o.reason = replay->add_option("--reason", v->reason, "Why (recorded)");
  o.dry_run = replay->add_flag("--dry-run", v->dry_run, "Show what would run; change nothing");
  o.status = replay->add_option("--status", v->status_id, "Show the replay with this id");
  o.cancel = replay->add_option("--cancel", v->cancel_id, "Stop the replay with this id");
  replay->add_flag("--json", v->json, "Print the report as one JSON object");
  runners->push_back([replay, o, v]() -> std::optional<int> {
    if (!replay->parsed()) return std::nullopt;
    return RunReplay(o, *v);
  });
}

}  // namespace walbus::tools
