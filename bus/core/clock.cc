#include "walbus/clock.h"

namespace walbus {
namespace {

class SystemClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() const override { return std::chrono::steady_clock::now(); }
  std::chrono::system_clock::time_point WallNow() const override { return std::chrono::system_clock::now(); }
};

}  // namespace

std::shared_ptr<const Clock> Clock::System() {
  static const std::shared_ptr<const Clock> clock = std::make_shared<SystemClock>();
  return clock;
}

}  // namespace walbus
