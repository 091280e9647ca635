// walbus dlq ls|show (read the dead-letter store) and dlq
// redrive|skip|purge (operator actions on it, through the admin socket).
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tools/walbus/admin_action.h"
#include "tools/walbus/commands.h"
#include "tools/walbus/inspect.h"

namespace walbus::tools {
namespace {

namespace wi = walbus::internal;

int RunDlqLs(const std::string& dir, const std::string& subscriber, size_t limit, bool json) {
  std::vector<wi::DeadLetterEntry> entries;
  if (Status s = wi::ListDeadLetters(dir, subscriber, &entries, ReadLimit(limit)); !s.ok()) return Fail("dlq ls", s);
  const bool truncated = Truncate(&entries, limit);
  if (json) {
    for (const auto& e : entries) std::cout << wi::DeadLetterJson(e) << "\n";
  } else {
    std::cout << wi::DeadLetterTable(entries);
  }
  if (truncated) NoteTruncated("dlq ls", limit);
  return 0;
}

int RunDlqShow(const std::string& dir, const std::string& subscriber, uint64_t seq, bool json) {
  wi::DeadLetterEntry entry;
  bool found = false;
  if (Status s = wi::FindDeadLetter(dir, subscriber, seq, &entry, &found); !s.ok()) return Fail("dlq show", s);
  if (!found) {
    std::cerr << "walbus dlq show: no dead letter of subscriber " << subscriber << " at seq " << seq << "\n";
    return 1;
  }
  std::cout << (json ? wi::DeadLetterJson(entry) + "\n" : wi::DeadLetterText(entry));
  return 0;
}

struct Values {
  std::string dir;
  bool json = false;
  std::string subscriber;
  size_t limit = kDefaultLimit;
  uint64_t seq = 0;
  // The actions. Numbers are passed on as typed: the request check
  // (strict decimal) is the one place that reads them.
  std::vector<std::string> seq_texts;
  std::string type, subject, operator_name, reason;
  bool all = false, dry_run = false;
};

// One of redrive, skip and purge: its options, so the run knows which
// selection was given.
struct Action {
  CLI::App* cmd;
  std::string verb;
  CLI::Option *seq, *all, *type, *subject;
};

int RunAction(const Action& a, const Values& v) {
  const std::string command = "dlq " + a.cmd->get_name();
  if (a.seq->count() == 0 && a.all->count() == 0 && a.type->count() == 0 && a.subject->count() == 0) {
    std::cerr << "walbus " << command << ": choose the dead letters: --seq N (repeatable), --type T and/or "
              << "--subject X, or --all\n";
    return 2;
  }
  AdminFields fields{{"subscriber", v.subscriber}};
  AddGiven(&fields, a.seq, "seq", v.seq_texts);
  if (v.all) fields.emplace_back("all", "true");
  AddGiven(&fields, a.type, "type", v.type);
  AddGiven(&fields, a.subject, "subject", v.subject);
  fields.emplace_back("operator", v.operator_name);
  fields.emplace_back("reason", v.reason);
  if (v.dry_run) fields.emplace_back("dry-run", "true");
  return RunAdmin(command, v.dir, a.verb, fields, v.json);
}

Action AddAction(CLI::App* dlq, Values* v, const std::string& name, const std::string& verb, const std::string& help) {
  CLI::App* cmd = dlq->add_subcommand(name, help);
  Action a{cmd, verb, nullptr, nullptr, nullptr, nullptr};
  cmd->add_option("dir", v->dir, "Database directory")->required();
  cmd->add_option("--subscriber", v->subscriber, "Whose dead letters")->required();
  a.seq = cmd->add_option("--seq", v->seq_texts, "Select this dead letter (by seq); repeat for more")
              ->allow_extra_args(false)
              ->take_all();
  a.all = cmd->add_flag("--all", v->all, "Select every dead letter of the subscriber");
  a.type = cmd->add_option("--type", v->type, "Select those of this event type (and --subject, when given)");
  a.subject = cmd->add_option("--subject", v->subject, "Select those of this subject (and --type, when given)");
  cmd->add_option("--operator", v->operator_name, "Who acts (recorded)")->required();
  cmd->add_option("--reason", v->reason, "Why (recorded)")->required();
  cmd->add_flag("--dry-run", v->dry_run, "Show what would be selected; change nothing");
  cmd->add_flag("--json", v->json, "Print the report as one JSON object");
  return a;
}

}  // namespace

void AddDeadLetterCommands(CLI::App* app, Runners* runners) {
  auto v = std::make_shared<Values>();
  CLI::App* dlq = app->add_subcommand(
      "dlq", "The dead-letter store: events a subscriber gave up on after its retry budget, with their errors.");
  dlq->require_subcommand(1);
  CLI::App* ls = dlq->add_subcommand(
      "ls", "One line per dead letter: subscriber, seq, type, subject, attempts, error. In (subscriber, seq) order.");
  ls->add_option("dir", v->dir, "Database directory")->required();
  ls->add_option("--subscriber", v->subscriber, "Only this subscriber's dead letters");
  ls->add_option("--limit", v->limit, "Show at most N entries; 0 for all")->capture_default_str();
  ls->add_flag("--json", v->json, "Print JSON Lines: one object per entry, with every field");
  CLI::App* show = dlq->add_subcommand(
      "show",
      "Every field of one dead letter: the event, the failure record and the payload (as JSON text for "
      "application/json, else hex of the first 256 bytes). Exit 1 when there is none.");
  show->add_option("dir", v->dir, "Database directory")->required();
  show->add_option("--subscriber", v->subscriber, "Subscriber name")->required();
  show->add_option("--seq", v->seq, "Sequence number of the event")->required();
  show->add_flag("--json", v->json, "Print one JSON object");
  std::vector<Action> actions;
  for (auto [name, verb, help] :
       {std::tuple{"redrive", "dlq-redrive",
                   "Run the selected dead letters again through their subscriber, in their original per-subject "
                   "order; needs the process that runs the subscriber (its admin socket)."},
        std::tuple{"skip", "dlq-skip",
                   "Release the parked subjects of the selection without running the dead letters (they stay, "
                   "for inspection)."},
        std::tuple{"purge", "dlq-purge",
                   "Delete the selected dead letters (the action record keeps their seqs "
                   "and event ids)."}}) {
    actions.push_back(AddAction(dlq, v.get(), name, verb, help));
  }
  runners->push_back([ls, show, actions, v]() -> std::optional<int> {
    if (ls->parsed()) return RunDlqLs(v->dir, v->subscriber, v->limit, v->json);
    if (show->parsed()) return RunDlqShow(v->dir, v->subscriber, v->seq, v->json);
    for (const Action& a : actions) {
      if (a.cmd->parsed()) return RunAction(a, *v);
    }
    return std::nullopt;
  });
}

}  // namespace walbus::tools
