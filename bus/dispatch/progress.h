// Progress: which sequence numbers one subscriber has completed, as a
// contiguous low watermark plus the completions above it.
//
// Events are fetched in sequence order but complete out of order (different
// subjects run in parallel). The watermark is the highest seq W such that
// every seq <= W is complete; it is what the checkpoint stores, and on
// recovery everything above it is fetched again (the inbox skips what was
// already handled).
//
// Threading: not thread-safe; owned by the dispatcher thread.
#ifndef WALBUS_BUS_DISPATCH_PROGRESS_H_
#define WALBUS_BUS_DISPATCH_PROGRESS_H_

#include <cstddef>
#include <cstdint>
#include <deque>

namespace walbus::internal {

class Progress {
 public:
  explicit Progress(uint64_t watermark) : watermark_(watermark) {}

  uint64_t watermark() const { return watermark_; }
  // The next seq to fetch.
  uint64_t next() const { return watermark_ + 1 + done_.size(); }
  // Fetched but not yet known to be complete, plus completions above a gap.
  size_t window() const { return done_.size(); }

  // Records that `seq` was fetched. REQUIRES: seq == next().
  void Fetched(uint64_t seq);
  // Marks a fetched seq complete and advances the watermark past every
  // contiguous completion. REQUIRES: watermark() < seq < next(), not
  // completed before.
  void Complete(uint64_t seq);

 private:
  uint64_t watermark_;
  std::deque<bool> done_;  // done_[i] is seq watermark_ + 1 + i
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_PROGRESS_H_
