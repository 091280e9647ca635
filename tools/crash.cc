// walbus-crash: crash torture. Each round a child process opens the
// database, runs the workload of tools/workload.h (producers with
// ExpectVersion conflicts, several subscribers, handler effects) and is
// killed with SIGKILL: at a random moment, or at a fault point inside the
// commit path, the handler commit or recovery (bus/core/fault_point.h; compiled
// in for test builds), chosen by the round's seed. The child reports every
// acknowledged commit through a pipe, an independent record.
//
// After each kill the database is reopened and checked: no acknowledged
// commit was lost and no checkpoint moved backwards.
// After the last round it runs the subscribers to the end and checks, from
// the database: every effect exactly once per subscriber, per-subject
// order, every event delivered, no domain write without its event (and the
// reverse), and an outbox drained to nothing.
//
//   walbus-crash --rounds 20 --seed 7
//
// With --workload process the child runs tools/process_workload.h instead:
// process instances opened, timing out and cancelled while it is killed;
// the end checks that each instance started once and completed once, by
// its timeout or its cancel and never both, and that nothing is left.
//
// A seed reproduces its run (the kill moments are drawn from it; the
// scheduling of threads is not, so a failure is reproduced by rerunning
// its seed a few times). Prints one JSON summary; exit 0 when every check
// passed, 1 when one failed, 2 on bad usage or an error.
//
// The supervising process never opens a bus: every bus, the workload's and
// the checks', lives in a forked child. A fork copies only the calling
// thread, so a child forked after a bus had run would inherit the storage
// engine's background thread pool without its threads (and possibly a lock
// one of them held) and could wait forever for a flush.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "bus/core/fault_point.h"
#include "tools/guarded_main.h"
#include "tools/process_workload.h"
#include "tools/workload.h"

namespace {

namespace fs = std::filesystem;
using walbus::Status;
using namespace walbus::workload;
using Clock = std::chrono::steady_clock;

struct Config {
  uint64_t rounds = 10;
  uint64_t seed = 0;
  size_t producers = 3;
  size_t subscribers = 2;
  size_t subjects = 20;
  std::string durability = "buffered";
  std::string workload = "items";  // or "process"
  std::string dir;
  bool keep = false;
  uint32_t max_round_ms = 400;
};

struct Round {
  uint64_t seed = 0;
  std::string fault_point;  // empty: killed by the timer
  uint64_t countdown = 0;
  uint32_t kill_after_ms = 0;
  // The kill delay counts from the fork, so the kill may strike while the
  // child opens and recovers; otherwise from the moment its bus started
  // (the child's start-up takes long on a slow or emulated machine).
  bool timed_from_fork = false;
};

struct Totals {
  uint64_t rounds = 0;
  uint64_t killed_by_fault_point = 0;
  uint64_t killed_by_timer = 0;
  uint64_t acknowledged = 0;
  std::vector<std::string> failures;
};

// The workload's handler never fails for good, but crash rounds charge an
// attempt to every event that may have been running: a large budget keeps
// those from ever adding up to a dead letter.
walbus::RetryPolicy CrashBudget() {
  walbus::RetryPolicy r;
  r.max_attempts = 1000000;
  return r;
}

walbus::Durability DurabilityOf(const Config& cfg) {
  return cfg.durability == "sync" ? walbus::Durability::kSync : walbus::Durability::kBuffered;
}

Round PlanRound(const Config& cfg, uint64_t index) {
  Round r;
  std::seed_seq seq{cfg.seed, index};
  std::mt19937_64 rng(seq);
  r.seed = rng();
  r.kill_after_ms = 20 + static_cast<uint32_t>(rng() % cfg.max_round_ms);
  r.timed_from_fork = rng() % 4 == 0;
  const auto& points = walbus::internal::fault::AllPoints();
  if (walbus::internal::fault::kEnabled && rng() % 3 != 0) {
    r.fault_point = std::string(points[rng() % points.size()]);
    // Recovery runs once per process; the other points many times.
    r.countdown = r.fault_point == "recovery.after_open" ? 1 : 1 + rng() % 10;
  }
  return r;
}

// The child's first line on the pipe, once its bus started; every other
// line is an acknowledged commit.
constexpr char kStartedLine[] = "started";
// A child not started by then is stuck: the round fails.
constexpr auto kStartTimeout = std::chrono::minutes(2);

void WriteLine(int fd, const std::string& line) {
  const std::string l = line + "\n";
  if (write(fd, l.data(), l.size()) != static_cast<ssize_t>(l.size())) _exit(3);
}

bool ProcessWorkload(const Config& cfg) { return cfg.workload == "process"; }

// Subscribes what the workload runs: its subscribers, or its process.
Status SubscribeWorkload(const Config& cfg, walbus::Bus& bus) {
  if (!ProcessWorkload(cfg)) return SubscribeAll(bus, cfg.subscribers, HandleItem, CrashBudget());
  auto process = DefineCrashProcess(CrashBudget());
  if (!process.ok()) return process.status();
  return bus.Subscribe((*process)->subscriber());
}

// One producer's next commit: the subject (or key) whose version it
// acknowledges, and that version.
Status CommitNext(const Config& cfg, walbus::Bus& bus, std::mt19937_64& rng, const std::string& instance,
                  std::string* acknowledged, uint64_t* version) {
  if (ProcessWorkload(cfg)) {
    // A fresh instance with a deadline of 1..40 ms; about half are
    // cancelled within 20 ms, racing it.
    if (Status s = CommitOpen(bus, instance, 1 + static_cast<uint32_t>(rng() % 40)); !s.ok()) return s;
    *acknowledged = OpenedKey(instance);
    *version = 1;
    if (rng() % 2 != 0) return Status::OK();
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 20));
    return CommitCancel(bus, instance);
  }
  *acknowledged = SubjectName(rng() % cfg.subjects);
  walbus::Receipt receipt;
  Status c;
  while ((c = CommitItem(bus, *acknowledged, "payload", version, &receipt)).IsConflict()) {
  }
  return c;
}

