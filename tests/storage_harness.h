// A real database and its committer, without a Bus: for the tests of the
// parts below the bus (the handler runner, the progress writer), which
// take storage and a committer and nothing else of it.
#ifndef WALBUS_TESTS_STORAGE_HARNESS_H_
#define WALBUS_TESTS_STORAGE_HARNESS_H_

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bus/core/committer.h"
#include "storage/db.h"
#include "walbus/status.h"

namespace walbus::testing {

class StorageHarness final : public internal::CommitListener {
 public:
  // Opens (creating) the database in `dir` with the application column
  // families `app_cfs`; opened() says how that went.
  StorageHarness(const std::string& dir, std::vector<std::string> app_cfs) {
    storage::OpenOptions so;
    so.dir = dir;
    so.create_if_missing = true;
    so.app_column_families = std::move(app_cfs);
    opened_ = storage::Db::Open(so, &db_);
    if (opened_.ok()) {
      committer_ = std::make_unique<internal::Committer>(db_.get(), internal::CommitLimits{64, 1 << 20}, 0, this);
    }
  }

  const Status& opened() const { return opened_; }
  storage::Db* db() const { return db_.get(); }
  internal::Committer* committer() const { return committer_.get(); }

  // The stored value of `key`, or nullopt; a failed read fails the test.
  std::optional<std::string> Read(storage::CfHandle* cf, const std::string& key) const {
    std::string value;
    bool found = false;
    Status s = db_->Get(cf, key, &value, &found);
    if (!s.ok()) {
      ADD_FAILURE() << "reading " << key << ": " << s.ToString();
      return std::nullopt;
    }
    return found ? std::optional<std::string>(value) : std::nullopt;
  }
  std::optional<std::string> Read(storage::Cf cf, const std::string& key) const { return Read(db_->cf(cf), key); }

  // CommitListener: nothing dispatches here.
  void OnCommitted(std::vector<std::shared_ptr<const Event>>&) override {}
  void OnTimersChanged(const std::vector<internal::TimerChange>&) override {}

 private:
  Status opened_;
  std::unique_ptr<storage::Db> db_;
  std::unique_ptr<internal::Committer> committer_;
};

}  // namespace walbus::testing

#endif  // WALBUS_TESTS_STORAGE_HARNESS_H_
