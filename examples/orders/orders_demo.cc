// orders_demo: a small orders application on walbus, killed mid-stream.
//
// Approving an order is one transaction: the order row and the
// "orders.order-approved.v1" event commit together or not at all. Events
// are FlatBuffers tables whose schemas (order_approved.fbs,
// invoice_raised.fbs) the build turns into code and the bus checks every
// payload against. Two subscribers react to it:
//   invoicing  raises one invoice per order and publishes
//              "invoicing.invoice-raised.v1";
//   reporting  keeps a running count and total of approved orders.
//
// Phase 1 forks a child that opens the bus and approves orders from two
// threads; the parent sends it SIGKILL at a random moment. Phase 2 reopens
// the same directory, approves whatever the child did not get to, waits for
// the subscribers and checks the effects: exactly one invoice per order and
// a report that matches the orders, although some events were delivered
// twice across the kill.
//
//   orders_demo [--orders N] [--dir DIR] [--keep] [--durability sync|buffered]
//
// Exit status: 0 when every check holds, 1 when one fails, 2 on bad usage.

#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "orders_demo_events.h"  // generated from the .fbs files
#include "walbus/adapters/flatbuffers.h"
#include "walbus/bus.h"
#include "walbus/event.h"
#include "walbus/options.h"
#include "walbus/status.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kApproverThreads = 2;

struct Args {
  int orders = 3000;
  std::string dir;  // Empty: a fresh temporary directory.
  bool keep = false;
  walbus::Durability durability = walbus::Durability::kSync;
};

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string OrderId(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "order-%06d", i);
  return buf;
}

// A fixed, varied amount per order, so the expected total is known.
uint64_t AmountFor(int i) { return 10 + (static_cast<uint64_t>(i) * 2654435761u) % 9990; }