// The child: runs the workload until it is killed.
[[noreturn]] void RunChild(const Config& cfg, const Round& round, int fd) {
  if (!round.fault_point.empty()) walbus::internal::fault::Arm(round.fault_point, round.countdown);
  std::unique_ptr<walbus::Bus> bus;
  Status s = walbus::Bus::Open(BusOptions(cfg.dir, DurabilityOf(cfg), 2), &bus);
  if (s.ok()) s = SubscribeWorkload(cfg, *bus);
  if (s.ok()) s = bus->Start();
  if (!s.ok()) {
    std::cerr << "walbus-crash: child: " << s.ToString() << "\n";
    _exit(2);
  }
  WriteLine(fd, kStartedLine);
  std::vector<std::thread> producers;
  for (size_t p = 0; p < cfg.producers; ++p) {
    producers.emplace_back([&, p] {
      std::mt19937_64 rng(round.seed + p);
      for (uint64_t i = 0;; ++i) {
        const std::string instance =
            "o-" + std::to_string(round.seed) + "-" + std::to_string(p) + "-" + std::to_string(i);
        std::string acknowledged;
        uint64_t version = 0;
        if (Status c = CommitNext(cfg, *bus, rng, instance, &acknowledged, &version); !c.ok()) {
          std::cerr << "walbus-crash: child commit: " << c.ToString() << "\n";
          _exit(4);
        }
        WriteLine(fd, acknowledged + " " + std::to_string(version));
      }
    });
  }
  for (auto& t : producers) t.join();
  _exit(0);
}

enum class Start { kStarted, kDied, kStuck };

// Waits until the child wrote its start line (what it wrote after that
// stays in *read) or died (*status).
Start AwaitStart(pid_t pid, int fd, std::string* read, int* status) {
  const auto deadline = Clock::now() + kStartTimeout;
  const std::string started = std::string(kStartedLine) + "\n";
  while (Clock::now() < deadline) {
    if (read->starts_with(started)) return Start::kStarted;
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 10) > 0) {
      char buf[4096];
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) read->append(buf, static_cast<size_t>(n));
    }
    if (!read->starts_with(started) && waitpid(pid, status, WNOHANG) == pid) return Start::kDied;
  }
  return Start::kStuck;
}

