// bridge/relay_journal.cc: the journal's records, and which of its
// entries a server that crashed and came back no longer holds, against a
// simulated stream whose every crash loses a tail.
#include "bridge/relay_journal.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace walbus::bridge {
namespace {

JournalEntry Entry(uint64_t stream_seq, uint64_t server_run, std::string msg_id) {
  JournalEntry e;
  e.stream_seq = stream_seq;
  e.acked_ms = 1700000000000;
  e.server_run = server_run;
  e.msg_id = std::move(msg_id);
  e.nats_subject = "fleet.orders";
  e.message = "NATS/1.0\r\n\r\nbody";
  return e;
}

TEST(RelayJournalTest, AnEntryKeepsTheRunOfItsServer) {
  const JournalEntry e = Entry(42, ServerRunOf("NC6Y665VZCNIDWUB"), "id-1");
  const std::optional<JournalEntry> back = DecodeJournalEntry(EncodeJournalEntry(e));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->stream_seq, 42u);
  EXPECT_EQ(back->acked_ms, e.acked_ms);
  EXPECT_EQ(back->server_run, e.server_run);
  EXPECT_EQ(back->msg_id, "id-1");
  EXPECT_EQ(back->nats_subject, e.nats_subject);
  EXPECT_EQ(back->message, e.message);
}

TEST(RelayJournalTest, AnEntryOfAnOlderReleaseHasNoKnownRun) {
  // Older releases kept a connection's tag in the same place and ended
  // the record after the message.
  std::string older = EncodeJournalEntry(Entry(7, 12345, "id-2"));
  older.pop_back();
  const std::optional<JournalEntry> back = DecodeJournalEntry(older);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->server_run, kUnknownServerRun);
  EXPECT_EQ(back->msg_id, "id-2");
}

TEST(RelayJournalTest, ADamagedEntryIsNotTaken) {
  const std::string good = EncodeJournalEntry(Entry(7, 12345, "id-3"));
  EXPECT_FALSE(DecodeJournalEntry(good + "x").has_value());
  EXPECT_FALSE(DecodeJournalEntry(good.substr(0, good.size() - 2)).has_value());
  std::string wrong_end = good;
  wrong_end.back() = 'q';
  EXPECT_FALSE(DecodeJournalEntry(wrong_end).has_value());
}

TEST(RelayJournalTest, EachServerIdIsItsOwnRun) {
  EXPECT_EQ(ServerRunOf(""), kUnknownServerRun);
  const uint64_t a = ServerRunOf("NC6Y665VZCNIDWUBLYM4NQEZLDSRA53R");
  const uint64_t b = ServerRunOf("NC4ZIKFCURCCDSUA2SQZMMAD4DIVNGEV");
  EXPECT_NE(a, kUnknownServerRun);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, ServerRunOf("NC6Y665VZCNIDWUBLYM4NQEZLDSRA53R"));
}

// A stream on a server that runs, crashes losing the newest messages it
// stored (any number, even some an earlier run stored), and runs again.
// The relay's side: publishes in flight across the restart are
// acknowledged by the new run before the relay's journal check and
// cannot name their run; the check then republishes what it finds lost;
// later publishes name their run, some acknowledged as duplicates of a
// message stored earlier.
class CrashingStream {
 public:
  explicit CrashingStream(uint64_t seed) : rng_(seed) {}

  void RunAndCrash(int appends, bool crash) {
    ++run_number_;
    run_ = ServerRunOf("server-" + std::to_string(run_number_));
    const int in_flight = Uniform(0, appends / 2);
    for (int i = 0; i < in_flight; ++i) entries_.push_back(Append(NewId("ours-"), kUnknownServerRun));
    RepublishLost();
    for (int i = 0; i < appends; ++i) {
      const int pick = Uniform(0, 9);
      if (pick < 2) {
        stream_.push_back(NewId("other-"));  // another publisher's
      } else if (pick == 2 && !entries_.empty()) {
        ResendHeld(&entries_[Uniform(0, static_cast<int>(entries_.size()) - 1)]);
      } else {
        entries_.push_back(Append(NewId("ours-"), run_));
      }
    }
    if (crash)
      stream_.resize(stream_.size() - Uniform(0, std::min<int>(static_cast<int>(stream_.size()), 2 * appends)));
  }