std::optional<uint64_t> ParseU64(std::string_view text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// Every event here is about one order (the subject), version 1 of it; its
// type comes from its table's schema.
template <class Table>
walbus::EventSpec MakeEvent(const std::string& order_id, flatbuffers::FlatBufferBuilder& fbb,
                            flatbuffers::Offset<Table> root) {
  walbus::EventSpec spec = walbus::TypedEvent(order_id, fbb, root);
  spec.subject_version = 1;
  return spec;
}

// ---------------------------------------------------------------------------
// Handlers

// A failed bus call inside a handler: bad input or bad stored bytes will not
// get better by waiting, anything else is worth another try.
walbus::Outcome Failed(const walbus::Status& s) {
  if (s.IsInvalidArgument() || s.IsCorruption()) return walbus::Outcome::Reject(s.ToString());
  return walbus::Outcome::RetryAfter(milliseconds(50));
}

// invoicing: one invoice per approved order. Finding an invoice already
// there means the same approval took effect twice; that is recorded under
// "doubles/<order id>" so the final check can count it. The inbox must make
// it impossible.
walbus::Outcome RaiseInvoice(const walbus::Event& e, const orders::OrderApproved& order, walbus::HandlerContext& ctx) {
  auto existing = ctx.Get("invoices", e.subject);
  if (!existing.ok()) return Failed(existing.status());
  if (existing->has_value()) {
    walbus::Status s = ctx.Put("invoices", "doubles/" + e.subject, e.id.ToString());
    return s.ok() ? walbus::Outcome::Done() : Failed(s);
  }
  if (walbus::Status s = ctx.Put("invoices", e.subject, "invoice for " + std::to_string(order.amount())); !s.ok()) {
    return Failed(s);
  }
  flatbuffers::FlatBufferBuilder fbb;
  auto invoice = invoicing::CreateInvoiceRaisedDirect(fbb, order.order_id()->c_str(), order.amount());
  auto id = ctx.Publish(MakeEvent(e.subject, fbb, invoice));
  if (!id.ok()) return Failed(id.status());
  return walbus::Outcome::Done();
}

// Reads a decimal counter from "report"; a missing key is 0.
walbus::Result<uint64_t> ReadCounter(walbus::HandlerContext& ctx, std::string_view key) {
  auto value = ctx.Get("report", key);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return uint64_t{0};
  auto parsed = ParseU64(**value);
  if (!parsed) return walbus::Status::Corruption("report/" + std::string(key) + " is not a number");
  return *parsed;
}

// reporting: count and total of approved orders. Handlers for different
// orders run in parallel and all update the same two keys, so each update
// asserts the version of "report/totals" read before the counters; a
// concurrent update makes the commit fail with Conflict and the bus runs the
// handler again on fresh values.
walbus::Outcome UpdateReport(const walbus::Event&, const orders::OrderApproved& order, walbus::HandlerContext& ctx) {
  const uint64_t amount = order.amount();
  auto version = ctx.GetVersion("report", "totals");
  if (!version.ok()) return Failed(version.status());
  auto count = ReadCounter(ctx, "count");
  if (!count.ok()) return Failed(count.status());
  auto total = ReadCounter(ctx, "total");
  if (!total.ok()) return Failed(total.status());
  if (walbus::Status s = ctx.ExpectVersion("report", "totals", *version); !s.ok()) return Failed(s);
  if (walbus::Status s = ctx.Put("report", "count", std::to_string(*count + 1)); !s.ok()) {
    return Failed(s);
  }
  if (walbus::Status s = ctx.Put("report", "total", std::to_string(*total + amount)); !s.ok()) {
    return Failed(s);
  }
  return walbus::Outcome::Done();
}

// ---------------------------------------------------------------------------
// The application side

// Opens the bus in `dir`, registers the event schemas and both
// subscribers, and starts them. With require_schemas, an event of a type
// without a schema is refused at Publish.
walbus::Status OpenBus(const Args& args, const std::string& dir, std::unique_ptr<walbus::Bus>* bus) {
  walbus::Options opt;
  opt.dir = dir;
  opt.durability = args.durability;
  opt.column_families = {"orders", "invoices", "report"};
  opt.source = "orders-demo";
  opt.require_schemas = true;
  if (walbus::Status s = walbus::Bus::Open(opt, bus); !s.ok()) return s;
  if (walbus::Status s = orders_demo::RegisterEventSchemas(**bus); !s.ok()) return s;
  using orders::OrderApproved;
  if (walbus::Status s = (*bus)->Subscribe(walbus::TypedSubscriber<OrderApproved>("invoicing", RaiseInvoice));
      !s.ok()) {
    return s;
  }
  if (walbus::Status s = (*bus)->Subscribe(walbus::TypedSubscriber<OrderApproved>("reporting", UpdateReport));
      !s.ok()) {
    return s;
  }
  return (*bus)->Start();
}

enum class Approval { kApproved, kAlreadyThere };

// Approves order i unless it is already approved: the order row and its
// event in one commit. ExpectVersion(0) makes a concurrent second approval
// fail with Conflict instead of writing a second event.
walbus::Result<Approval> Approve(walbus::Bus& bus, int i) {
  const std::string id = OrderId(i);
  const std::string amount = std::to_string(AmountFor(i));
  walbus::Transaction tx = bus.Begin();
  auto existing = tx.Get("orders", id);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) return Approval::kAlreadyThere;
  if (walbus::Status s = tx.ExpectVersion("orders", id, 0); !s.ok()) return s;
  if (walbus::Status s = tx.Put("orders", id, amount); !s.ok()) return s;
  flatbuffers::FlatBufferBuilder fbb;
  auto event = tx.Publish(MakeEvent(id, fbb, orders::CreateOrderApprovedDirect(fbb, id.c_str(), AmountFor(i))));
  if (!event.ok()) return event.status();
  auto receipt = tx.Commit();
  if (!receipt.ok()) {
    if (receipt.status().IsConflict()) return Approval::kAlreadyThere;
    return receipt.status();
  }
  return Approval::kApproved;
}

struct ApproveResult {
  uint64_t approved = 0;
  uint64_t already_there = 0;
  walbus::Status error;
};