// A child that died by itself: SIGKILL is a fault point's; anything else
// (an exit on an error the child reported, a crash) fails the run.
walbus::Result<bool> DiedByItself(int status) {
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return true;
  return Status::IOError(WIFEXITED(status) ? "the child exited with code " + std::to_string(WEXITSTATUS(status))
                                           : "the child died of signal " + std::to_string(WTERMSIG(status)));
}

// Kills the child after the round's delay unless a fault point did first.
// Returns whether the child died by itself (a fault point); *read gets
// what the child wrote while it was waited for.
walbus::Result<bool> KillChild(pid_t pid, const Round& round, int fd, std::string* read) {
  int status = 0;
  if (!round.timed_from_fork) {
    switch (AwaitStart(pid, fd, read, &status)) {
      case Start::kStarted: break;
      case Start::kDied: return DiedByItself(status);
      case Start::kStuck:
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return Status::TimedOut("the child's bus did not start within two minutes");
    }
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(round.kill_after_ms);
  while (Clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return DiedByItself(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return false;
}

// The newest acknowledged version of each subject in what the child wrote:
// `read` and then the rest of the pipe.
std::map<std::string, uint64_t> ReadAcknowledged(int fd, std::string read, uint64_t* count) {
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) read.append(buf, static_cast<size_t>(n));
  std::map<std::string, uint64_t> newest;
  std::istringstream in(read);
  std::string line;
  while (std::getline(in, line)) {
    // Each line is one write of less than PIPE_BUF: whole, or not there.
    std::istringstream fields(line);
    std::string subject;
    uint64_t version = 0;
    if (line == kStartedLine || !(fields >> subject >> version)) continue;
    newest[subject] = std::max(newest[subject], version);
    ++*count;
  }
  return newest;
}

// Forks a child that runs `child` (which must not return: it ends with
// _exit) with the write end of a pipe; *read_fd gets the read end.
walbus::Result<pid_t> ForkWritingTo(int* read_fd, const std::function<void(int write_fd)>& child) {
  int fds[2];
  if (pipe(fds) != 0) return Status::IOError("pipe failed");
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) return Status::IOError("fork failed");
  if (pid == 0) {
    close(fds[0]);
    child(fds[1]);
    _exit(5);  // unreachable unless `child` returned
  }
  close(fds[1]);
  *read_fd = fds[0];
  return pid;
}

// What a check found, passed from the child that ran it to the supervisor
// one line at a time: "failure TEXT" or "checkpoint NAME VALUE".
struct Findings {
  std::vector<std::string> failures;
  std::map<std::string, uint64_t> checkpoints;
};

// Runs `check` in a forked child and returns what it found. The child
// reports a check that could not run (an error, not a failure) by its exit
// code, with the reason on stderr.
walbus::Result<Findings> RunIsolated(const std::function<Status(Findings*)>& check) {
  int fd = -1;
  walbus::Result<pid_t> pid = ForkWritingTo(&fd, [&](int out) {
    Findings found;
    const Status s = check(&found);
    if (!s.ok()) {
      std::cerr << "walbus-crash: check: " << s.ToString() << "\n";
      _exit(2);
    }
    for (const std::string& f : found.failures) WriteLine(out, "failure " + f);
    for (const auto& [name, value] : found.checkpoints)
      WriteLine(out, "checkpoint " + name + " " + std::to_string(value));
    _exit(0);
  });
  if (!pid.ok()) return pid.status();
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  int status = 0;
  waitpid(*pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return Status::IOError("a check could not run (see above)");
  Findings found;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "failure") {
      std::getline(fields >> std::ws, line);
      found.failures.push_back(line);
    } else if (std::string name; kind == "checkpoint" && fields >> name) {
      fields >> found.checkpoints[name];
    }
  }
  return found;
}

