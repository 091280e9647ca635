// walbus/adapters/flatbuffers.h: event payloads as typed FlatBuffers tables.
//
// Optional, and header-only: it includes FlatBuffers' own header, which
// the core walbus headers do not. It works with the bindings that
// walbus_add_event_schemas generates (docs/contracts.md): each .fbs file's
// root table, its file_identifier and its `walbus_event` attribute become
// an EventContract<Table>, so code names a table and walbus knows its
// event type, its identifier and its schema.
//
//   walbus::Status s = orders::RegisterEventSchemas(*bus);  // generated
//   flatbuffers::FlatBufferBuilder fbb;
//   auto root = orders::CreateOrderApprovedDirect(fbb, "order-42", 1250);
//   tx.Publish(walbus::TypedEvent("order-42", fbb, root));
//   bus->Subscribe(walbus::TypedSubscriber<orders::OrderApproved>(
//       "invoicing", [](const walbus::Event& e, const orders::OrderApproved& order,
//                       walbus::HandlerContext& ctx) { ... }));
//
// Threading: every function here is as thread-safe as the Bus and scope
// calls it makes; none keeps state.
#ifndef WALBUS_ADAPTERS_FLATBUFFERS_H_
#define WALBUS_ADAPTERS_FLATBUFFERS_H_

#include <flatbuffers/flatbuffers.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "walbus/bus.h"
#include "walbus/contracts.h"
#include "walbus/event.h"
#include "walbus/process.h"
#include "walbus/status.h"
#include "walbus/subscriber.h"

namespace walbus {

// The binding of a FlatBuffers root table to its event type. Generated
// code specializes it for each table:
//   static constexpr std::string_view kType;    // "orders.order-approved.v1"
//   static constexpr const char* kFileIdentifier;  // "ORDA"; nullptr without one
//   static std::string_view BinarySchema();     // what flatc --binary --schema wrote
template <class Table>
struct EventContract;

// The media type a typed event's payload carries.
inline constexpr std::string_view kFlatBuffersContentType = "application/x-flatbuffers";

// The nesting depth and table count a typed payload may reach, as for a
// payload checked by its registered schema.
// @{
inline constexpr flatbuffers::uoffset_t kTypedPayloadMaxDepth = 64;
inline constexpr flatbuffers::uoffset_t kTypedPayloadMaxTables = 1u << 20;
// @}

// Registers Table's schema as the contract of its event type
// (EventContracts::RegisterSchema: a change that breaks an accepted
// version is refused).
template <class Table>
[[nodiscard]] Result<SchemaVersion> RegisterContract(Bus& bus) {
  return bus.Contracts().RegisterSchema(std::string(EventContract<Table>::kType), EventContract<Table>::BinarySchema());
}

// Registers each table's contract in order; the first refusal (its
// message names the event type), and the rest are not registered.
template <class... Tables>
[[nodiscard]] Status RegisterContracts(Bus& bus) {
  Status status;
  auto one = [&status](Result<SchemaVersion> registered) {
    status = registered.status();
    return registered.ok();
  };
  (one(RegisterContract<Tables>(bus)) && ...);
  return status;
}

// An event of Table's type about `subject` whose payload is `root`: the
// builder is finished here with the table's file identifier and its bytes
// copied, so it may be cleared and reused after.
template <class Table>
EventSpec TypedEvent(std::string subject, flatbuffers::FlatBufferBuilder& builder, flatbuffers::Offset<Table> root) {
  builder.Finish(root, EventContract<Table>::kFileIdentifier);
  EventSpec spec;
  spec.type = std::string(EventContract<Table>::kType);
  spec.subject = std::move(subject);
  spec.content_type = std::string(kFlatBuffersContentType);
  spec.data.assign(reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize());
  return spec;
}

// The payload of `event` as a Table, verified by the code flatc generated
// (file identifier, bounds, depth and table caps); nullptr when it does
// not verify as one. Points into event.data.
template <class Table>
const Table* PayloadAs(const Event& event) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(event.data.data());
  flatbuffers::Verifier verifier(bytes, event.data.size(), kTypedPayloadMaxDepth, kTypedPayloadMaxTables);
  if (!verifier.VerifyBuffer<Table>(EventContract<Table>::kFileIdentifier)) return nullptr;
  return flatbuffers::GetRoot<Table>(bytes);
}

// A handler of Table's events: the event, its verified payload, the
// context.
template <class Table>
using TypedHandlerFn = std::function<Outcome(const Event&, const Table&, HandlerContext&)>;

