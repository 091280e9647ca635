// The process workload of walbus-crash (--workload process): producers open
// instances of the process "crash-order", each with a timeout of a few
// milliseconds, and cancel about half of them with an event that races the
// timeout. Every step counts its effect in the state column family, so the
// check after catching up reads the database alone:
//
//   started once    "ps/<key>" is 1 for every instance, acknowledged or not
//   completed once  exactly one of "pc/<key>" (cancelled) and "pt/<key>"
//                   (timed out) is 1, the other absent: a timeout never
//                   takes effect once the cancel committed, nor the reverse
//   nothing left    no running instance, no pending timer
//
// An open also asserts "po/<key>" from version 0 to 1, so the check after
// each kill finds every acknowledged open by its version, as it finds the
// item workload's subjects.
#ifndef WALBUS_TOOLS_PROCESS_WORKLOAD_H_
#define WALBUS_TOOLS_PROCESS_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "walbus/bus.h"
#include "walbus/process.h"

namespace walbus::workload {

inline constexpr std::string_view kOpenedType = "crash.order-opened.v1";
inline constexpr std::string_view kCancelledType = "crash.order-cancelled.v1";
inline constexpr std::string_view kCrashProcess = "crash-order";

// The process the workload runs (see the top of the file).
Result<std::shared_ptr<Process>> DefineCrashProcess(const RetryPolicy& retry);

// The key "po/<key>" an open asserts: version 1 once the open committed.
std::string OpenedKey(const std::string& key);
// Opens instance `key` with a timeout `timeout_ms` from its first step.
Status CommitOpen(Bus& bus, const std::string& key, uint32_t timeout_ms);
// Publishes the cancel of instance `key`.
Status CommitCancel(Bus& bus, const std::string& key);

// After every event and timer was handled: checks each instance's effects
// (see the top of the file), one line per failure into *failures.
Status CheckProcesses(Bus& bus, std::vector<std::string>* failures);

}  // namespace walbus::workload

#endif  // WALBUS_TOOLS_PROCESS_WORKLOAD_H_