// After a kill: every acknowledged version is there, checkpoints only grew
// (`before` holds each subscriber's checkpoint after the previous round).
Status CheckAfterKill(const Config& cfg, const std::map<std::string, uint64_t>& acknowledged,
                      const std::map<std::string, uint64_t>& before, Findings* found) {
  std::unique_ptr<walbus::Bus> bus;
  if (Status s = walbus::Bus::Open(BusOptions(cfg.dir, DurabilityOf(cfg), 2), &bus); !s.ok()) return s;
  walbus::Transaction tx = bus->Begin();
  for (const auto& [subject, version] : acknowledged) {
    walbus::Result<uint64_t> stored = tx.GetVersion(kStateCf, subject);
    if (!stored.ok()) return stored.status();
    if (*stored < version) {
      found->failures.push_back("acknowledged commit lost: " + subject + " version " + std::to_string(version) +
                                ", stored " + std::to_string(*stored));
    }
  }
  for (const walbus::SubscriberStats& s : bus->Stats().subscribers) {
    const auto it = before.find(s.name);
    if (it != before.end() && s.checkpoint < it->second) {
      found->failures.push_back("checkpoint of " + s.name + " moved back from " + std::to_string(it->second) + " to " +
                                std::to_string(s.checkpoint));
    }
    found->checkpoints[s.name] = s.checkpoint;
  }
  return bus->Close();
}

Status RunRound(const Config& cfg, const Round& round, std::map<std::string, uint64_t>* checkpoints, Totals* totals) {
  int fd = -1;
  walbus::Result<pid_t> pid = ForkWritingTo(&fd, [&](int out) { RunChild(cfg, round, out); });
  if (!pid.ok()) return pid.status();
  std::string read;
  const walbus::Result<bool> by_fault_point = KillChild(*pid, round, fd, &read);
  uint64_t count = 0;
  std::map<std::string, uint64_t> acknowledged = ReadAcknowledged(fd, std::move(read), &count);
  close(fd);
  if (!by_fault_point.ok()) return by_fault_point.status();
  ++totals->rounds;
  totals->acknowledged += count;
  ++(*by_fault_point ? totals->killed_by_fault_point : totals->killed_by_timer);
  walbus::Result<Findings> found =
      RunIsolated([&](Findings* f) { return CheckAfterKill(cfg, acknowledged, *checkpoints, f); });
  if (!found.ok()) return found.status();
  for (auto& f : found->failures) totals->failures.push_back(std::move(f));
  for (const auto& [name, value] : found->checkpoints) (*checkpoints)[name] = value;
  return Status::OK();
}

