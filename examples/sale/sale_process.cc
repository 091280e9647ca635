#include "sale_process.h"

#include <string>

#include "sale_events.h"  // generated from the .fbs files
#include "walbus/adapters/flatbuffers.h"

namespace sale {
namespace {

using walbus::Outcome;

Outcome Retry() { return Outcome::RetryAfter(std::chrono::milliseconds(0)); }

walbus::Status SetStage(walbus::ProcessContext& p, shop::SaleStage stage, uint64_t amount) {
  flatbuffers::FlatBufferBuilder fbb;
  return walbus::SetTypedState(p, fbb, shop::CreateSaleState(fbb, stage, amount));
}

// Opened: the items are reserved (by the shop, on this event) and the
// payment window starts.
Outcome Open(const shop::SaleOpened& opened, walbus::ProcessContext& p, const Windows& windows) {
  if (!SetStage(p, shop::SaleStage_AwaitingPayment, opened.amount()).ok()) return Retry();
  return p.SetTimeout("payment", windows.payment).ok() ? Outcome::Done() : Retry();
}

// Paid in time: the payment window closes and the shipment window opens.
Outcome Pay(const shop::SaleState& state, walbus::ProcessContext& p, const Windows& windows) {
  if (state.stage() != shop::SaleStage_AwaitingPayment) return Outcome::Done();  // paid twice: once counts
  if (!p.CancelTimeout("payment").ok() || !SetStage(p, shop::SaleStage_AwaitingShipment, state.amount()).ok()) {
    return Retry();
  }
  return p.SetTimeout("shipment", windows.shipment).ok() ? Outcome::Done() : Retry();
}

// The compensation: not paid in time, the reservation goes back.
Outcome Release(walbus::ProcessContext& p) {
  flatbuffers::FlatBufferBuilder fbb;
  auto released = shop::CreateReservationReleasedDirect(fbb, p.Key().c_str(), "not paid in time");
  if (!p.Scope().Publish(walbus::TypedEvent(p.Key(), fbb, released)).ok()) return Retry();
  p.Complete();
  return Outcome::Done();
}

Outcome ReportLate(walbus::ProcessContext& p) {
  flatbuffers::FlatBufferBuilder fbb;
  if (!p.Scope().Publish(walbus::TypedEvent(p.Key(), fbb, shop::CreateShipmentLateDirect(fbb, p.Key().c_str()))).ok()) {
    return Retry();
  }
  p.Complete();
  return Outcome::Done();
}

Outcome Step(const walbus::Event& e, walbus::ProcessContext& p, const Windows& windows) {
  if (p.IsNew()) {
    const auto* opened = walbus::PayloadAs<shop::SaleOpened>(e);
    return opened != nullptr ? Open(*opened, p, windows) : Outcome::Reject("not a SaleOpened");
  }
  const shop::SaleState* state = walbus::StateAs<shop::SaleState>(p);
  if (state == nullptr) return Outcome::Reject("the sale's state does not verify");
  if (p.FiredTimeout() == "payment") return Release(p);
  if (p.FiredTimeout() == "shipment") return ReportLate(p);
  if (e.type == walbus::EventContract<shop::PaymentTaken>::kType) return Pay(*state, p, windows);
  if (e.type == walbus::EventContract<shop::ShipmentConfirmed>::kType) p.Complete();  // its timeout goes with it
  return Outcome::Done();
}

walbus::ProcessStep StepOf(std::string_view type, bool starts) {
  walbus::ProcessStep step;
  step.type = std::string(type);
  step.starts = starts;
  return step;
}

}  // namespace

walbus::ProcessDefinition SaleProcess(Windows windows) {
  walbus::ProcessDefinition d;
  d.name = "sale";
  d.steps = {StepOf(walbus::EventContract<shop::SaleOpened>::kType, true),
             StepOf(walbus::EventContract<shop::PaymentTaken>::kType, false),
             StepOf(walbus::EventContract<shop::ShipmentConfirmed>::kType, false)};
  d.state_type = walbus::StateTypeOf<shop::SaleState>();
  d.handler = [windows](const walbus::Event& e, walbus::ProcessContext& p) { return Step(e, p, windows); };
  return d;
}

walbus::Status RegisterContracts(walbus::Bus& bus) { return RegisterEventSchemas(bus); }

}  // namespace sale