  // FindLostEntries against the truth, as the relay calls it once the
  // server of the current run is up.
  void ExpectFoundExactlyTheLost() {
    std::vector<const JournalEntry*> view;
    for (const JournalEntry& e : entries_) view.push_back(&e);
    Result<std::vector<bool>> lost = FindLostEntries(view, run_, Holds());
    ASSERT_TRUE(lost.ok()) << lost.status().ToString();
    for (size_t i = 0; i < entries_.size(); ++i) {
      const JournalEntry& e = entries_[i];
      if (e.server_run == run_) {
        EXPECT_FALSE((*lost)[i]) << "an entry of the running server is not looked up";
        continue;
      }
      EXPECT_EQ((*lost)[i], !Held(e)) << e.msg_id << " at stream sequence " << e.stream_seq << " of run "
                                      << e.server_run;
    }
  }

  int lookups() const { return lookups_; }
  size_t entries() const { return entries_.size(); }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  std::string NewId(const char* prefix) { return prefix + std::to_string(next_id_++); }

  JournalEntry Append(const std::string& msg_id, uint64_t acking_run) {
    stream_.push_back(msg_id);
    return Entry(stream_.size(), acking_run, msg_id);
  }

  // A message sent again (a device that crashed before its checkpoint):
  // the server answers with where it holds it, when it does.
  void ResendHeld(JournalEntry* e) {
    if (Held(*e)) e->server_run = run_;
  }

  void RepublishLost() {
    std::vector<const JournalEntry*> view;
    for (const JournalEntry& e : entries_) view.push_back(&e);
    Result<std::vector<bool>> lost = FindLostEntries(view, run_, Holds());
    ASSERT_TRUE(lost.ok());
    for (size_t i = 0; i < entries_.size(); ++i) {
      if ((*lost)[i]) entries_[i] = Append(entries_[i].msg_id, run_);
    }
  }

  bool Held(const JournalEntry& e) const {
    return e.stream_seq >= 1 && e.stream_seq <= stream_.size() && stream_[e.stream_seq - 1] == e.msg_id;
  }

  StreamHoldsFn Holds() {
    return [this](const JournalEntry& e) -> Result<bool> {
      ++lookups_;
      return Held(e);
    };
  }

  std::mt19937_64 rng_;
  std::vector<std::string> stream_;  // message id at stream sequence i + 1
  std::vector<JournalEntry> entries_;
  int run_number_ = 0;
  uint64_t run_ = kUnknownServerRun;
  uint64_t next_id_ = 0;
  int lookups_ = 0;
};

TEST(RelayJournalTest, EveryLostEntryIsFoundAfterAnyRunOfCrashes) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    CrashingStream stream(seed);
    for (int run = 0; run < 12; ++run) stream.RunAndCrash(40, /*crash=*/true);
    stream.RunAndCrash(40, /*crash=*/false);
    stream.ExpectFoundExactlyTheLost();
    if (HasFailure()) return;
  }
}

TEST(RelayJournalTest, ARunsEntriesAreLookedUpInAFewLookUpsEach) {
  // One run acknowledged 4,000 entries, all by name; the server crashed
  // and runs again: a binary search, not one look-up per entry.
  std::vector<std::string> stream;
  std::vector<JournalEntry> entries;
  const uint64_t first_run = ServerRunOf("first");
  for (int i = 0; i < 4000; ++i) {
    stream.push_back("m-" + std::to_string(i));
    entries.push_back(Entry(stream.size(), first_run, stream.back()));
  }
  stream.resize(3000);
  stream.push_back("another");
  std::vector<const JournalEntry*> view;
  for (const JournalEntry& e : entries) view.push_back(&e);
  int lookups = 0;
  Result<std::vector<bool>> lost =
      FindLostEntries(view, ServerRunOf("second"), [&](const JournalEntry& e) -> Result<bool> {
        ++lookups;
        return e.stream_seq <= stream.size() && stream[e.stream_seq - 1] == e.msg_id;
      });
  ASSERT_TRUE(lost.ok());
  for (size_t i = 0; i < entries.size(); ++i) EXPECT_EQ((*lost)[i], i >= 3000) << i;
  EXPECT_LE(lookups, 13) << "log2(4000) is 12";
}

TEST(RelayJournalTest, AServerThatDoesNotAnswerIsAnError) {
  const JournalEntry e = Entry(1, ServerRunOf("gone"), "id-4");
  std::vector<const JournalEntry*> view{&e};
  Result<std::vector<bool>> lost = FindLostEntries(
      view, ServerRunOf("now"), [](const JournalEntry&) -> Result<bool> { return Status::IOError("timeout"); });
  EXPECT_TRUE(lost.status().IsIOError()) << lost.status().ToString();
}

}  // namespace
}  // namespace walbus::bridge