// Approves orders 0..n-1 from kApproverThreads threads; stops at the first error.
ApproveResult ApproveAll(walbus::Bus& bus, int n) {
  std::atomic<uint64_t> approved{0};
  std::atomic<uint64_t> already_there{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  walbus::Status error;
  std::vector<std::thread> threads;
  for (int t = 0; t < kApproverThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < n && !failed.load(); i += kApproverThreads) {
        auto r = Approve(bus, i);
        if (!r.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (!failed.exchange(true)) error = r.status();
          return;
        }
        (*r == Approval::kApproved ? approved : already_there).fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  return {approved.load(), already_there.load(), error};
}

// ---------------------------------------------------------------------------
// Phase 1: the child, killed at a random moment

[[noreturn]] void ChildFail(const char* what, const walbus::Status& s) {
  std::fprintf(stderr, "orders_demo (child): %s: %s\n", what, s.ToString().c_str());
  _exit(3);
}

[[noreturn]] void RunChild(const Args& args, const std::string& dir, int ready_fd) {
  std::unique_ptr<walbus::Bus> bus;
  if (walbus::Status s = OpenBus(args, dir, &bus); !s.ok()) ChildFail("open", s);
  const char ready = 1;
  if (write(ready_fd, &ready, 1) != 1) _exit(3);
  close(ready_fd);
  ApproveResult r = ApproveAll(*bus, args.orders);
  if (!r.error.ok()) ChildFail("approve", r.error);
  // Every order is approved before the kill came: wait for it.
  for (;;) pause();
}

struct Phase1 {
  bool ok = false;
  double approving_ms = 0;  // From the child's first approval to the kill.
  double kill_ms = 0;       // From fork to the kill.
};

Phase1 RunPhase1(const Args& args, const std::string& dir) {
  Phase1 out;
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("orders_demo: pipe");
    return out;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const Clock::time_point forked_at = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("orders_demo: fork");
    return out;
  }
  if (pid == 0) {
    close(fds[0]);
    RunChild(args, dir, fds[1]);
  }
  close(fds[1]);

  // The clock for the kill starts once the child's bus is open, so the kill
  // lands while orders are flowing rather than while the database is created.
  pollfd pfd{.fd = fds[0], .events = POLLIN, .revents = 0};
  char byte = 0;
  const bool ready = poll(&pfd, 1, 60'000) == 1 && read(fds[0], &byte, 1) == 1;
  close(fds[0]);
  const Clock::time_point ready_at = Clock::now();
  if (ready) {
    std::mt19937 rng(std::random_device{}());
    std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution<int>(150, 400)(rng)));
  }
  kill(pid, SIGKILL);
  out.kill_ms = MillisSince(forked_at);
  out.approving_ms = ready ? MillisSince(ready_at) : 0;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::perror("orders_demo: waitpid");
      return out;
    }
  }
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && ready) {
    out.ok = true;
  } else if (WIFEXITED(status)) {
    std::fprintf(stderr, "orders_demo: the child exited with status %d before the kill\n", WEXITSTATUS(status));
  } else if (!ready) {
    std::fprintf(stderr, "orders_demo: the child did not open the bus within 60 s\n");
  }
  return out;
}

// ---------------------------------------------------------------------------
// Phase 2: reopen, finish, check

struct Totals {
  uint64_t orders = 0;
  uint64_t orders_sum = 0;
  uint64_t wrong_amounts = 0;
  uint64_t invoices = 0;
  uint64_t doubles = 0;
  uint64_t report_count = 0;
  uint64_t report_total = 0;
};

// Reads every order and invoice as lists, from one snapshot (a ReadView):
// what a screen listing the orders would do while approvals go on.
walbus::Result<Totals> ReadTotals(walbus::Bus& bus, std::string* first_orders) {
  Totals t;
  const walbus::ReadView view = bus.Read();
  walbus::ScanOptions orders;
  orders.prefix = "order-";
  walbus::Status s = view.Scan("orders", orders, [&](std::string_view id, std::string_view value) {
    const auto index = ParseU64(id.substr(orders.prefix.size()));
    const auto amount = ParseU64(value);
    if (!index || !amount || *amount != AmountFor(static_cast<int>(*index))) ++t.wrong_amounts;
    if (t.orders < 3)
      *first_orders += std::string(t.orders == 0 ? "" : ", ") + std::string(id) + " " + std::string(value);
    ++t.orders;
    t.orders_sum += amount.value_or(0);
    return true;
  });
  if (!s.ok()) return s;
  walbus::ScanOptions invoices;
  invoices.prefix = "order-";
  s = view.Scan("invoices", invoices, [&](std::string_view, std::string_view) {
    ++t.invoices;
    return true;
  });
  if (!s.ok()) return s;
  walbus::ScanOptions doubles;
  doubles.prefix = "doubles/";
  s = view.Scan("invoices", doubles, [&](std::string_view, std::string_view) {
    ++t.doubles;
    return true;
  });
  if (!s.ok()) return s;
  for (auto [key, field] : {std::pair{"count", &Totals::report_count}, std::pair{"total", &Totals::report_total}}) {
    auto value = view.Get("report", key);
    if (!value.ok()) return value.status();
    if (value->has_value()) {
      auto parsed = ParseU64(**value);
      if (!parsed) return walbus::Status::Corruption(std::string("report/") + key + " is not a number");
      t.*field = *parsed;
    }
  }
  return t;
}