// Waits until every committed event is handled and no scheduled event is
// pending. Handlers schedule timers (the process workload's deadlines are
// milliseconds; those a kill left overdue fire at once) and fired timers
// are events to handle, so neither alone is the end: a kill may leave no
// timer pending but opened instances not yet handled, whose steps schedule
// theirs only once the catch-up runs them.
Status CatchUpWithTimers(walbus::Bus& bus) {
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  while (true) {
    if (Status s = bus.WaitCaughtUp(std::chrono::minutes(1)); !s.ok()) return s;
    // Caught up with nothing pending: nothing can commit any more.
    if (bus.Stats().scheduled_pending == 0) return bus.WaitCaughtUp(std::chrono::minutes(1));
    if (Clock::now() > deadline) return Status::TimedOut("scheduled events still pending after five minutes");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Runs every subscriber to the end, then checks the whole history.
Status CatchUpAndCheck(const Config& cfg, Findings* found) {
  {
    std::unique_ptr<walbus::Bus> bus;
    if (Status s = walbus::Bus::Open(BusOptions(cfg.dir, DurabilityOf(cfg), 2), &bus); !s.ok()) return s;
    Status s = SubscribeWorkload(cfg, *bus);
    if (s.ok()) s = bus->Start();
    if (s.ok()) s = CatchUpWithTimers(*bus);
    Status closed = bus->Close();
    if (!s.ok()) return s;
    if (!closed.ok()) return closed;
  }
  std::unique_ptr<walbus::Bus> bus;
  if (Status s = walbus::Bus::Open(BusOptions(cfg.dir, DurabilityOf(cfg), 2), &bus); !s.ok()) return s;
  if (ProcessWorkload(cfg)) {
    if (Status s = CheckProcesses(*bus, &found->failures); !s.ok()) return s;
  } else {
    walbus::Transaction tx = bus->Begin();
    CheckResult result;
    if (Status s = CheckSubjects(tx, tx, cfg.subscribers, cfg.subjects, &result); !s.ok()) return s;
    found->failures = std::move(result.failures);
  }
  if (Status s = bus->Close(); !s.ok()) return s;
  size_t left = 0;
  if (Status s = CountOutbox(cfg.dir, &left); !s.ok()) return s;
  if (left != 0) found->failures.push_back(std::to_string(left) + " outbox entries left after catching up");
  return Status::OK();
}

Status FinalCheck(const Config& cfg, Totals* totals) {
  walbus::Result<Findings> found = RunIsolated([&](Findings* f) { return CatchUpAndCheck(cfg, f); });
  if (!found.ok()) return found.status();
  for (auto& f : found->failures) totals->failures.push_back(std::move(f));
  return Status::OK();
}

}  // namespace

static int Main(int argc, char** argv) {
  Config cfg;
  CLI::App app{"walbus-crash: SIGKILL a bus at random moments and fault points, then check what survived"};
  app.add_option("--rounds", cfg.rounds, "Kill rounds")->capture_default_str()->check(CLI::Range(1, 100000));
  CLI::Option* seed = app.add_option("--seed", cfg.seed, "Seed (default: from time; always printed)");
  app.add_option("--producers", cfg.producers, "Producer threads")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--subscribers", cfg.subscribers, "Subscribers")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--subjects", cfg.subjects, "Subjects")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--durability", cfg.durability, "sync or buffered")
      ->capture_default_str()
      ->check(CLI::IsMember({"sync", "buffered"}));
  app.add_option("--max-round-ms", cfg.max_round_ms, "Longest a child runs before it is killed")
      ->capture_default_str()
      ->check(CLI::Range(10, 60000));
  app.add_option("--workload", cfg.workload, "items (subscribers on versioned subjects) or process")
      ->capture_default_str()
      ->check(CLI::IsMember({"items", "process"}));
  app.add_option("--dir", cfg.dir, "Database directory, missing or empty (default: fresh under /tmp)");
  app.add_flag("--keep", cfg.keep, "Keep the database afterwards");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (seed->count() == 0) cfg.seed = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  std::error_code ec;
  std::string root;
  if (cfg.dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "walbus-crash-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return 2;
    root = tmpl;
    cfg.dir = root + "/db";
  } else if (fs::exists(cfg.dir, ec) && !fs::is_empty(cfg.dir, ec)) {
    std::cerr << "walbus-crash: --dir " << cfg.dir << " is not empty\n";
    return 2;
  }
  std::cerr << "walbus-crash: seed " << cfg.seed
            << (walbus::internal::fault::kEnabled ? "" : " (no fault points in this build)") << "\n";

  Totals totals;
  std::map<std::string, uint64_t> checkpoints;
  Status s;
  for (uint64_t i = 0; s.ok() && i < cfg.rounds; ++i) s = RunRound(cfg, PlanRound(cfg, i), &checkpoints, &totals);
  if (s.ok()) s = FinalCheck(cfg, &totals);
  if (!s.ok()) {
    std::cerr << "walbus-crash: " << s.ToString() << " (seed " << cfg.seed << ")\n";
    return 2;
  }
  // Rounds that all ended before a commit was acknowledged checked nothing.
  if (totals.acknowledged == 0)
    totals.failures.push_back("no round acknowledged a commit before its kill: nothing was checked");
  for (const std::string& f : totals.failures)
    std::cerr << "walbus-crash: FAILED: " << f << " (seed " << cfg.seed << ")\n";
  const bool passed = totals.failures.empty();
  std::printf(
      "{\"seed\":%llu,\"rounds\":%llu,\"killed_by_fault_point\":%llu,\"killed_by_timer\":%llu,"
      "\"acknowledged_commits\":%llu,\"failures\":%zu,\"passed\":%s}\n",
      static_cast<unsigned long long>(cfg.seed), static_cast<unsigned long long>(totals.rounds),
      static_cast<unsigned long long>(totals.killed_by_fault_point),
      static_cast<unsigned long long>(totals.killed_by_timer), static_cast<unsigned long long>(totals.acknowledged),
      totals.failures.size(), passed ? "true" : "false");
  if (!root.empty() && passed && !cfg.keep) fs::remove_all(root, ec);
  if (!passed || cfg.keep) std::cerr << "walbus-crash: database in " << cfg.dir << "\n";
  return passed ? 0 : 1;
}

int main(int argc, char** argv) { return walbus::tools::GuardedMain("walbus-crash", Main, argc, argv); }