// A handler that gets the verified Table beside the event. An event of
// another type, or a payload that does not verify as Table, is rejected
// (dead-lettered) without calling `handle`: neither gets better on a retry.
template <class Table>
Handler TypedHandler(TypedHandlerFn<Table> handle) {
  return [handle = std::move(handle)](const Event& event, HandlerContext& ctx) -> Outcome {
    if (event.type != EventContract<Table>::kType) {
      return Outcome::Reject("an event of type " + event.type + " reached the handler of " +
                             std::string(EventContract<Table>::kType));
    }
    const Table* payload = PayloadAs<Table>(event);
    if (payload == nullptr) {
      return Outcome::Reject("the payload does not verify as " + std::string(EventContract<Table>::kType));
    }
    return handle(event, *payload, ctx);
  };
}

// A subscriber of Table's event type alone, with a typed handler; the
// other options keep their defaults and may be set on the result.
template <class Table>
SubscriberOptions TypedSubscriber(std::string name, TypedHandlerFn<Table> handle) {
  SubscriberOptions subscriber;
  subscriber.name = std::move(name);
  subscriber.types = {std::string(EventContract<Table>::kType)};
  subscriber.handler = TypedHandler<Table>(std::move(handle));
  return subscriber;
}

// Builds To's root from the verified From in the builder it is given.
template <class From, class To>
using TypedUpcasterFn =
    std::function<Result<flatbuffers::Offset<To>>(const Event&, const From&, flatbuffers::FlatBufferBuilder&)>;

// Registers an upcaster from From's event type to To's
// (EventContracts::RegisterUpcaster) that reads the verified From and
// builds To's root in the builder it is given; the builder is finished with To's file identifier. A From payload
// that does not verify, or an error `upcast` returns, is a failed attempt
// of the subscriber's handler.
template <class From, class To>
[[nodiscard]] Status RegisterTypedUpcaster(Bus& bus, TypedUpcasterFn<From, To> upcast) {
  Upcaster upcaster = [upcast = std::move(upcast)](const Event& from) -> Result<std::string> {
    const From* payload = PayloadAs<From>(from);
    if (payload == nullptr) {
      return Status::InvalidArgument("the payload does not verify as " + std::string(EventContract<From>::kType));
    }
    flatbuffers::FlatBufferBuilder builder;
    Result<flatbuffers::Offset<To>> root = upcast(from, *payload, builder);
    if (!root.ok()) return root.status();
    builder.Finish(*root, EventContract<To>::kFileIdentifier);
    return std::string(reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize());
  };
  return bus.Contracts().RegisterUpcaster(std::string(EventContract<From>::kType),
                                          std::string(EventContract<To>::kType), std::move(upcaster));
}

// A process's state as a Table (walbus/process.h): set the definition's
// state_type to StateTypeOf for the Table and register its contract, so
// every state is verified when set and its schema version kept.
// @{
template <class Table>
std::string StateTypeOf() {
  return std::string(EventContract<Table>::kType);
}
// The instance's state as a verified Table; nullptr while it has none (a
// new instance) or when it does not verify as one.
template <class Table>
const Table* StateAs(const ProcessContext& process) {
  const std::string& state = process.State();
  const auto* bytes = reinterpret_cast<const uint8_t*>(state.data());
  flatbuffers::Verifier verifier(bytes, state.size(), kTypedPayloadMaxDepth, kTypedPayloadMaxTables);
  if (state.empty() || !verifier.VerifyBuffer<Table>(EventContract<Table>::kFileIdentifier)) return nullptr;
  return flatbuffers::GetRoot<Table>(bytes);
}
// Replaces the state with `root`, finishing the builder with Table's file
// identifier (ProcessContext::SetState: committed with the step).
template <class Table>
Status SetTypedState(ProcessContext& process, flatbuffers::FlatBufferBuilder& builder,
                     flatbuffers::Offset<Table> root) {
  builder.Finish(root, EventContract<Table>::kFileIdentifier);
  return process.SetState(std::string(reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize()));
}
// @}

// For an application's contract tests: Table's schema must be a compatible
// evolution of every schema pinned for its event type (CheckPinnedSchema).
//   EXPECT_EQ(walbus::CheckPinnedContract<orders::OrderApproved>("contracts").ToString(), "OK");
template <class Table>
[[nodiscard]] Status CheckPinnedContract(const std::string& pinned_dir) {
  return CheckPinnedSchema(std::string(EventContract<Table>::kType), EventContract<Table>::BinarySchema(), pinned_dir);
}

}  // namespace walbus

#endif  // WALBUS_ADAPTERS_FLATBUFFERS_H_