void Usage(std::FILE* out) {
  std::fprintf(out,
               "usage: orders_demo [--orders N] [--dir DIR] [--keep] [--durability sync|buffered]\n"
               "  --orders N        orders to approve (default 3000)\n"
               "  --dir DIR         bus directory; must not exist or be empty\n"
               "                    (default: a fresh temporary directory)\n"
               "  --keep            keep the temporary directory at the end\n"
               "  --durability M    sync (default) or buffered\n");
}

// Parses argv; exits with status 2 on bad usage.
Args ParseArgs(int argc, char** argv) {
  Args args;
  auto bad = [](const std::string& msg) {
    std::fprintf(stderr, "orders_demo: %s\n", msg.c_str());
    Usage(stderr);
    std::exit(2);
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    auto take = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) bad(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      Usage(stdout);
      std::exit(0);
    } else if (arg == "--orders") {
      auto n = ParseU64(take());
      if (!n || *n < 1 || *n > 10'000'000) bad("--orders takes a number from 1 to 10000000");
      args.orders = static_cast<int>(*n);
    } else if (arg == "--dir") {
      args.dir = take();
      if (args.dir.empty()) bad("--dir takes a path");
    } else if (arg == "--keep" && !has_value) {
      args.keep = true;
    } else if (arg == "--durability") {
      std::string mode = take();
      if (mode == "sync") {
        args.durability = walbus::Durability::kSync;
      } else if (mode == "buffered") {
        args.durability = walbus::Durability::kBuffered;
      } else {
        bad("--durability takes sync or buffered");
      }
    } else {
      bad("unknown argument: " + std::string(argv[i]));
    }
  }
  return args;
}

// Where the bus lives; `cleanup` is what to remove at the end (empty: nothing).
bool PrepareDir(const Args& args, std::string* dir, std::string* cleanup) {
  std::error_code ec;
  if (!args.dir.empty()) {
    if (fs::exists(args.dir, ec) && !fs::is_empty(args.dir, ec)) {
      std::fprintf(stderr, "orders_demo: %s is not empty; give a new directory\n", args.dir.c_str());
      return false;
    }
    *dir = args.dir;
    cleanup->clear();
    return true;
  }
  std::string tmpl = (fs::temp_directory_path(ec) / "walbus-orders-XXXXXX").string();
  if (ec || mkdtemp(tmpl.data()) == nullptr) {
    std::perror("orders_demo: mkdtemp");
    return false;
  }
  *cleanup = tmpl;
  *dir = tmpl + "/bus";
  return true;
}

const char* Mark(bool ok) { return ok ? "ok" : "MISMATCH"; }

}  // namespace

