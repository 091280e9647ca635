// rebuild: a projection rebuilt from its events, without doubling.
//
//   rebuild [DIR]   (default ./rebuild-bus; removed first)
//
// An inventory keeps "stock" (on hand per SKU) as a projection of stock
// movements. A fresh-scope replay alone runs every movement again on top of
// what the projection holds, and doubles it. A rebuild clears the
// projection in the very commit that records the replay (so a crash can
// never leave it cleared and not replayed, or replayed twice), and runs
// every event the projection ever took once on the cleared state: the
// replay up to its checkpoint, live delivery after it.
//
// Prints the stock before and after, read as a list through a ReadView;
// exits 0 when the rebuilt stock equals the original.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "walbus/bus.h"

namespace {

constexpr const char* kMoved = "inventory.stock-moved.v1";

int Fail(const char* what, const walbus::Status& s) {
  std::fprintf(stderr, "rebuild: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

walbus::Options InventoryOptions(const std::string& dir) {
  walbus::Options options;
  options.dir = dir;
  options.column_families = {"stock"};
  // A rebuild needs every event the projection ever took: keep them.
  options.retain_events = 10'000'000;
  return options;
}

// The projection: on hand per SKU, the sum of its movements. It may run
// again without harm once its state is cleared (side_effect_safe).
walbus::SubscriberOptions StockView() {
  walbus::SubscriberOptions view;
  view.name = "stock-view";
  view.types = {kMoved};
  view.side_effect_safe = true;
  view.handler = [](const walbus::Event& e, walbus::HandlerContext& ctx) {
    auto on_hand = ctx.Get("stock", e.subject);
    if (!on_hand.ok()) return walbus::Outcome::RetryAfter(std::chrono::milliseconds(10));
    const long next = std::stol(on_hand->value_or("0")) + std::stol(e.data);
    if (!ctx.Put("stock", e.subject, std::to_string(next)).ok()) {
      return walbus::Outcome::RetryAfter(std::chrono::milliseconds(10));
    }
    return walbus::Outcome::Done();
  };
  return view;
}

// Every SKU and its stock, in key order, from one snapshot.
walbus::Result<std::map<std::string, std::string>> StockList(walbus::Bus& bus) {
  std::map<std::string, std::string> list;
  walbus::ReadView view = bus.Read();
  walbus::ScanOptions options;
  options.limit = 100;
  for (;;) {
    walbus::Result<walbus::ScanPage> page = view.Scan("stock", options);
    if (!page.ok()) return page.status();
    for (const walbus::KeyValue& row : page->rows) list[row.key] = row.value;
    if (page->resume_after.empty()) return list;
    options.resume_after = page->resume_after;
  }
}

void Print(const char* title, const std::map<std::string, std::string>& list) {
  std::printf("%s:", title);
  for (const auto& [sku, on_hand] : list) std::printf(" %s=%s", sku.c_str(), on_hand.c_str());
  std::printf("\n");
}

// The first run: movements are published and projected.
walbus::Result<std::map<std::string, std::string>> RunInventory(const std::string& dir) {
  std::unique_ptr<walbus::Bus> bus;
  if (walbus::Status s = walbus::Bus::Open(InventoryOptions(dir), &bus); !s.ok()) return s;
  if (walbus::Status s = bus->Subscribe(StockView()); !s.ok()) return s;
  if (walbus::Status s = bus->Start(); !s.ok()) return s;
  const struct {
    const char* sku;
    int quantity;
  } movements[] = {{"sku-apple", 40}, {"sku-pear", 25}, {"sku-apple", -15}, {"sku-plum", 60}, {"sku-pear", -5}};
  for (const auto& m : movements) {
    walbus::Transaction tx = bus->Begin();
    walbus::EventSpec moved{.type = kMoved, .subject = m.sku, .data = std::to_string(m.quantity)};
    if (walbus::Status s = tx.Publish(moved).status(); !s.ok()) return s;
    if (walbus::Status s = tx.Commit().status(); !s.ok()) return s;
  }
  if (walbus::Status s = bus->WaitIdle(std::chrono::seconds(30)); !s.ok()) return s;
  auto list = StockList(*bus);
  if (walbus::Status s = bus->Close(); !s.ok()) return s;
  return list;
}

// The next start, after a fix to the projection: the rebuild is recorded
// before the projection subscribes, then runs beside live delivery.
walbus::Result<std::map<std::string, std::string>> RebuildStock(const std::string& dir) {
  std::unique_ptr<walbus::Bus> bus;
  if (walbus::Status s = walbus::Bus::Open(InventoryOptions(dir), &bus); !s.ok()) return s;
  walbus::ReplayRequest rebuild;
  rebuild.subscriber = "stock-view";
  rebuild.mode = walbus::ReplayMode::kFreshScope;
  rebuild.clear_column_families = {"stock"};
  rebuild.action = {"deploy-42", "stock view fix: rebuild from the movements", false};
  walbus::Result<walbus::ReplayReport> recorded = bus->Operator().StartReplay(rebuild);
  if (!recorded.ok()) return recorded.status();
  std::printf("rebuild %llu recorded: %s\n", static_cast<unsigned long long>(recorded->replay_id),
              recorded->selection.c_str());
  if (walbus::Status s = bus->Subscribe(StockView()); !s.ok()) return s;
  if (walbus::Status s = bus->Start(); !s.ok()) return s;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    walbus::Result<walbus::ReplayReport> report = bus->Operator().Replay(recorded->replay_id);
    if (!report.ok()) return report.status();
    if (report->state == walbus::ReplayState::kDone) break;
    if (report->state != walbus::ReplayState::kRunning) return walbus::Status::Corruption("rebuild " + report->error);
    if (std::chrono::steady_clock::now() > deadline) return walbus::Status::TimedOut("rebuild still running");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (walbus::Status s = bus->WaitIdle(std::chrono::seconds(30)); !s.ok()) return s;
  auto list = StockList(*bus);
  if (walbus::Status s = bus->Close(); !s.ok()) return s;
  return list;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "rebuild-bus";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  auto before = RunInventory(dir);
  if (!before.ok()) return Fail("first run", before.status());
  Print("stock", *before);
  auto after = RebuildStock(dir);
  if (!after.ok()) return Fail("rebuild", after.status());
  Print("stock after the rebuild", *after);
  if (*after != *before) {
    std::fprintf(stderr, "rebuild: the rebuilt stock differs from the original\n");
    return 1;
  }
  std::printf("rebuild: the same stock, nothing doubled\n");
  return 0;
}
