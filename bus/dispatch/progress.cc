#include "bus/dispatch/progress.h"

#include <cassert>

namespace walbus::internal {

void Progress::Fetched(uint64_t seq) {
  assert(seq == next());
  (void)seq;
  done_.push_back(false);
}

void Progress::Complete(uint64_t seq) {
  assert(seq > watermark_ && seq < next());
  const size_t index = static_cast<size_t>(seq - watermark_ - 1);
  assert(!done_[index]);
  done_[index] = true;
  while (!done_.empty() && done_.front()) {
    done_.pop_front();
    ++watermark_;
  }
}

}  // namespace walbus::internal