int main(int argc, char** argv) {
  const Clock::time_point start = Clock::now();
  const Args args = ParseArgs(argc, argv);
  std::string dir;
  std::string cleanup;
  if (!PrepareDir(args, &dir, &cleanup)) return 1;
  const char* mode = args.durability == walbus::Durability::kSync ? "sync" : "buffered";
  std::printf("orders demo: %d orders, durability %s, directory %s\n", args.orders, mode, dir.c_str());

  // Phase 1.
  std::printf("phase 1: a child process approves orders from %d threads; SIGKILL at a random moment\n",
              kApproverThreads);
  const Phase1 p1 = RunPhase1(args, dir);
  if (p1.ok) {
    std::printf("         killed after %.0f ms of approving (%.0f ms after fork)\n", p1.approving_ms, p1.kill_ms);
  }

  // Phase 2.
  std::unique_ptr<walbus::Bus> bus;
  if (walbus::Status s = OpenBus(args, dir, &bus); !s.ok()) {
    std::fprintf(stderr, "orders_demo: reopen: %s\n", s.ToString().c_str());
    return 1;
  }
  const ApproveResult r = ApproveAll(*bus, args.orders);
  if (!r.error.ok()) {
    std::fprintf(stderr, "orders_demo: approve: %s\n", r.error.ToString().c_str());
    return 1;
  }
  std::printf("phase 2: reopened; %llu orders had committed before the kill, approved the other %llu\n",
              static_cast<unsigned long long>(r.already_there), static_cast<unsigned long long>(r.approved));
  const milliseconds idle_timeout(120'000 + 20LL * args.orders);
  if (walbus::Status s = bus->WaitIdle(idle_timeout); !s.ok()) {
    std::fprintf(stderr, "orders_demo: waiting for the subscribers: %s\n", s.ToString().c_str());
    return 1;
  }
  std::string first_orders;
  auto totals_or = ReadTotals(*bus, &first_orders);
  if (!totals_or.ok()) {
    std::fprintf(stderr, "orders_demo: reading results: %s\n", totals_or.status().ToString().c_str());
    return 1;
  }
  const Totals t = *totals_or;
  uint64_t duplicates = 0;
  uint64_t dead_letters = 0;
  for (const walbus::SubscriberStats& s : bus->Stats().subscribers) {
    duplicates += s.duplicates;
    dead_letters += s.dead_lettered;
  }
  if (walbus::Status s = bus->Close(); !s.ok()) {
    std::fprintf(stderr, "orders_demo: close: %s\n", s.ToString().c_str());
    return 1;
  }

  const auto n = static_cast<uint64_t>(args.orders);
  const bool orders_ok = t.orders == n && t.wrong_amounts == 0;
  const bool invoices_ok = t.invoices == n;
  const bool doubles_ok = t.doubles == 0;
  const bool count_ok = t.report_count == t.orders;
  const bool total_ok = t.report_total == t.orders_sum;
  const bool dead_letters_ok = dead_letters == 0;
  const bool all_ok = p1.ok && orders_ok && invoices_ok && doubles_ok && count_ok && total_ok && dead_letters_ok;

  std::printf("\nreport (the orders listed through a ReadView: %s, ...)\n", first_orders.c_str());
  std::printf("  orders approved     %8llu of %llu  %s\n", static_cast<unsigned long long>(t.orders),
              static_cast<unsigned long long>(n), Mark(orders_ok));
  std::printf("  invoices raised     %8llu of %llu  %s\n", static_cast<unsigned long long>(t.invoices),
              static_cast<unsigned long long>(n), Mark(invoices_ok));
  std::printf("  double invoices     %8llu (must be 0)  %s\n", static_cast<unsigned long long>(t.doubles),
              Mark(doubles_ok));
  std::printf("  report count        %8llu, orders %llu  %s\n", static_cast<unsigned long long>(t.report_count),
              static_cast<unsigned long long>(t.orders), Mark(count_ok));
  std::printf("  report total        %8llu, orders %llu  %s\n", static_cast<unsigned long long>(t.report_total),
              static_cast<unsigned long long>(t.orders_sum), Mark(total_ok));
  std::printf("  dead letters        %8llu (must be 0)  %s\n", static_cast<unsigned long long>(dead_letters),
              Mark(dead_letters_ok));
  std::printf("  duplicates skipped  %8llu (redeliveries after the kill, recognised by the inbox)\n",
              static_cast<unsigned long long>(duplicates));
  std::printf("  child killed at     %8.0f ms, after %.0f ms of approving  %s\n", p1.kill_ms, p1.approving_ms,
              Mark(p1.ok));
  std::printf("  total time          %8.0f ms\n", MillisSince(start));
  std::printf("%s\n", all_ok ? "all checks passed" : "CHECKS FAILED");

  if (!cleanup.empty()) {
    if (args.keep) {
      std::printf("kept %s\n", cleanup.c_str());
    } else {
      std::error_code ec;
      fs::remove_all(cleanup, ec);
    }
  }
  return all_ok ? 0 : 1;
}
